"""planner.Client and planner.AsyncClient: against the app in-process, and against a mock
transport for the network's failures."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import planner
from planner import (
    PayloadTooLargeError,
    ServiceConnectionError,
    ServiceError,
    ServiceUnavailableError,
    UnexpectedResponseError,
)
from planner.api import create_app
from planner.api.settings import Settings
from planner.client import CheckReport, error_for_status
from planner.core.models import Plan, PlanRequest
from planner.core.targets import TARGETS
from tests.support.samples import TWO_PHASE

URL = "http://planner.test"

JSON = {"content-type": "application/json"}  # the content type every POST body needs


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(solver_pool="threads", access_log=False))) as c:
        yield c


@pytest.fixture
def client(http: TestClient) -> Iterator[planner.Client]:
    # The test client's transport calls the app in-process, through its running lifespan.
    with planner.Client(URL, transport=http._transport, backoff=0) as c:
        yield c


def _bad_request() -> dict[str, Any]:
    request = copy.deepcopy(TWO_PHASE)
    request["buffers"][1]["size"] = 0
    request["buffers"][2]["alignment"] = 3
    return request


# --- in-process: the same models as the library -----------------------------------------------


def test_plan_equals_the_library(client: planner.Client) -> None:
    plan = client.plan(TWO_PHASE)
    assert plan == planner.plan(TWO_PHASE)
    assert planner.validate(TWO_PHASE, plan).valid
    # A model, JSON text and bytes are sent the same way.
    model = PlanRequest.model_validate(TWO_PHASE)
    assert client.plan(model) == plan
    assert client.plan(json.dumps(TWO_PHASE)) == plan


def test_validate_equals_the_library(client: planner.Client) -> None:
    plan = planner.plan(TWO_PHASE)
    assert client.validate(TWO_PHASE, plan) == planner.validate(TWO_PHASE, plan)
    broken = plan.model_copy(update={"arena_bytes": plan.arena_bytes + 1})
    report = client.validate(TWO_PHASE, broken)
    assert not report.valid
    assert report == planner.validate(TWO_PHASE, broken)
    assert [v.code for v in report.violations] == ["wrong_arena"]


def test_check_reports_static_and_no_emulator(client: planner.Client) -> None:
    plan = planner.plan(TWO_PHASE)
    result = client.check(TWO_PHASE, plan)
    assert isinstance(result, CheckReport)
    assert result.valid
    assert result.emulator is None


def test_health_and_targets(client: planner.Client) -> None:
    assert client.health()["status"] == "ok"
    assert client.targets() == TARGETS


def test_async_client_in_process() -> None:
    app = create_app(Settings(solver_pool="threads", access_log=False))

    async def scenario() -> tuple[Plan, Plan, dict[str, str]]:
        transport = httpx.ASGITransport(app=app)
        async with planner.AsyncClient(URL, transport=transport, backoff=0) as c:
            plans = await asyncio.gather(c.plan(TWO_PHASE), c.plan(TWO_PHASE))
            report = await c.validate(TWO_PHASE, plans[0])
            assert report.valid
            assert await c.targets() == TARGETS
            with pytest.raises(planner.RequestError):
                await c.plan(_bad_request())
            return plans[0], plans[1], await c.health()

    first, second, health = asyncio.run(scenario())
    assert first == second == planner.plan(TWO_PHASE)
    assert health["status"] == "ok"


# --- every error, server status to client exception and back ----------------------------------


def test_422_carries_the_same_field_errors_as_the_library(client: planner.Client) -> None:
    with pytest.raises(planner.RequestError) as remote:
        client.plan(_bad_request())
    with pytest.raises(planner.RequestError) as local:
        planner.plan(_bad_request())
    assert type(remote.value) is planner.RequestError
    assert remote.value.errors == local.value.errors
    assert [e["loc"] for e in remote.value.errors] == [
        ["buffers", 1, "size"],
        ["buffers", 2, "alignment"],
    ]
    assert str(remote.value) == str(local.value)


def test_malformed_json_is_a_format_error(client: planner.Client) -> None:
    with pytest.raises(planner.FormatError) as caught:
        client.plan(b'{"buffers": [')
    assert caught.value.errors[0]["type"] == "json_invalid"


def test_validate_errors_are_under_request_and_plan(client: planner.Client) -> None:
    with pytest.raises(planner.RequestError) as caught:
        client.validate(_bad_request(), planner.plan(TWO_PHASE))
    assert caught.value.errors[0]["loc"] == ["request", "buffers", 1, "size"]


@pytest.mark.parametrize(
    ("settings", "body", "status", "error"),
    [
        ({}, b"{", 422, planner.FormatError),
        ({}, _bad_request(), 422, planner.RequestError),
        ({"max_body_bytes": 10}, TWO_PHASE, 413, PayloadTooLargeError),
        ({"max_buffers": 2}, TWO_PHASE, 422, planner.RequestError),
    ],
)
def test_status_and_exception_map_both_ways(
    settings: dict[str, Any], body: Any, status: int, error: type[Exception]
) -> None:
    app = create_app(Settings(solver_pool="threads", access_log=False, **settings))
    with TestClient(app) as http:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = http.post("/plan", content=content, headers=JSON)
        assert response.status_code == status
        mapped = error_for_status(response.status_code, response.content)
        assert type(mapped) is error
        with planner.Client(URL, transport=http._transport, retries=0) as c, pytest.raises(error):
            c.plan(content)


def test_500_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(request: Any, *, max_buffers: int = 0) -> Plan:
        raise planner.InternalError("the plan failed the static check: overlap")

    monkeypatch.setattr(planner, "plan", broken)
    http = TestClient(
        create_app(Settings(solver_pool="threads", cache_size=0, access_log=False))
    )  # no warm-up
    with (
        planner.Client(URL, transport=http._transport) as c,
        pytest.raises(planner.InternalError, match="overlap"),
    ):
        c.plan(TWO_PHASE)


def test_503_from_a_full_pool_is_service_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    real = planner.plan

    def blocked(request: Any, *, max_buffers: int = 100_000) -> Plan:
        gate.wait(10)
        return real(request, max_buffers=max_buffers)

    monkeypatch.setattr(planner, "plan", blocked)
    app = create_app(
        Settings(
            solver_pool="threads", solver_workers=1, queue_size=0, retry_after=0, access_log=False
        )
    )

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with planner.AsyncClient(URL, transport=transport, retries=2, backoff=0) as c:
            first = asyncio.create_task(c.plan(TWO_PHASE))
            while app.state.service.pool.admitted < 1:
                await asyncio.sleep(0.01)
            with pytest.raises(ServiceUnavailableError) as caught:
                await c.plan({**TWO_PHASE, "name": "other"})
            assert caught.value.status == 503
            assert caught.value.retry_after == 0
            assert "queue is full" in str(caught.value)
            gate.set()
            assert (await first) == real(TWO_PHASE)

    asyncio.run(scenario())


# --- network failures, through a mock transport --------------------------------------------------


def _mock(
    answers: list[Callable[[httpx.Request], httpx.Response]],
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport answering the n-th request with the n-th function; records requests."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1](request)

    return httpx.MockTransport(handler), seen


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _busy(request: httpx.Request) -> httpx.Response:
    body = {"detail": [{"loc": [], "msg": "the solver queue is full", "type": "queue_full"}]}
    return httpx.Response(503, json=body, headers={"Retry-After": "0"})


def _plan_ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=planner.plan(TWO_PHASE).model_dump_json())


def test_retries_connection_errors_then_succeeds() -> None:
    transport, seen = _mock([_refuse, _refuse, _plan_ok])
    with planner.Client(URL, transport=transport, retries=3, backoff=0) as c:
        assert c.plan(TWO_PHASE) == planner.plan(TWO_PHASE)
    assert len(seen) == 3


def test_gives_up_after_retries_on_connection_errors() -> None:
    transport, seen = _mock([_refuse])
    with (
        planner.Client(URL, transport=transport, retries=2, backoff=0) as c,
        pytest.raises(ServiceConnectionError, match="no answer from") as caught,
    ):
        c.plan(TWO_PHASE)
    assert isinstance(caught.value, ServiceError)
    assert isinstance(caught.value, planner.PlannerError)
    assert caught.value.status is None
    assert len(seen) == 3


def test_retries_503_then_succeeds() -> None:
    transport, seen = _mock([_busy, _plan_ok])
    with planner.Client(URL, transport=transport, retries=1, backoff=0) as c:
        assert c.plan(TWO_PHASE).arena_bytes == planner.plan(TWO_PHASE).arena_bytes
    assert len(seen) == 2


def test_gives_up_after_retries_on_503() -> None:
    transport, seen = _mock([_busy])
    with (
        planner.Client(URL, transport=transport, retries=2, backoff=0) as c,
        pytest.raises(ServiceUnavailableError, match="queue is full"),
    ):
        c.plan(TWO_PHASE)
    assert len(seen) == 3


def test_async_retries_and_gives_up() -> None:
    transport, seen = _mock([_refuse, _busy])

    async def scenario() -> None:
        async with planner.AsyncClient(URL, transport=transport, retries=2, backoff=0) as c:
            with pytest.raises(ServiceUnavailableError):
                await c.plan(TWO_PHASE)

    asyncio.run(scenario())
    assert len(seen) == 3


def test_backoff_doubles_and_retry_after_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)  # the client's waits between tries

    def busy_for(seconds: str) -> Callable[[httpx.Request], httpx.Response]:
        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(503, json={"detail": []}, headers={"Retry-After": seconds})

        return answer

    no_header = lambda request: httpx.Response(503, json={"detail": []})  # noqa: E731
    transport, _ = _mock([no_header, no_header, busy_for("2"), busy_for("600"), _plan_ok])
    with planner.Client(URL, transport=transport, retries=4, backoff=0.5) as c:
        c.plan(TWO_PHASE)
    assert waits == [0.5, 1.0, 2.0, 10.0]  # Retry-After is capped at 10 s


def test_other_statuses_are_unexpected() -> None:
    not_found = lambda request: httpx.Response(404, json={"detail": "Not Found"})  # noqa: E731
    transport, seen = _mock([not_found])
    with (
        planner.Client(URL, transport=transport) as c,
        pytest.raises(UnexpectedResponseError, match="404") as caught,
    ):
        c.plan(TWO_PHASE)
    assert caught.value.status == 404
    assert len(seen) == 1  # not retried


def test_malformed_answer_is_unexpected() -> None:
    garbage = lambda request: httpx.Response(200, content=b'{"status": "optimal"}')  # noqa: E731
    transport, _ = _mock([garbage])
    with (
        planner.Client(URL, transport=transport) as c,
        pytest.raises(UnexpectedResponseError, match="not a valid Plan"),
    ):
        c.plan(TWO_PHASE)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="'retries' argument: -1"):
        planner.Client(URL, retries=-1)
    with pytest.raises(ValueError, match=r"'backoff' argument: -0\.5"):
        planner.AsyncClient(URL, backoff=-0.5)


def test_emit_gives_the_emitters_text_for_the_services_plan(client: planner.Client) -> None:
    plan = client.plan(TWO_PHASE)
    assert planner.validate(TWO_PHASE, plan).valid
    cuda = client.emit(TWO_PHASE, plan)
    assert "extern __shared__" in cuda
    assert all(p.id in cuda for p in plan.placements)
    assert "gpu.dynamic_shared_memory" in client.emit(TWO_PHASE, plan.model_dump(), "mlir")
    assert client.emit(TWO_PHASE, plan, "svg").startswith("<svg")
    with pytest.raises(ValueError, match="unknown emitter 'ptx'"):
        client.emit(TWO_PHASE, plan, "ptx")
