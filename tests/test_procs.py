"""Worker processes over pipes: lowest idle worker first, deaths, deadlines, shutdown."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from api.pool import OverloadedError, SolverPool
from planner.errors import InternalError, RequestError


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def _refuse() -> None:
    raise RequestError.field(("buffers", 0, "size"), "size must be > 0", "greater_than", 0)


def _crash() -> None:
    os._exit(3)  # as a worker killed for memory would


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

    one_by_one, together = asyncio.run(scenario())
    assert len(one_by_one) == 1  # the same warm process every time
    assert len(together) == 2  # a busy first worker: the second takes the job


def test_errors_cross_and_a_dead_worker_is_replaced() -> None:
    async def scenario() -> tuple[int, int]:
        pool = SolverPool(1, 2, "processes")
        try:
            first = await pool.run(30, os.getpid)
            with pytest.raises(RequestError) as info:
                await pool.run(30, _refuse)
            assert info.value.errors[0]["loc"] == ["buffers", 0, "size"]
            with pytest.raises(InternalError, match="solver process died"):
                await pool.run(30, _crash)
            second = await pool.run(30, os.getpid)
            assert pool.admitted == 0
            return first, second
        finally:
            pool.shutdown()

    first, second = asyncio.run(scenario())
    assert first != second  # a new process in the dead one's place


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
            await running
            assert pool.admitted == 0
            assert await pool.run(30, os.getpid) > 0
        finally:
            pool.shutdown()

    asyncio.run(scenario())


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
        give_up = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < give_up:
            await asyncio.sleep(0.05)
        assert not _alive(pid)

    asyncio.run(scenario())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
