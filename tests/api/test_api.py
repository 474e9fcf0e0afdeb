"""The HTTP service: plans through POST /plan, one test per kind of bad input, health, docs."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.api.routes import PLAN_EXAMPLE
from planner.api.settings import Settings
from planner.core.models import Plan
from tests.support.samples import TWO_PHASE

BASE = TWO_PHASE  # a, b share bytes across the barrier at 4; c lives beside both

JSON = {"content-type": "application/json"}  # the content type every POST body needs


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(solver_pool="threads"))) as c:
        yield c


def _request(**changes: Any) -> dict[str, Any]:
    request = copy.deepcopy(BASE)
    request.update(changes)
    return request


def _with_buffer(index: int, **changes: Any) -> dict[str, Any]:
    request = _request()
    request["buffers"][index].update(changes)
    return request


def _planned(client: TestClient, request: dict[str, Any]) -> Plan:
    """POST the request, expect a plan, and check it with the static validator."""
    response = client.post("/plan", json=request)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    plan = Plan.model_validate_json(response.content)
    report = planner.validate(request, plan)
    assert report.valid, report.violations
    return plan


def _rejected(client: TestClient, body: dict[str, Any] | bytes) -> dict[str, Any]:
    """POST the body, expect a 422 in FastAPI's shape, and return its only error."""
    if isinstance(body, bytes):
        response = client.post("/plan", content=body, headers=JSON)
    else:
        response = client.post("/plan", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert len(detail) == 1, detail
    error: dict[str, Any] = detail[0]
    assert set(error) == {"loc", "msg", "type", "input"}
    return error


# --- plans ------------------------------------------------------------------------------------


def test_plans_a_valid_request(client: TestClient) -> None:
    plan = _planned(client, BASE)
    assert {p.id for p in plan.placements} == {"a", "b", "c"}
    assert plan.lower_bound <= plan.arena_bytes <= plan.naive_bytes


def test_plans_the_documented_example(client: TestClient) -> None:
    plan = _planned(client, PLAN_EXAMPLE)
    assert plan.name == "gemm_smem_epilogue"
    assert plan.status == "optimal"


def test_same_request_same_bytes(client: TestClient) -> None:
    first = client.post("/plan", json=BASE)
    second = client.post("/plan", json=BASE)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert first.content == planner.plan(BASE).model_dump_json().encode()


def test_server_timing_in_header_not_body(client: TestClient) -> None:
    request = _request(name="timed")  # not planned by any other test: a cache miss first
    response = client.post("/plan", json=request)
    assert re.fullmatch(r"plan;dur=\d+(\.\d+)?", response.headers["server-timing"])
    assert "dur" not in response.text
    repeat = client.post("/plan", json=request)
    assert re.fullmatch(r"cache;dur=\d+(\.\d+)?", repeat.headers["server-timing"])


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "Application/JSON", "application/vnd.planner+json"],
)
def test_json_content_types_are_planned(client: TestClient, content_type: str) -> None:
    body = json.dumps(BASE).encode()
    response = client.post("/plan", content=body, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    assert response.content == client.post("/plan", json=BASE).content


# --- bad input: one test per kind, exact loc and type -----------------------------------------


def test_rejects_empty_lifetime(client: TestClient) -> None:
    request = _request()
    request["buffers"].append({"id": "d", "size": 64, "start": 5, "end": 3})
    error = _rejected(client, request)
    assert error["loc"] == ["body", "buffers", 3, "end"]
    assert error["type"] == "empty_lifetime"
    assert "end (3)" in error["msg"]
    assert "start (5)" in error["msg"]
    assert error["input"] == 3


def test_rejects_size_zero(client: TestClient) -> None:
    error = _rejected(client, _with_buffer(1, size=0))
    assert error["loc"] == ["body", "buffers", 1, "size"]
    assert error["type"] == "greater_than_equal"
    assert error["input"] == 0


def test_rejects_alignment_not_power_of_two(client: TestClient) -> None:
    error = _rejected(client, _with_buffer(0, alignment=3))
    assert error["loc"] == ["body", "buffers", 0, "alignment"]
    assert error["type"] == "alignment_not_power_of_two"
    assert "alignment 3" in error["msg"]


def test_rejects_duplicate_id(client: TestClient) -> None:
    error = _rejected(client, _with_buffer(2, id="a"))
    assert error["loc"] == ["body", "buffers", 2, "id"]
    assert error["type"] == "duplicate_id"
    assert "'a'" in error["msg"]
    assert "buffers[0]" in error["msg"]


def test_rejects_misaligned_offset(client: TestClient) -> None:
    error = _rejected(client, _with_buffer(2, offset=8))
    assert error["loc"] == ["body", "buffers", 2, "offset"]
    assert error["type"] == "misaligned_offset"
    assert "offset 8" in error["msg"]
    assert "alignment 16" in error["msg"]
    assert error["input"] == 8


def test_rejects_barrier_out_of_range(client: TestClient) -> None:
    error = _rejected(client, _request(barriers=[4, 99]))
    assert error["loc"] == ["body", "barriers", 1]
    assert error["type"] == "barrier_out_of_range"
    assert "99" in error["msg"]


def test_rejects_access_outside_lifetime(client: TestClient) -> None:
    access = {"op": "write", "at": 6, "bytes": 4, "threads": "all"}
    error = _rejected(client, _with_buffer(0, accesses=[access]))
    assert error["loc"] == ["body", "buffers", 0, "accesses", 0, "at"]
    assert error["type"] == "access_outside_lifetime"
    assert "point 6" in error["msg"]
    assert "[0, 4)" in error["msg"]


def test_rejects_access_outside_buffer(client: TestClient) -> None:
    # 32 threads x 4 bytes = bytes [0, 128) of a 64-byte buffer.
    access = {"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}
    request = _with_buffer(0, accesses=[access])
    request["block"] = [32]
    error = _rejected(client, request)
    assert error["loc"] == ["body", "buffers", 0, "accesses", 0, "index"]
    assert error["type"] == "access_outside_buffer"
    assert "[0, 128)" in error["msg"]
    assert "64 bytes" in error["msg"]


def test_rejects_unknown_index_variable(client: TestClient) -> None:
    access = {"op": "read", "at": 1, "bytes": 4, "index": {"j": 1}}
    error = _rejected(client, _with_buffer(0, accesses=[access]))
    assert error["loc"] == ["body", "buffers", 0, "accesses", 0, "index", "j"]
    assert error["type"] == "unknown_index_variable"
    assert "'j'" in error["msg"]


def test_rejects_unknown_field(client: TestClient) -> None:
    error = _rejected(client, _with_buffer(1, color="red"))
    assert error["loc"] == ["body", "buffers", 1, "color"]
    assert error["type"] == "extra_forbidden"
    assert error["input"] == "red"


def test_rejects_malformed_json(client: TestClient) -> None:
    error = _rejected(client, b'{"buffers": [')
    assert error["loc"] == ["body"]
    assert error["type"] == "json_invalid"
    assert error["msg"].startswith("malformed JSON")


def test_rejects_an_integer_too_long_to_read_naming_its_field(client: TestClient) -> None:
    marker = 123454321
    body = json.dumps(_with_buffer(1, size=marker)).replace(str(marker), "9" * 5000)
    error = _rejected(client, body.encode())
    assert error["loc"] == ["body", "buffers", 1, "size"]
    assert error["type"] == "int_parsing_size"
    assert "5000 digits" in error["msg"]
    response = client.post(
        "/validate",
        content=f'{{"request": {json.dumps(BASE)}, "plan": {{"arena_bytes": {"1" * 4400}}}}}',
        headers=JSON,
    )
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "plan", "arena_bytes"]]


def test_rejects_empty_body(client: TestClient) -> None:
    error = _rejected(client, b"")
    assert error["loc"] == ["body"]
    assert error["type"] == "missing"
    assert "empty" in error["msg"]


def test_rejects_too_many_buffers() -> None:
    with TestClient(create_app(Settings(solver_pool="threads", max_buffers=2))) as small:
        error = _rejected(small, BASE)
    assert error["loc"] == ["body", "buffers"]
    assert error["type"] == "too_many_buffers"
    assert "3 buffers" in error["msg"]
    assert "limit of 2" in error["msg"]


def test_rejects_unknown_target(client: TestClient) -> None:
    error = _rejected(client, _request(target="sm_99"))
    assert error["loc"] == ["body", "target"]
    assert error["type"] == "unknown_target"
    assert "'sm_99'" in error["msg"]


def test_rejects_body_over_size_limit() -> None:
    body = json.dumps(BASE).encode()
    with TestClient(
        create_app(Settings(solver_pool="threads", max_body_bytes=len(body) - 1))
    ) as small:
        response = small.post("/plan", content=body, headers=JSON)
    assert response.status_code == 413
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body"]
    assert error["type"] == "body_too_large"


def test_lists_every_error_at_once(client: TestClient) -> None:
    request = _with_buffer(0, size=0)
    request["buffers"][2]["alignment"] = 3
    response = client.post("/plan", json=request)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    assert locs == [["body", "buffers", 0, "size"], ["body", "buffers", 2, "alignment"]]


def test_nan_input_is_echoed_as_null(client: TestClient) -> None:
    # pydantic's JSON parser accepts NaN; the echoed input must still be valid JSON.
    body = json.dumps(BASE).replace('"capacity": 1024', '"capacity": NaN').encode()
    error = _rejected(client, body)
    assert error["loc"] == ["body", "capacity"]
    assert error["input"] is None


def test_internal_error_is_a_500(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(request: Any, *, max_buffers: int = 0) -> Plan:
        raise planner.InternalError("plan for 'k' failed the static check: overlap")

    monkeypatch.setattr(planner, "plan", broken)
    # No `with`: the start-up warm-up would meet the broken planner first.
    response = TestClient(create_app(Settings(solver_pool="threads", cache_size=0))).post(
        "/plan", json=BASE
    )
    assert response.status_code == 500
    assert response.json() == {
        "detail": [
            {
                "loc": [],
                "msg": "plan for 'k' failed the static check: overlap",
                "type": "internal_error",
            }
        ]
    }


def test_other_routes_keep_fastapi_validation_errors() -> None:
    app: FastAPI = create_app(Settings(solver_pool="threads"))

    @app.get("/square")
    async def square(n: int) -> int:
        return n * n

    with TestClient(app) as c:
        response = c.get("/square", params={"n": "x"})
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["query", "n"]
    assert error["type"] == "int_parsing"


# --- health and docs --------------------------------------------------------------------------


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body == {"status": "ok", "version": version("alloc-planner"), "extras": body["extras"]}
    assert set(body["extras"]) <= {"exact", "gpu", "compare", "mlir", "triton"}
    assert ("exact" in body["extras"]) == (importlib.util.find_spec("ortools") is not None)


def test_openapi_documents_plan(client: TestClient) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    operation = response.json()["paths"]["/plan"]["post"]
    body = operation["requestBody"]["content"]["application/json"]
    schema = response.json()["components"]["schemas"]["PlanRequest"]
    assert body["schema"] == {"$ref": "#/components/schemas/PlanRequest"}
    assert schema["additionalProperties"] is False
    assert {"buffers", "barriers", "options"} <= set(schema["properties"])
    assert body["example"] == PLAN_EXAMPLE
    # Inlined: a "#/$defs/..." ref would resolve against the document root and break /docs.
    assert "#/$defs/" not in json.dumps(response.json())
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Plan"
    }
    assert {"413", "422", "500", "503"} <= set(operation["responses"])


def test_docs_page_renders(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
