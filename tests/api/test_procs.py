"""Worker processes over sockets: lowest idle worker first, large frames under asyncio and
uvloop, deaths, deadlines, callers that give up, shutdown; every slot comes back."""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from pathlib import Path

import pytest

from planner import OverloadedError
from planner.api.pool import PoolKind, SolverPool
from planner.core.errors import RequestError
from tests.support.event_loops import LOOPS, run_on


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _echo(data: bytes) -> tuple[int, bytes]:
    return os.getpid(), data[::-1]


def _refuse() -> None:
    raise RequestError.field(("buffers", 0, "size"), "size must be > 0", "greater_than", 0)


def _crash() -> None:
    os._exit(3)  # as a worker killed for memory would


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _gone(pid: int, seconds: float = 5) -> bool:
    """Whether ``pid`` ends within ``seconds`` (the pool reaps its killed workers)."""
    give_up = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < give_up:
        await asyncio.sleep(0.05)
    return not _alive(pid)


def test_an_idle_pool_sends_every_job_to_its_first_worker() -> None:
    async def scenario() -> tuple[set[int], set[int]]:
        pool = SolverPool(2, 4, "processes")
        try:
            await pool.start()
            one_by_one = {await pool.run(30, os.getpid) for _ in range(6)}
            together = set(await asyncio.gather(*(pool.run(30, _pid_after, 0.3) for _ in range(2))))
            return one_by_one, together
        finally:
            pool.shutdown()

    one_by_one, together = run_on("uvloop", scenario())
    assert len(one_by_one) == 1  # the same warm process every time
    assert len(together) == 2  # a busy first worker: the second takes the job


@pytest.mark.parametrize("loop", LOOPS)
def test_jobs_and_answers_larger_than_any_socket_buffer_cross(loop: str) -> None:
    sizes = [0, 1, 65535, 65536, 65537, 212992, 212993, 3 << 20, 9 << 20]
    payloads = [os.urandom(n) for n in sizes]

    async def scenario() -> list[tuple[int, bytes]]:
        pool = SolverPool(2, len(sizes), "processes")
        try:
            await pool.start()  # both warm: a cold worker takes no job
            answers = await asyncio.gather(*(pool.run(60, _echo, p) for p in payloads))
            assert pool.admitted == 0
            return answers
        finally:
            pool.shutdown()

    answers = run_on(loop, scenario())
    assert [data for _, data in answers] == [p[::-1] for p in payloads]
    assert len({pid for pid, _ in answers}) == 2  # queued jobs spread over both workers


@pytest.mark.parametrize("loop", LOOPS)
def test_a_dead_worker_is_a_retryable_refusal_and_is_replaced(loop: str) -> None:
    async def scenario() -> None:
        pool = SolverPool(2, 2, "processes")
        try:
            await pool.start()  # both warm: jobs go to the first while it is idle
            first = await pool.run(30, os.getpid)
            with pytest.raises(RequestError) as info:
                await pool.run(30, _refuse)
            assert info.value.errors[0]["loc"] == ["buffers", 0, "size"]
            with pytest.raises(OverloadedError) as died:
                await pool.run(30, _crash)
            assert died.value.reason == "worker_died"
            assert pool.admitted == 0
            second = await pool.run(30, os.getpid)
            assert second != first  # another process: the dead one is gone
            # Killed from outside while it runs: that job fails, the other worker's does not.
            running = asyncio.create_task(pool.run(30, _pid_after, 30))
            other = asyncio.create_task(pool.run(30, _pid_after, 0.5))
            await asyncio.sleep(0.3)
            os.kill(second, signal.SIGKILL)
            with pytest.raises(OverloadedError) as killed:
                await running
            assert killed.value.reason == "worker_died"
            assert await other not in (first, second)
            assert pool.admitted == 0
            assert await pool.run(30, os.getpid) not in (first, second)
            assert pool.admitted == 0
        finally:
            pool.shutdown()

    run_on(loop, scenario())


def test_deadline_drops_a_waiting_job_and_frees_its_slot() -> None:
    async def scenario() -> None:
        pool = SolverPool(1, 1, "processes")
        try:
            await pool.start()
            running = asyncio.create_task(pool.run(30, _pid_after, 0.6))
            await asyncio.sleep(0.05)
            with pytest.raises(OverloadedError) as info:
                await pool.run(0.1, os.getpid)  # waits behind the running job, past its deadline
            assert info.value.reason == "deadline_exceeded"
            assert pool.admitted == 1  # the waiting job is gone, the running one is not
            worker = await running  # and the worker that ran it was left alone
            assert pool.admitted == 0
            assert await pool.run(30, os.getpid) == worker
        finally:
            pool.shutdown()

    run_on("asyncio", scenario())


@pytest.mark.parametrize("loop", LOOPS)
def test_a_job_hanging_past_its_deadline_frees_its_slot_and_its_worker(loop: str) -> None:
    async def scenario() -> None:
        pool = SolverPool(1, 1, "processes")
        try:
            hung = await pool.run(30, os.getpid)
            started = time.monotonic()
            with pytest.raises(OverloadedError) as info:
                await pool.run(0.5, _pid_after, 60)
            assert info.value.reason == "deadline_exceeded"
            assert time.monotonic() - started < 5
            assert pool.admitted == 0
            assert await _gone(hung)  # killed, not left to run for a minute
            replacement = await pool.run(30, os.getpid)
            assert replacement != hung
            assert pool.admitted == 0
        finally:
            pool.shutdown()

    run_on(loop, scenario())


def test_a_cancelled_caller_stops_using_its_worker() -> None:
    async def scenario() -> None:
        pool = SolverPool(1, 1, "processes")
        gone = False

        async def cancelled() -> bool:
            return gone

        try:
            busy = await pool.run(30, os.getpid)
            running = asyncio.create_task(pool.run(30, _pid_after, 60, cancelled=cancelled))
            waiting = asyncio.create_task(pool.run(30, os.getpid, cancelled=cancelled))
            await asyncio.sleep(0.3)
            assert pool.admitted == 2
            gone = True
            for task in (running, waiting):
                with pytest.raises(OverloadedError) as info:
                    await asyncio.wait_for(task, 5)
                assert info.value.reason == "client_disconnected"
            assert pool.admitted == 0
            assert await _gone(busy)
            # The caller's own task cancelled (the server stopping it): the same.
            busy = await pool.run(30, os.getpid)
            running = asyncio.create_task(pool.run(30, _pid_after, 60))
            await asyncio.sleep(0.3)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert pool.admitted == 0
            assert await _gone(busy)
            assert await pool.run(30, os.getpid) != busy
        finally:
            pool.shutdown()

    run_on("uvloop", scenario())


def test_shutdown_cancels_jobs_and_stops_workers() -> None:
    async def scenario() -> None:
        pool = SolverPool(1, 2, "processes")
        pid = await pool.run(30, os.getpid)
        running = asyncio.create_task(pool.run(30, _pid_after, 5))
        await asyncio.sleep(0.1)
        pool.shutdown()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert pool.admitted == 0
        assert await _gone(pid)

    run_on("uvloop", scenario())


def test_threads_drop_a_cancelled_waiting_job() -> None:
    async def scenario() -> None:
        pool = SolverPool(1, 1, "threads")

        async def cancelled() -> bool:
            return True

        try:
            running = asyncio.create_task(pool.run(30, time.sleep, 2))
            await asyncio.sleep(0.05)
            with pytest.raises(OverloadedError) as info:
                await pool.run(30, os.getpid, cancelled=cancelled)
            assert info.value.reason == "client_disconnected"
            assert pool.admitted == 1  # dropped from the queue; the running one goes on
            await running
            assert pool.admitted == 0
        finally:
            pool.shutdown()

    run_on("asyncio", scenario())


def _slow_marker(parent: int) -> Path:
    return Path(tempfile.gettempdir()) / f"planner-test-slow-warm-up-{parent}"


def _warm_up_slowly_when_marked() -> None:
    """A worker's initializer: 2 s long while its test has left the marker file."""
    if _slow_marker(os.getppid()).exists():
        time.sleep(2)


def test_a_replacement_worker_gets_no_job_before_it_is_warm() -> None:
    marker = _slow_marker(os.getpid())

    async def scenario() -> tuple[int, int, float]:
        pool = SolverPool(2, 4, "processes", initializer=_warm_up_slowly_when_marked)
        try:
            await pool.start()
            first = await pool.run(30, os.getpid)  # the first worker takes an idle pool's jobs
            marker.touch()  # workers started from now on take 2 s to warm up
            os.kill(first, signal.SIGKILL)
            assert await _gone(first)
            await asyncio.sleep(0.3)  # the pool has seen it die and started a replacement
            started = time.perf_counter()
            pid = await pool.run(30, os.getpid)
            return first, pid, time.perf_counter() - started
        finally:
            pool.shutdown()
            marker.unlink(missing_ok=True)

    first, pid, seconds = run_on("uvloop", scenario())
    assert pid != first
    assert seconds < 1.0, f"{seconds:.2f} s: the job waited for the cold replacement"


@pytest.mark.parametrize("kind", ["processes", "threads"])
def test_drain_answers_jobs_not_started_at_once(kind: PoolKind) -> None:
    async def scenario() -> tuple[list[BaseException | int], float, int]:
        pool = SolverPool(1, 8, kind)
        try:
            await pool.start()
            running = asyncio.create_task(pool.run(30, _pid_after, 2.0))
            await asyncio.sleep(0.3)
            waiting = [asyncio.create_task(pool.run(30, _pid_after, 0)) for _ in range(3)]
            await asyncio.sleep(0.1)
            started = time.perf_counter()
            pool.drain()
            answers = await asyncio.gather(*waiting, return_exceptions=True)
            seconds = time.perf_counter() - started
            with pytest.raises(OverloadedError) as late:
                await pool.run(30, os.getpid)
            assert late.value.reason == "shutting_down"
            return answers, seconds, await running
        finally:
            pool.shutdown()

    answers, seconds, pid = run_on("uvloop", scenario())
    assert seconds < 0.5
    for answer in answers:
        assert isinstance(answer, OverloadedError), answer
        assert answer.reason == "shutting_down"
    assert pid > 0  # the running job finished


def test_a_stop_signal_drains_the_pool_then_runs_the_servers_handler() -> None:
    from planner.api.app import _drain_on_stop_signals

    seen: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda sig, frame: seen.append(f"server {sig}"))

    async def scenario() -> None:
        restore = _drain_on_stop_signals(lambda: seen.append("drain"))
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0.1)  # the handler runs, then the drain on the loop
        finally:
            restore()

    try:
        run_on("uvloop", scenario())
    finally:
        signal.signal(signal.SIGTERM, before)
    assert seen == [f"server {int(signal.SIGTERM)}", "drain"]


def test_large_jobs_leave_a_worker_to_small_ones() -> None:
    async def scenario() -> tuple[list[int], float, int]:
        pool = SolverPool(2, 8, "processes")
        try:
            await pool.start()
            large = [
                asyncio.create_task(pool.run(30, _pid_after, 1.5, large=True)) for _ in range(2)
            ]
            await asyncio.sleep(0.2)
            started = time.perf_counter()
            small = await pool.run(30, os.getpid)
            seconds = time.perf_counter() - started
            return list(await asyncio.gather(*large)), seconds, small
        finally:
            pool.shutdown()

    large, seconds, small = run_on("uvloop", scenario())
    assert seconds < 0.5, f"{seconds:.2f} s: the small job waited behind the large ones"
    assert large[0] == large[1]  # one after the other, on one worker
    assert small != large[0]


def test_worker_core_shares_split_the_cores() -> None:
    from planner.api.procs import core_shares

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity here")
    cores = os.sched_getaffinity(0)
    for count in (1, 2, 3, len(cores), 2 * len(cores)):
        shares = core_shares(count)
        assert len(shares) == count
        assert all(shares)
        assert set().union(*shares) == cores
        if count <= len(cores):  # disjoint shares
            assert sum(len(share) for share in shares) == len(cores)


_HELD: list[bytes] = []  # what _hold keeps alive in its worker
GROWTH_MIB = 320
RSS_LIMIT = 256 << 20  # above an idle worker of this module, below one holding GROWTH_MIB


def _hold(mib: int) -> tuple[int, int]:
    """Keep ``mib`` MiB alive in this process (every page written); its pid and resident
    bytes then."""
    from planner.api.procs import resident_bytes

    if mib:
        _HELD.append(b"\x01" * (mib << 20))
    return os.getpid(), resident_bytes()


@pytest.mark.parametrize("loop", LOOPS)
def test_a_worker_a_job_left_too_large_answers_then_is_replaced(loop: str) -> None:
    async def scenario() -> list[tuple[int, int]]:
        pool = SolverPool(1, 4, "processes", max_rss=RSS_LIMIT)
        try:
            await pool.start()
            answers = [await pool.run(30, _hold, 0), await pool.run(30, _hold, 0)]
            answers.append(await pool.run(30, _hold, GROWTH_MIB))  # answered, then it goes
            answers.append(await pool.run(60, _hold, 0))  # by its replacement
            assert await _gone(answers[2][0])
            assert pool._processes is not None
            assert pool._processes.recycled == 1
            assert pool.admitted == 0
            return answers
        finally:
            pool.shutdown()

    (first, rss), (again, _), (grown, grown_rss), (fresh, fresh_rss) = run_on(loop, scenario())
    assert 0 < rss < RSS_LIMIT
    assert again == first == grown  # a job that leaves the worker small keeps it
    assert grown_rss > RSS_LIMIT
    assert fresh != grown
    assert fresh_rss < RSS_LIMIT


def test_a_worker_within_its_memory_limit_stays() -> None:
    from planner.api.procs import shrinks_below

    assert shrinks_below(0)  # no limit
    assert shrinks_below(1 << 50)
    assert not shrinks_below(1)  # no process fits in a byte, trimmed or not
