"""The real server process (``planner serve``) under uvloop and asyncio: plans of every size
byte for byte as the library gives them, checks of them, small requests answered right after
large ones, a solver process killed mid-request, and every slot back at the end."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import httpx
import pytest

import planner
from planner.core.models import PlanRequest
from planner.generate import random_request
from tests.support.event_loops import LOOPS
from tests.support.server_process import ServerProcess, running_server

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

SIZES = [32, 300, 3000]
EMULATED = {32, 300}  # the emulator takes ~17 s on 3000 buffers: see the slow test below


@pytest.fixture(scope="module", params=LOOPS)
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    loop = request.param
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    # The emulation budget lets 3000 buffers through: tests here keep a worker busy with one.
    with running_server(loop, solver_workers="2", max_access_instances=str(1 << 30)) as running:
        maps = Path(f"/proc/{running.process.pid}/maps").read_text()
        assert ("uvloop" in maps) == (loop == "uvloop"), f"--loop {loop} not honoured"
        yield running


@cache
def _case(n: int, solver: str = "auto") -> tuple[PlanRequest, bytes, bytes]:
    """A request of ``n`` random buffers, its JSON, and the library's plan of it as JSON."""
    base = random_request(n)
    # Room for the work every plan needs (about 100 us a buffer), with a wide margin: a plan
    # the clock cuts short would depend on the machine's load, here and in the server.
    options = base.options.model_copy(update={"time_limit": max(1.0, n * 3e-4), "solver": solver})
    request = base.model_copy(update={"options": options})
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, request.model_dump_json().encode(), plan.model_dump_json().encode()


def _check_body(body: bytes, plan: bytes, emulate: bool) -> bytes:
    tail = b',"emulate":true}' if emulate else b"}"
    return b'{"request":' + body + b',"plan":' + plan + tail


def _small_request_answered(server: ServerProcess) -> float:
    """A one-buffer plan, answered 200 and valid; its latency in ms."""
    request = random_request(1, seed=int(time.monotonic_ns() % 1_000_000))
    started = time.perf_counter()
    reply = server.client.post("/plan", content=request.model_dump_json())
    ms = (time.perf_counter() - started) * 1e3
    assert reply.status_code == 200, reply.text
    assert planner.validate(request, planner.Plan.model_validate_json(reply.content)).valid
    return ms


def _plan_and_check(
    server: ServerProcess, n: int, solver: str, emulate: bool, record: list[str]
) -> None:
    _, body, plan = _case(n, solver)
    started = time.perf_counter()
    reply = server.client.post("/plan", content=body)
    plan_ms = (time.perf_counter() - started) * 1e3
    assert reply.status_code == 200, reply.text
    assert reply.content == plan  # byte for byte the library's plan
    small_ms = _small_request_answered(server)
    record.append(f"POST /plan {n}: {plan_ms:.0f} ms, then 1 buffer: {small_ms:.1f} ms")
    for emulated in (False, True) if emulate else (False,):
        checked = server.client.post("/validate", content=_check_body(body, plan, emulated))
        assert checked.status_code == 200, checked.text
        report = checked.json()
        assert report["valid"] is True
        assert (report["emulator"] is not None) == emulated
        _small_request_answered(server)
    assert server.admitted() == 0


@pytest.mark.parametrize("n", SIZES)
def test_plans_of_every_size_are_the_librarys(
    server: ServerProcess, n: int, record_property: Callable[[str, object], None]
) -> None:
    record: list[str] = []
    _plan_and_check(server, n, "auto", n in EMULATED, record)
    record_property("latency", "; ".join(record))


@pytest.mark.slow
@pytest.mark.parametrize("server", ["uvloop"], indirect=True)  # the production loop only
@pytest.mark.parametrize(
    ("n", "emulate"),
    [
        pytest.param(3000, True, id="3000-emulated"),
        pytest.param(30_000, False, id="30000"),
        pytest.param(100_000, False, id="100000"),
    ],
)
def test_large_plans_are_the_librarys_under_uvloop(
    server: ServerProcess, n: int, emulate: bool, record_property: Callable[[str, object], None]
) -> None:
    record: list[str] = []
    _plan_and_check(server, n, "greedy", emulate, record)
    record_property("latency", "; ".join(record))


def test_a_solver_killed_mid_request_is_a_503_and_the_pool_recovers(
    server: ServerProcess,
) -> None:
    _, body, plan = _case(3000)
    # The emulator's run of 3000 buffers keeps a worker busy for seconds.
    check = _check_body(body, plan, emulate=True)
    replies: list[httpx.Response] = []
    sender = threading.Thread(
        target=lambda: replies.append(server.client.post("/validate", content=check))
    )
    before = _idle_ticks(server)
    sender.start()
    busy = _busy_worker(before)
    assert busy is not None, "no solver process started on the request"
    os.kill(busy, signal.SIGKILL)
    sender.join(60)
    assert replies, "the request was not answered"
    reply = replies[0]
    assert reply.status_code == 503, reply.text
    assert reply.headers["retry-after"] == "1"
    assert reply.json()["detail"][0]["type"] == "worker_died"
    assert busy not in server.solver_pids()
    _small_request_answered(server)  # a new worker took the dead one's place
    assert server.admitted() == 0


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def _idle_ticks(server: ServerProcess) -> dict[int, int]:
    """The solver processes' CPU ticks once none of them has worked for half a second: a
    replacement still warming up (for a worker an earlier test killed) would otherwise pass
    for the one that takes the next job, on a machine slow enough to make its warm-up long."""
    give_up = time.monotonic() + 60
    ticks = {pid: _cpu_ticks(pid) for pid in server.solver_pids()}
    while time.monotonic() < give_up:
        time.sleep(0.5)
        now = {pid: _cpu_ticks(pid) for pid in server.solver_pids()}
        if now.keys() == ticks.keys() and all(now[pid] <= ticks[pid] + 2 for pid in now):
            return now
        ticks = now
    raise AssertionError(f"the solver processes did not settle within 60 s: {ticks}")


def _busy_worker(before: dict[int, int]) -> int | None:
    """The solver process that starts using the CPU within 10 s."""
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        time.sleep(0.2)
        for pid, ticks in before.items():
            if _cpu_ticks(pid) > ticks + 10:  # a tenth of a second of work on the job
                return pid
    return None


def test_a_client_that_hangs_up_frees_its_worker(server: ServerProcess) -> None:
    _, body, plan = _case(3000)
    check = _check_body(body, plan, emulate=True)
    before = _idle_ticks(server)
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as conn:
        head = (
            f"POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(check)}\r\n\r\n"
        )
        conn.sendall(head.encode() + check)
        busy = _busy_worker(before)
        assert busy is not None, "no solver process started on the request"
    # The connection is closed: the server notices, stops the job and replaces its worker.
    # Unnoticed, the job runs to its end and the worker stays; the wait ends when it is gone,
    # and is long enough for a machine whose cores other tests keep busy.
    give_up = time.monotonic() + 30
    while busy in server.solver_pids() and time.monotonic() < give_up:
        time.sleep(0.1)
    assert busy not in server.solver_pids()
    assert server.admitted() == 0
    _small_request_answered(server)
