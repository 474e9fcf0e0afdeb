"""The service around the planner: /validate, /targets, /metrics, cache, limits, pool, logs."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import random
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.api.docs import (
    CHECK_PLAN_EXAMPLE,
    CHECK_REQUEST_EXAMPLE,
    PLAN_EXAMPLE,
    PLAN_RESPONSE_EXAMPLE,
)
from planner.api.middleware import ACCESS_LOGGER
from planner.api.settings import Settings
from planner.core.models import Plan, PlanRequest
from planner.core.targets import TARGETS
from planner.validators.cost import emulation_cost
from planner.validators.emulator import emulate
from planner.validators.faults import plant_fault
from tests.support.paths import ROOT
from tests.support.samples import TWO_PHASE

EXAMPLES = ROOT / "examples"

JSON = {"content-type": "application/json"}  # the content type every POST body needs


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(solver_pool="threads", access_log=False))) as c:
        yield c


def _request(name: str, **changes: Any) -> dict[str, Any]:
    request = copy.deepcopy(TWO_PHASE)
    request.update(name=name, **changes)
    return request


def _check(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/validate", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _errors(response: httpx.Response, status: int) -> list[dict[str, Any]]:
    assert response.status_code == status, response.text
    detail: list[dict[str, Any]] = response.json()["detail"]
    return detail


# --- /validate --------------------------------------------------------------------------------


def test_validate_accepts_the_planners_plan(client: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    report = _check(client, {"request": TWO_PHASE, "plan": plan})
    assert report == {
        "valid": True,
        "static": {"valid": True, "violations": [], "truncated": False},
        "emulator": None,
    }


def test_validate_lists_every_violation(client: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    # c lives beside a and b: moving it onto them overlaps both, and 8 breaks its alignment.
    c = next(p for p in plan["placements"] if p["id"] == "c")
    c["offset"] = 8
    report = _check(client, {"request": TWO_PHASE, "plan": plan})
    assert report["valid"] is False
    codes = sorted(v["code"] for v in report["static"]["violations"])
    assert codes.count("overlap") == 2
    assert "misaligned" in codes
    assert report["static"] == planner.validate(TWO_PHASE, plan).model_dump(mode="json")


def test_validate_example_is_valid(client: TestClient) -> None:
    body = {"request": CHECK_REQUEST_EXAMPLE, "plan": CHECK_PLAN_EXAMPLE, "emulate": False}
    assert _check(client, body)["valid"] is True


def test_validate_names_the_bad_field(client: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    request = _request("k")
    request["buffers"][1]["size"] = 0
    (error,) = _errors(client.post("/validate", json={"request": request, "plan": plan}), 422)
    assert error["loc"] == ["body", "request", "buffers", 1, "size"]
    assert error["input"] == 0
    (error,) = _errors(client.post("/validate", json={"request": TWO_PHASE}), 422)
    assert error["loc"] == ["body", "plan"]
    assert error["type"] == "missing"


def test_validate_rejects_malformed_json(client: TestClient) -> None:
    (error,) = _errors(client.post("/validate", content=b'{"request": ', headers=JSON), 422)
    assert error["type"] == "json_invalid"


def test_validate_emulates_a_correct_plan_clean(client: TestClient) -> None:
    request = json.loads(EXAMPLES.joinpath("nvfuser_matmul_epilogue.json").read_text())
    plan = planner.plan(request)
    report = _check(
        client, {"request": request, "plan": plan.model_dump(mode="json"), "emulate": True}
    )
    assert report["static"]["valid"] is True
    assert report["emulator"] == {"violations": []}
    assert report["valid"] is True


def test_validate_emulator_catches_a_dropped_barrier(client: TestClient) -> None:
    request = PlanRequest.model_validate_json(
        EXAMPLES.joinpath("nvfuser_matmul_epilogue.json").read_text()
    )
    plan = planner.plan(request)
    fault = plant_fault(request, plan, "drop_barrier", random.Random(0))
    assert fault is not None
    direct = emulate(fault.request, fault.plan)
    assert not direct.valid
    body = {
        "request": fault.request.model_dump(mode="json", exclude_none=True),
        "plan": fault.plan.model_dump(mode="json"),
        "emulate": True,
    }
    report = _check(client, body)
    assert report["valid"] is False
    assert report["emulator"]["violations"] == [
        {"code": v.code, "message": v.message} for v in direct.violations
    ]
    assert {v["code"] for v in report["emulator"]["violations"]} <= {"race", "clobbered"}


def test_validate_refuses_emulation_over_the_budget() -> None:
    request = _request("k", block=[128])
    request["buffers"][0]["accesses"] = [
        {"op": "write", "at": 1, "bytes": 4, "index": {"i": 1}, "loops": {"i": 16}}
    ]
    # a's pattern, then b and c (no patterns): the synthetic write and read, one round of the
    # 128 threads each, since each has fewer than 128 four-byte elements.
    planned = planner.plan(request)
    assert planner.validate(request, planned).valid
    cost = emulation_cost(PlanRequest.model_validate(request), planned, 16).total
    assert cost >= 128 * 16 + 2 * (2 * 128)
    plan = planned.model_dump(mode="json")
    body = {"request": request, "plan": plan, "emulate": True}
    with TestClient(
        create_app(Settings(solver_pool="threads", max_access_instances=1000, access_log=False))
    ) as small:
        (error,) = _errors(small.post("/validate", json=body), 422)
    assert error["loc"] == ["body", "emulate"]
    assert error["type"] == "emulation_budget_exceeded"
    assert f"{cost} (thread, byte) accesses" in error["msg"]
    assert "limit of 1000" in error["msg"]


def test_validate_body_over_size_limit() -> None:
    body = json.dumps({"request": TWO_PHASE, "plan": {}}).encode()
    with TestClient(
        create_app(Settings(solver_pool="threads", max_body_bytes=100, access_log=False))
    ) as small:
        (error,) = _errors(small.post("/validate", content=body, headers=JSON), 413)
    assert error["type"] == "body_too_large"
    assert f"{len(body)} bytes" in error["msg"]
    assert "limit of 100 bytes" in error["msg"]


# --- /plan: examples, cache, time cap ---------------------------------------------------------


def test_plan_response_example_is_what_the_service_answers(client: TestClient) -> None:
    response = client.post("/plan", json=PLAN_EXAMPLE)
    assert response.status_code == 200
    assert response.json() == PLAN_RESPONSE_EXAMPLE


def test_cache_hit_and_miss() -> None:
    with TestClient(
        create_app(Settings(solver_pool="threads", cache_size=2, access_log=False))
    ) as c:
        first = c.post("/plan", json=_request("one"))
        again = c.post("/plan", json=_request("one"))
        assert first.headers["x-plan-cache"] == "miss"
        assert again.headers["x-plan-cache"] == "hit"
        assert first.content == again.content
        # Key order and spacing do not matter: the key is the canonical request's hash.
        reordered = json.dumps(dict(reversed(list(_request("one").items())))).encode()
        assert c.post("/plan", content=reordered, headers=JSON).headers["x-plan-cache"] == "hit"
        c.post("/plan", json=_request("two"))
        c.post("/plan", json=_request("three"))  # evicts "one", the least recently used
        assert c.post("/plan", json=_request("one")).headers["x-plan-cache"] == "miss"
        assert c.post("/plan", json=_request("three")).headers["x-plan-cache"] == "hit"


def test_cache_size_zero_disables_it() -> None:
    with TestClient(
        create_app(Settings(solver_pool="threads", cache_size=0, access_log=False))
    ) as c:
        c.post("/plan", json=_request("one"))
        assert c.post("/plan", json=_request("one")).headers["x-plan-cache"] == "miss"


def test_time_limit_is_capped_by_the_server_maximum() -> None:
    request = _request("slow", options={"sync": "existing", "time_limit": 100.0})
    capped = _request("slow", options={"sync": "existing", "time_limit": 2.5})
    with TestClient(
        create_app(Settings(solver_pool="threads", max_time_limit=2.5, access_log=False))
    ) as c:
        response = c.post("/plan", json=request)
    assert response.status_code == 200
    plan = Plan.model_validate_json(response.content)
    assert planner.validate(capped, plan).valid
    assert plan == planner.plan(capped)  # the capped request is what was planned


def test_large_body_is_parsed_off_the_event_loop(client: TestClient) -> None:
    # Past 64 KiB the body is parsed on a solver thread; the answer is the same.
    request = _request("padded")
    request["buffers"] = [
        {"id": f"buffer_{i:05d}_{'x' * 40}", "size": 16, "start": i % 7, "end": i % 7 + 1}
        for i in range(1500)
    ]
    body = json.dumps(request).encode()
    assert len(body) > 64 << 10
    response = client.post("/plan", content=body, headers=JSON)
    assert response.status_code == 200, response.text
    plan = Plan.model_validate_json(response.content)
    assert planner.validate(request, plan).valid
    assert client.post("/plan", content=body, headers=JSON).content == response.content


# --- /targets, /healthz, /metrics ---------------------------------------------------------------


def test_targets_lists_every_profile(client: TestClient) -> None:
    response = client.get("/targets")
    assert response.status_code == 200
    by_name = {t["name"]: t for t in response.json()}
    assert set(by_name) == set(TARGETS)
    # docs/design.md, Device profiles, by hand.
    assert by_name["sm_80"]["max_smem_per_block"] == 166912
    assert by_name["sm_90"]["smem_per_sm"] == 233472
    assert by_name["sm_75"]["reserved_per_block"] == 0
    assert by_name["sm_89"]["max_blocks_per_sm"] == 24
    assert all(t["static_smem_limit"] == 49152 for t in by_name.values())


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in the Prometheus text, 0 when absent."""
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        metric, _, rest = sample.partition("{")
        found = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if metric == name and found == labels:
            return float(value)
    return 0.0


def test_metrics_count_requests_cache_and_solves() -> None:
    with TestClient(create_app(Settings(solver_pool="threads", access_log=False))) as c:
        c.post("/plan", json=_request("m"))
        c.post("/plan", json=_request("m"))
        c.post("/plan", content=b"{", headers=JSON)
        c.get("/healthz")
        c.get("/nowhere")
        response = c.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    requests = "planner_http_requests_total"
    assert _metric(text, requests, route="/plan", method="POST", status="200") == 2
    assert _metric(text, requests, route="/plan", method="POST", status="422") == 1
    assert _metric(text, requests, route="/healthz", method="GET", status="200") == 1
    assert _metric(text, requests, route="unmatched", method="GET", status="404") == 1
    assert _metric(text, "planner_cache_lookups_total", result="hit") == 1
    assert _metric(text, "planner_cache_lookups_total", result="miss") == 1
    solves = "planner_solves_total"
    assert _metric(text, solves, status="optimal", solver="greedy:size/best-fit") == 1
    assert _metric(text, "planner_solve_duration_seconds_count") == 1
    assert _metric(text, "planner_http_request_duration_seconds_count", route="/plan") == 3


# --- request ids and access logs ----------------------------------------------------------------


def test_request_id_is_echoed_or_made(client: TestClient) -> None:
    given = client.get("/healthz", headers={"X-Request-ID": "build-42.kernel_7"})
    assert given.headers["x-request-id"] == "build-42.kernel_7"
    made = client.get("/healthz")
    assert len(made.headers["x-request-id"]) == 32
    assert made.headers["x-request-id"] != client.get("/healthz").headers["x-request-id"]
    bad = client.get("/healthz", headers={"X-Request-ID": "has spaces\tand tabs"})
    assert bad.headers["x-request-id"] != "has spaces\tand tabs"
    errored = client.post("/plan", content=b"", headers=JSON)
    assert errored.status_code == 422
    assert "x-request-id" in errored.headers


def test_access_log_is_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    with TestClient(create_app(Settings(solver_pool="threads", access_log=True))) as c:
        capsys.readouterr()
        c.post("/plan", json=_request("logged"), headers={"X-Request-ID": "abc-1"})
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    (entry,) = [json.loads(line) for line in lines if '"abc-1"' in line]
    assert entry["request_id"] == "abc-1"
    assert entry["method"] == "POST"
    assert entry["path"] == "/plan"
    assert entry["status"] == 200
    assert entry["cache"] == "miss"
    assert entry["duration_ms"] > 0
    logging.getLogger(ACCESS_LOGGER).setLevel(logging.CRITICAL + 1)


# --- settings -----------------------------------------------------------------------------------


def test_settings_come_from_planner_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANNER_MAX_BUFFERS", "7")
    monkeypatch.setenv("PLANNER_MAX_TIME_LIMIT", "2.5")
    monkeypatch.setenv("PLANNER_CACHE_SIZE", "0")
    settings = Settings(solver_pool="threads")
    assert (settings.max_buffers, settings.max_time_limit, settings.cache_size) == (7, 2.5, 0)
    monkeypatch.setenv("PLANNER_QUEUE_SIZE", "-1")
    with pytest.raises(ValueError, match="queue_size"):
        Settings(solver_pool="threads")


# --- the pool: 503 with Retry-After, never a hang -------------------------------------------------


def _blocking_planner(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Make every plan wait for the returned event (at most 10 s)."""
    gate = threading.Event()
    real = planner.plan

    def blocked(request: Any, *, max_buffers: int = 100_000) -> Plan:
        gate.wait(10)
        return real(request, max_buffers=max_buffers)

    monkeypatch.setattr(planner, "plan", blocked)
    return gate


async def _wait_admitted(app: FastAPI, count: int) -> None:
    for _ in range(500):
        if app.state.service.pool.admitted == count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"pool never reached {count} admitted jobs")


def test_full_pool_answers_503_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _blocking_planner(monkeypatch)
    settings = Settings(
        solver_pool="threads", solver_workers=1, queue_size=1, retry_after=3, access_log=False
    )
    app = create_app(settings)

    async def scenario() -> tuple[list[int], httpx.Response, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            running = [
                asyncio.create_task(c.post("/plan", json=_request(f"p{i}"))) for i in range(2)
            ]
            await _wait_admitted(app, 2)  # one solving, one waiting: the pool is full
            refused = await c.post("/plan", json=_request("p2"))
            gate.set()
            answered = [r.status_code for r in await asyncio.gather(*running)]
            await _wait_admitted(app, 0)
            after = (await c.post("/plan", json=_request("p2"))).status_code
        return answered, refused, after

    answered, refused, after = asyncio.run(scenario())
    assert answered == [200, 200]
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "3"
    (error,) = refused.json()["detail"]
    assert error["type"] == "queue_full"
    assert "limit is 2" in error["msg"]
    assert after == 200


def test_deadline_answers_503(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = _blocking_planner(monkeypatch)
    app = create_app(
        Settings(solver_pool="threads", solver_workers=1, request_timeout=0.2, access_log=False)
    )

    async def scenario() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            response = await c.post("/plan", json=_request("late"))
            gate.set()
            await _wait_admitted(app, 0)  # the running job finishes and frees its slot
            return response

    response = asyncio.run(scenario())
    assert response.status_code == 503
    assert "retry-after" in response.headers
    (error,) = response.json()["detail"]
    assert error["type"] == "deadline_exceeded"
    assert "0.2 s" in error["msg"]


def test_app_serves_again_after_a_restart() -> None:
    app = create_app(Settings(solver_pool="threads", access_log=False))
    for name in ("before", "after"):
        with TestClient(app) as c:  # each `with` runs the start-up and the shut-down
            assert c.post("/plan", json=_request(name)).status_code == 200


def test_switch_interval_holds_while_the_app_runs() -> None:
    before = sys.getswitchinterval()
    app = create_app(Settings(solver_pool="threads", access_log=False, switch_interval=0.002))
    with TestClient(app) as c:
        assert sys.getswitchinterval() == pytest.approx(0.002)
        request = _request("switch")
        response = c.post("/plan", json=request)
        assert response.status_code == 200, response.text
        assert planner.validate(request, Plan.model_validate_json(response.content)).valid
    assert sys.getswitchinterval() == pytest.approx(before)


def _without_nulls(value: Any) -> Any:
    """``value`` with null members left out, as the OpenAPI document writes examples."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_openapi_documents_every_endpoint(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"/plan", "/validate", "/healthz", "/targets", "/metrics"} <= set(paths)
    plan = paths["/plan"]["post"]
    example = plan["responses"]["200"]["content"]["application/json"]["example"]
    assert example == _without_nulls(PLAN_RESPONSE_EXAMPLE)
    assert "Retry-After" in plan["responses"]["503"]["headers"]
    assert "X-Plan-Cache" in plan["responses"]["200"]["headers"]
    check = paths["/validate"]["post"]
    body = check["requestBody"]["content"]["application/json"]
    assert body["example"]["plan"] == _without_nulls(CHECK_PLAN_EXAMPLE)
    assert body["schema"] == {"$ref": "#/components/schemas/CheckBody"}
    schema = spec["components"]["schemas"]["CheckBody"]
    assert {"request", "plan", "emulate"} == set(schema["properties"])
    assert {"200", "413", "422", "500", "503"} <= set(check["responses"])


# --- worker processes (the default) -----------------------------------------------------------


@pytest.fixture(scope="module")
def processes() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(solver_pool="processes", solver_workers=1))) as c:
        yield c


def test_processes_plan_as_the_library(processes: TestClient) -> None:
    request = _request("in-a-process")
    response = processes.post("/plan", json=request)
    assert response.status_code == 200, response.text
    assert response.headers["x-plan-cache"] == "miss"
    assert Plan.model_validate_json(response.content) == planner.plan(request)
    big = _request("big-in-a-process")  # parsed in the worker, not on the event loop
    big["buffers"] += [
        {"id": f"pad_{i:05d}_{'x' * 40}", "size": 16, "start": i % 7, "end": i % 7 + 1}
        for i in range(1500)
    ]
    response = processes.post("/plan", json=big)
    assert response.status_code == 200, response.text
    assert planner.validate(big, Plan.model_validate_json(response.content)).valid


def test_processes_carry_field_errors_back(processes: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    request = _request("bad")
    request["buffers"][2]["alignment"] = 3
    response = processes.post("/validate", json={"request": request, "plan": plan})
    (error,) = _errors(response, 422)
    assert error["loc"] == ["body", "request", "buffers", 2, "alignment"]
    assert error["type"] == "alignment_not_power_of_two"
    assert error["input"] == 3
    (error,) = _errors(processes.post("/validate", content=b"{", headers=JSON), 422)
    assert error["type"] == "json_invalid"


def test_validate_refuses_emulating_a_huge_span(client: TestClient) -> None:
    plan = planner.plan(TWO_PHASE).model_dump(mode="json")
    plan["placements"][0]["offset"] = 1 << 30
    body = {"request": TWO_PHASE, "plan": plan, "emulate": True}
    (error,) = _errors(client.post("/validate", json=body), 422)
    assert error["loc"] == ["body", "plan", "placements"]
    assert error["type"] == "emulation_budget_exceeded"
    assert str(1 << 24) in error["msg"]
    # Without emulation the same plan gets its static report.
    report = _check(client, {"request": TWO_PHASE, "plan": plan})
    assert report["static"]["valid"] is False
