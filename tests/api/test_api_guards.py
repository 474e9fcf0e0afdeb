"""What a request cannot do to the service: skip the limits, send another content type,
pass strings or booleans for integers, echo megabytes back, crash it with a non-JSON 500,
fill the plan cache, or stall it through ``/emit``."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import planner
import planner.api.routes
from planner.api import create_app
from planner.api.cache import PlanCache
from planner.api.docs import EMIT_BODY
from planner.api.limits import buffers_at_least, check_buffer_count
from planner.api.settings import Settings
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan
from tests.support.apps import spy_pool, threads_app
from tests.support.samples import TWO_PHASE

JSON = {"content-type": "application/json"}
EMIT_BODY_EXAMPLE = EMIT_BODY["requestBody"]["content"]["application/json"]["example"]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(threads_app()) as c:
        yield c


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    (error,) = response.json()["detail"]
    assert set(error) >= {"loc", "msg", "type"}
    result: dict[str, Any] = error
    return result


def _many_buffers(n: int, **extra: Any) -> dict[str, Any]:
    buffers = [
        {"id": f"buffer_{i:06d}", "size": 16, "start": i % 7, "end": i % 7 + 1, **extra}
        for i in range(n)
    ]
    return {"name": "many", "buffers": buffers, "options": {"sync": "none"}}


def _assert_planned(request: dict[str, Any], response: httpx.Response) -> Plan:
    assert response.status_code == 200, response.text
    plan = Plan.model_validate_json(response.content)
    assert planner.validate(request, plan).valid
    return plan


# --- limits refused before the pool ------------------------------------------------------------


def test_too_many_buffers_in_a_large_body_is_refused_before_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = _many_buffers(3000)
    body = json.dumps(request).encode()
    assert len(body) > 64 << 10  # parsed by a worker, were it queued
    app = threads_app(max_buffers=2000)
    calls = spy_pool(app, monkeypatch)
    with TestClient(app) as c:
        error = _error(c.post("/plan", content=body, headers=JSON), 422)
        assert app.state.service.pool.admitted == 0
    assert calls == []
    assert error["loc"] == ["body", "buffers"]
    assert error["type"] == "too_many_buffers"
    assert "at least 3000 buffers exceed the limit of 2000" in error["msg"]


def test_a_large_body_within_the_limit_is_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ids, names and index variables spelled "id" do not count as buffers.
    request = _many_buffers(1500)
    request["name"] = "id"
    for k, buffer in enumerate(request["buffers"][:40]):
        buffer["id"] = f'{{"id":"{k}"'
        buffer["accesses"] = [
            {
                "op": "write",
                "at": buffer["start"],
                "bytes": 1,
                "index": {"id": 1},
                "loops": {"id": 4},
            }
        ]
    body = json.dumps(request).encode()
    assert body.count(b'"id"') > 1500
    app = threads_app(max_buffers=1500)
    calls = spy_pool(app, monkeypatch)
    with TestClient(app) as c:
        _assert_planned(request, c.post("/plan", content=body, headers=JSON))
    assert len(calls) == 1


def _hostile_request(rng: random.Random) -> dict[str, Any]:
    """A valid request whose strings and index variables imitate buffers."""
    tricks = ['{"id":"x"', '\\"id\\"', '"id"', '{ "id" : "', "id", "{", '"', "\\", "\u00e9"]
    buffers = []
    for i in range(rng.randint(0, 30)):
        buffer: dict[str, Any] = {
            "id": f"{i}{rng.choice(tricks)}{rng.choice(tricks)}",
            "size": 64,
            "start": 0,
            "end": 2,
        }
        keys = list(buffer)
        rng.shuffle(keys)  # any key order
        buffer = {k: buffer[k] for k in keys}
        if rng.random() < 0.5:
            var = rng.choice(["id", '{"id":"', "k"])
            buffer["accesses"] = [
                {"op": "read", "at": 1, "bytes": 1, "index": {var: 1}, "loops": {var: 8}}
            ]
        buffers.append(buffer)
    return {"name": rng.choice(tricks), "buffers": buffers, "options": {"sync": "none"}}


def test_buffer_scan_never_counts_more_than_the_request_holds() -> None:
    rng = random.Random(7)
    for _ in range(200):
        request = _hostile_request(rng)
        count = len(parse_request(request).buffers)
        for indent in (None, 2):
            for ascii_only in (True, False):
                body = json.dumps(request, indent=indent, ensure_ascii=ascii_only).encode()
                assert buffers_at_least(body) <= count, body


def test_buffer_scan_counts_what_serializers_write() -> None:
    request = _many_buffers(500)
    compact = parse_request(request).model_dump_json().encode()
    assert buffers_at_least(compact) == 500
    assert buffers_at_least(json.dumps(request, indent=4).encode()) == 500
    # A later "buffers" key wins: the scan cannot tell which array counts, so it says 0.
    twice = compact[:-1] + b',"buffers":[]}'
    assert len(parse_request(twice, max_buffers=10).buffers) == 0
    assert buffers_at_least(twice) == 0
    check_buffer_count(twice, 10)
    with pytest.raises(RequestError, match="at least 500 buffers"):
        check_buffer_count(compact, 499)


def test_validate_over_the_emulation_budget_is_refused_before_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = {**copy.deepcopy(TWO_PHASE), "block": [128]}
    request["buffers"][0]["accesses"] = [
        {"op": "write", "at": 1, "bytes": 4, "index": {"i": 1}, "loops": {"i": 16}}
    ]
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    body = {"request": request, "plan": plan.model_dump(mode="json"), "emulate": True}
    app = threads_app(max_access_instances=1000)
    calls = spy_pool(app, monkeypatch)
    with TestClient(app) as c:
        error = _error(c.post("/validate", json=body), 422)
        assert c.post("/validate", json={**body, "emulate": False}).json()["valid"] is True
    assert error["loc"] == ["body", "emulate"]
    assert error["type"] == "emulation_budget_exceeded"
    assert len(calls) == 1  # only the request without emulation reached the pool


# --- content type -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/plan", "/validate", "/emit/cuda"])
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        None,
    ],
)
def test_a_body_not_declared_json_is_415(
    monkeypatch: pytest.MonkeyPatch, path: str, content_type: str | None
) -> None:
    app = threads_app()
    calls = spy_pool(app, monkeypatch)
    headers = {} if content_type is None else {"content-type": content_type}
    with TestClient(app) as c:
        body = json.dumps(TWO_PHASE).encode()
        error = _error(c.post(path, content=body, headers=headers), 415)
    assert calls == []
    assert error["loc"] == ["header", "content-type"]
    assert error["type"] == "unsupported_media_type"
    if content_type is None:
        assert "no Content-Type" in error["msg"]
    else:
        assert repr(content_type) in error["msg"]
        assert error["input"] == content_type


# --- strict inputs ----------------------------------------------------------------------------

_FIELDS = [
    ("size", ["buffers", 0, "size"]),
    ("start", ["buffers", 0, "start"]),
    ("end", ["buffers", 1, "end"]),
    ("buffer_alignment", ["buffers", 0, "alignment"]),
    ("offset", ["buffers", 0, "offset"]),
    ("alignment", ["alignment"]),
    ("capacity", ["capacity"]),
    ("block", ["block", 0]),
    ("grid", ["grid", 0]),
    ("at", ["buffers", 0, "accesses", 0, "at"]),
    ("bytes", ["buffers", 0, "accesses", 0, "bytes"]),
]


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    request = copy.deepcopy(TWO_PHASE)
    request["block"], request["grid"] = [16], [4]
    request["buffers"][0]["accesses"] = [
        {"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}
    ]
    node: Any = request
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return request


@pytest.mark.parametrize(("name", "path"), _FIELDS, ids=[f[0] for f in _FIELDS])
@pytest.mark.parametrize("value", [True, "16", 16.0], ids=["bool", "str", "float"])
def test_an_integer_field_takes_only_an_integer(
    client: TestClient, name: str, path: list[str | int], value: Any
) -> None:
    error = _error(client.post("/plan", json=_with(path, value)), 422)
    assert error["loc"] == ["body", *path]
    assert error["type"] == "int_type"
    assert error["input"] == value


def test_the_strict_fields_take_their_integers(client: TestClient) -> None:
    request = _with(["buffers", 0, "offset"], 0)
    _assert_planned(request, client.post("/plan", json=request))


@pytest.mark.parametrize("value", [1, "true"])
def test_a_boolean_field_takes_only_a_boolean(client: TestClient, value: Any) -> None:
    request = {**TWO_PHASE, "options": {"shrink": value}}
    error = _error(client.post("/plan", json=request), 422)
    assert error["loc"] == ["body", "options", "shrink"]
    assert error["type"] == "bool_type"


def test_a_float_field_still_takes_an_integer(client: TestClient) -> None:
    request = {**TWO_PHASE, "options": {"sync": "existing", "time_limit": 10}}
    _assert_planned(request, client.post("/plan", json=request))


def test_validate_reads_the_plan_strictly(client: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    plan["placements"][0]["offset"] = "0"
    body = {"request": TWO_PHASE, "plan": plan, "emulate": 1}
    response = client.post("/validate", json=body)
    assert response.status_code == 422, response.text
    locs = [e["loc"] for e in response.json()["detail"]]
    assert ["body", "plan", "placements", 0, "offset"] in locs
    assert ["body", "emulate"] in locs


def test_a_request_without_buffers_is_422(client: TestClient) -> None:
    error = _error(client.post("/plan", json={"name": "nothing"}), 422)
    assert error["loc"] == ["body", "buffers"]
    assert error["type"] == "missing"


# --- long values are cut in what is echoed ------------------------------------------------------


def test_a_long_value_is_cut_in_the_422(client: TestClient) -> None:
    request = copy.deepcopy(TWO_PHASE)
    request["buffers"][0]["id"] = "x" * 1_000_000
    request["buffers"][1]["dtype"] = "y" * 1_000_000
    response = client.post("/plan", json=request)
    assert response.status_code == 422
    assert len(response.content) < 3000
    detail = response.json()["detail"]
    by_loc = {tuple(e["loc"]): e for e in detail}
    id_error = by_loc["body", "buffers", 0, "id"]
    assert id_error["input"] == "x" * 200 + "... (1000000 characters)"
    dtype_error = by_loc["body", "buffers", 1, "dtype"]
    assert dtype_error["msg"].startswith("unknown dtype 'yyy")
    assert re.fullmatch(r"unknown dtype 'y+\.\.\. \(\d+ characters\)", dtype_error["msg"])
    assert len(dtype_error["msg"]) < 450


def test_a_whole_object_is_not_echoed(client: TestClient) -> None:
    request = _many_buffers(2000)
    del request["buffers"][0]["size"]
    error = _error(client.post("/plan", json=request), 422)
    assert error["loc"] == ["body", "buffers", 0, "size"]
    assert len(json.dumps(error)) < 600
    request = _many_buffers(2000)
    body = json.dumps({"request": request})  # no "plan": the whole body is the input
    error = _error(client.post("/emit/svg", content=body, headers=JSON), 422)
    assert error["loc"] == ["body", "plan"]
    assert error["input"] == "an object of 1 items"


# --- 500s are JSON ----------------------------------------------------------------------------


def _raising(exc: BaseException) -> Any:
    def fail(*args: object, **kwargs: object) -> Any:
        raise exc

    return fail


@pytest.mark.parametrize(
    ("exc", "type_"),
    [(MemoryError(), "out_of_memory"), (RuntimeError("boom"), "server_error")],
)
def test_a_failure_while_planning_is_a_json_500(
    monkeypatch: pytest.MonkeyPatch, exc: BaseException, type_: str
) -> None:
    monkeypatch.setattr(planner, "plan", _raising(exc))
    with TestClient(threads_app(), raise_server_exceptions=False) as c:
        response = c.post("/plan", json=TWO_PHASE)
        assert "x-request-id" in response.headers
        assert c.get("/healthz").status_code == 200
    error = _error(response, 500)
    assert error["type"] == type_


def test_a_memory_error_on_the_event_loop_is_a_json_500(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner.api.routes, "parse_capped", _raising(MemoryError()))
    with TestClient(threads_app()) as c:
        error = _error(c.post("/plan", json=TWO_PHASE), 500)
    assert error["type"] == "out_of_memory"


def solve_out_of_memory(*args: object) -> Any:
    """Stands in for ``api.service.solve`` in a worker process."""
    raise MemoryError


@pytest.mark.slow
def test_a_memory_error_in_a_worker_process_is_a_json_500(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(planner.api.routes, "solve", solve_out_of_memory)
    app = create_app(Settings(solver_pool="processes", solver_workers=1, access_log=False))
    with TestClient(app) as c:
        error = _error(c.post("/plan", json=TWO_PHASE), 500)
        assert error["type"] == "out_of_memory"
        monkeypatch.undo()
        request = {**TWO_PHASE, "name": "after"}
        _assert_planned(request, c.post("/plan", json=request))  # the worker still serves


# --- the plan cache is bounded in bytes --------------------------------------------------------


def test_cache_drops_plans_past_its_byte_budget() -> None:
    cache = PlanCache(size=10, max_bytes=100)
    cache.put("a", b"a" * 60)
    cache.put("b", b"b" * 30)
    assert cache.bytes == 90
    cache.put("c", b"c" * 30)  # 120 bytes: "a", the least recently used, goes
    assert cache.get("a") is None
    assert cache.get("b") is not None
    assert cache.bytes == 60
    cache.put("d", b"d" * 101)  # larger than the whole budget: not kept, nothing evicted
    assert cache.get("d") is None
    assert len(cache) == 2
    cache.put("b", b"B" * 10)  # replacing a body recounts it
    assert cache.bytes == 40


def test_cache_index_stays_bounded() -> None:
    cache = PlanCache(size=3, max_bytes=1 << 20)
    for k in range(10):
        cache.link(bytes([k]) * 32, f"key{k}")
    assert cache.key_of(bytes([0]) * 32) is None
    assert cache.key_of(bytes([9]) * 32) == "key9"
    assert sum(cache.key_of(bytes([k]) * 32) is not None for k in range(10)) == 3


def test_a_plan_over_the_cache_budget_is_not_cached() -> None:
    with TestClient(threads_app(cache_bytes=100)) as c:
        first = c.post("/plan", json=TWO_PHASE)
        again = c.post("/plan", json=TWO_PHASE)
    _assert_planned(TWO_PHASE, first)
    assert len(first.content) > 100
    assert again.headers["x-plan-cache"] == "miss"
    assert again.content == first.content


# --- /emit --------------------------------------------------------------------------------------


def _emit_body() -> dict[str, Any]:
    plan = planner.plan(TWO_PHASE)
    assert planner.validate(TWO_PHASE, plan).valid
    return {"request": TWO_PHASE, "plan": plan.model_dump(mode="json")}


def test_emit_runs_in_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    app = threads_app()
    calls = spy_pool(app, monkeypatch)
    with TestClient(app) as c:
        response = c.post("/emit/cuda", json=_emit_body())
    assert response.status_code == 200, response.text
    assert "smem_arena" in response.text
    assert [getattr(fn, "__name__", "") for fn in calls] == ["emit"]


def test_emit_refuses_a_chunked_body_over_the_limit_as_it_streams() -> None:
    app = threads_app(max_body_bytes=4096)
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(10_000):  # 10 MB if it were all read
            sent += 1
            yield b" " * 1024

    async def scenario() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            return await c.post("/emit/svg", content=chunks(), headers=JSON)

    response = asyncio.run(scenario())
    error = _error(response, 413)
    assert error["type"] == "body_too_large"
    assert "limit of 4096 bytes" in error["msg"]
    assert sent < 10


def test_emit_documents_its_body(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/emit/{kind}"]["post"]
    body = operation["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/EmitBody"}
    schema = spec["components"]["schemas"]["EmitBody"]
    assert set(schema["required"]) == {"request", "plan"}
    assert schema["properties"]["request"]["$ref"] == "#/components/schemas/PlanRequest"
    assert "buffers" in spec["components"]["schemas"]["PlanRequest"]["properties"]
    assert {"413", "415", "422", "500", "503"} <= set(operation["responses"])
    # The example as /docs shows it (FastAPI drops its nulls) is a body the service takes.
    example = body["example"]
    assert example["request"]["buffers"] == EMIT_BODY_EXAMPLE["request"]["buffers"]
    assert planner.validate(example["request"], example["plan"]).valid
    response = client.post("/emit/mlir", json=example)
    assert response.status_code == 200, response.text
    assert "memref.view" in response.text
