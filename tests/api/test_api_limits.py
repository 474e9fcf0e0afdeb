"""Hostile bodies in the app: errors capped, arrays counted before their elements are
validated, and bodies that would be slow to parse kept off the event loop."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import planner
from planner.core.errors import MAX_FIELD_ERRORS, RequestError
from tests.support.apps import spy_pool, threads_app
from tests.support.samples import TWO_PHASE

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(threads_app()) as c:
        yield c


def _empty_objects(count: int) -> bytes:
    return b'{"buffers":[' + b",".join([b"{}"] * count) + b"]}"


# --- errors capped ----------------------------------------------------------------------------


def test_request_error_keeps_the_first_errors_and_counts_the_rest() -> None:
    errors = [
        {"loc": ["buffers", i, "id"], "msg": "missing", "type": "missing"} for i in range(250)
    ]
    exc = RequestError(errors)
    assert len(exc.errors) == MAX_FIELD_ERRORS + 1
    assert [e["loc"] for e in exc.errors[:MAX_FIELD_ERRORS]] == [
        ["buffers", i, "id"] for i in range(MAX_FIELD_ERRORS)
    ]
    last = exc.errors[-1]
    assert last["type"] == "too_many_errors"
    assert last["input"] == 250 - MAX_FIELD_ERRORS
    assert f"and {250 - MAX_FIELD_ERRORS} more errors" in last["msg"]
    assert str(exc) == "buffers.0.id: missing (and 249 more errors)"


def test_a_64k_body_of_empty_objects_is_one_small_422_parsed_by_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _empty_objects(21_000)
    assert len(body) < 64 << 10
    app = threads_app()
    calls = spy_pool(app, monkeypatch)
    with TestClient(app) as c:
        started = time.perf_counter()
        response = c.post("/plan", content=body, headers=JSON)
        seconds = time.perf_counter() - started
    assert response.status_code == 422, response.text[:500]
    assert len(response.content) < 32 << 10  # not 7.8 MB
    detail = response.json()["detail"]
    assert len(detail) == MAX_FIELD_ERRORS + 1
    assert detail[0]["loc"] == ["body", "buffers", 0, "id"]
    assert detail[0]["type"] == "missing"
    assert detail[-1]["type"] == "too_many_errors"
    assert detail[-1]["input"] == 4 * 21_000 - MAX_FIELD_ERRORS  # id, size, start, end each
    assert len(calls) == 1  # parsed on a worker, not on the event loop
    assert seconds < 10


def test_an_array_over_the_buffer_limit_is_refused_before_its_elements_are_read(
    client: TestClient,
) -> None:
    body = _empty_objects(1_000_000)  # 3 MB: four million missing fields, were they read
    started = time.perf_counter()
    response = client.post("/plan", content=body, headers=JSON)
    seconds = time.perf_counter() - started
    assert response.status_code == 422, response.text[:500]
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "buffers"]
    assert error["type"] == "too_many_buffers"
    assert error["input"] == 1_000_000
    assert "1000000 buffers exceed the limit of 100000" in error["msg"]
    assert seconds < 10


def test_a_buffer_array_of_other_values_is_counted_too() -> None:
    with TestClient(threads_app(max_buffers=10)) as c:
        response = c.post("/plan", content=b'{"buffers":[1,1,1,1,1,1,1,1,1,1,1]}', headers=JSON)
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "buffers"]
    assert error["input"] == 11


def test_validate_counts_the_plans_placements_before_reading_them(client: TestClient) -> None:
    request = planner.PlanRequest.model_validate(copy.deepcopy(TWO_PHASE)).model_dump_json()
    placements = b",".join([b"{}"] * 200_000)
    body = b'{"request":' + request.encode() + b',"plan":{"placements":[' + placements + b"]}}"
    response = client.post("/validate", content=body, headers=JSON)
    assert response.status_code == 422, response.text[:500]
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "plan", "placements"]
    assert error["type"] == "too_many_buffers"
    assert error["input"] == 200_000


def test_a_request_within_the_limit_still_lists_its_errors(client: TestClient) -> None:
    request = copy.deepcopy(TWO_PHASE)
    request["buffers"][0]["size"] = 0
    request["buffers"][1]["end"] = -1
    response = client.post("/plan", json=request)
    assert response.status_code == 422
    locs = [tuple(e["loc"]) for e in response.json()["detail"]]
    assert ("body", "buffers", 0, "size") in locs
    assert ("body", "buffers", 1, "end") in locs


# --- Host, Content-Encoding, docs assets ----------------------------------------------------


@pytest.mark.parametrize(
    ("allowed", "host", "status"),
    [
        ("", "localhost:8000", 200),
        ("", "127.0.0.1", 200),
        ("", "[::1]:8000", 200),
        ("", "LOCALHOST", 200),
        ("", "attacker.example", 400),
        ("", "attacker.example:8000", 400),
        ("", "localhost.attacker.example", 400),
        ("planner, build-farm.internal", "planner:8000", 200),
        ("planner", "other:8000", 400),
        ("*", "anything.example", 200),
    ],
)
def test_only_loopback_and_configured_hosts_are_answered(
    allowed: str, host: str, status: int
) -> None:
    with TestClient(threads_app(allowed_hosts=allowed)) as c:
        response = c.get("/healthz", headers={"host": host})
        plan = c.post("/plan", json=TWO_PHASE, headers={"host": host})
    assert response.status_code == status, response.text
    assert plan.status_code == status, plan.text
    if status == 400:
        (error,) = response.json()["detail"]
        assert error["loc"] == ["header", "host"]
        assert error["type"] == "host_not_allowed"
        assert error["input"] == host
        assert "PLANNER_ALLOWED_HOSTS" in error["msg"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "GZIP", "x-custom"])
def test_an_encoded_body_is_415(client: TestClient, encoding: str) -> None:
    response = client.post(
        "/plan",
        json=TWO_PHASE,
        headers={"content-encoding": encoding},
    )
    assert response.status_code == 415, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["header", "content-encoding"]
    assert error["type"] == "unsupported_content_encoding"
    assert error["input"] == encoding


def test_an_identity_encoded_body_is_read(client: TestClient) -> None:
    response = client.post("/plan", json=TWO_PHASE, headers={"content-encoding": "identity"})
    assert response.status_code == 200, response.text
    plan = planner.Plan.model_validate_json(response.content)
    assert planner.validate(TWO_PHASE, plan).valid


@pytest.mark.parametrize(
    "name",
    [
        "index.html",  # Swagger's demo page: it loads a remote URL
        "swagger-initializer.js",
        "oauth2-redirect.html",
        "swagger-ui-bundle.js.map",
        "swagger-ui.css.map",
        "swagger-ui.js",
        "../__init__.py",
    ],
)
def test_docs_assets_are_only_what_the_page_loads(client: TestClient, name: str) -> None:
    assert client.get(f"/docs/assets/{name}").status_code == 404


def test_docs_assets_serve_the_page_files(client: TestClient) -> None:
    script = client.get("/docs/assets/swagger-ui-bundle.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert client.get("/docs/assets/swagger-ui.css").status_code == 200
    assert client.get("/docs/assets/favicon-32x32.png").headers["content-type"] == "image/png"
