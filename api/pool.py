"""The bounded solver pool: CPU work off the event loop, a queue bound, a deadline per request.

A request is admitted only while fewer than ``workers + queue_size`` jobs are running or
waiting; past that, when a request's deadline passes, and when the worker process running
it dies, it is refused with ``OverloadedError`` (503 with ``Retry-After``), never left
hanging. A request given up for any reason frees its slot and, if it was running on a process,
that process (killed and replaced): ``admitted`` always comes back to 0.

Workers are processes (``api.procs``) or threads. Planning is mostly Python and compiled code
that holds the GIL for tens of milliseconds at a time, so threads solve about one request at
a time and a long solve stalls the event loop; processes use every core and leave the event
loop alone, at the price of parsing the body again and sending the answer through a socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from planner.api.procs import ProcessWorkers, WorkerDiedError
from planner.core.errors import OverloadedError, PlannerError, RequestError

__all__ = ["Cancelled", "PoolKind", "SolverPool"]

T = TypeVar("T")
Cancelled = Callable[[], Awaitable[bool]]  # True once the caller no longer wants the answer
PoolKind = Literal["processes", "threads"]
CANCEL_POLL = 0.5  # s between checks that a waiting caller is still there
START_SECONDS = 300.0  # s the workers may take to start and warm up (a cold compile)


@dataclass(frozen=True)
class _Failure:
    """A planner error raised on a worker, in a form that crosses a process boundary (the
    error classes themselves do not pickle: their ``args`` are the summary line)."""

    kind: type[PlannerError]
    errors: list[dict[str, Any]] | None  # RequestError's field errors
    message: str

    def error(self) -> PlannerError:
        if self.errors is not None and issubclass(self.kind, RequestError):
            return self.kind(self.errors)
        return self.kind(self.message)


def _guarded(fn: Callable[..., T], *args: object) -> T | _Failure:
    try:
        return fn(*args)
    except RequestError as exc:
        return _Failure(type(exc), exc.errors, str(exc))
    except PlannerError as exc:
        return _Failure(type(exc), None, str(exc))


class SolverPool:
    """``workers`` processes or threads, and at most ``queue_size`` jobs waiting for one."""

    def __init__(
        self,
        workers: int,
        queue_size: int,
        kind: PoolKind = "threads",
        initializer: Callable[[], None] | None = None,
        pin: bool = True,
        max_rss: int = 0,
    ) -> None:
        self.workers = workers
        self.pin = pin  # worker processes each on their share of the cores
        self.max_rss = max_rss  # bytes a worker process may keep after a job (0: no limit)
        self.kind = kind
        self.capacity = workers + queue_size  # jobs running or waiting
        self._initializer = initializer  # run once in each worker process
        self._threads: ThreadPoolExecutor | None = None  # started on first use
        self._processes: ProcessWorkers | None = None  # started on first use, on this loop
        self._lock = threading.Lock()
        self._admitted = 0  # jobs submitted and not finished (a dropped one is finished)
        self._draining = False  # shutting down: no job starts any more
        self._thread_jobs: set[Future[Any]] = set()  # thread jobs submitted, not yet done

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    async def start(self) -> None:
        """Start every worker now (processes take a second to import and warm up)."""
        if self.kind == "processes":
            if self._processes is None:
                self._processes = ProcessWorkers(
                    self.workers, self._initializer, self.pin, max_rss=self.max_rss
                )
            await self._processes.all_ready(START_SECONDS)

    async def run(
        self,
        timeout: float,
        fn: Callable[..., T],
        *args: object,
        cancelled: Cancelled | None = None,
        large: bool = False,
    ) -> T:
        """``fn(*args)`` on a worker; ``OverloadedError`` when full, after ``timeout`` s, when
        the worker process died, or when ``cancelled()`` (polled every ``CANCEL_POLL`` s)
        says the caller is gone. A ``large`` job runs apart from small ones: processes never
        give their last idle worker to a large job.

        ``fn`` and its arguments must pickle when the workers are processes. A process job
        given up (deadline, cancellation, or this coroutine cancelled) frees its worker: a
        waiting one is dropped, a running one's process is killed and replaced. A thread
        cannot be stopped: a running thread job keeps its slot until it ends (its time limit
        bounds it).
        """
        if self._draining:
            raise _shutting_down()
        with self._lock:
            if self._admitted >= self.capacity:
                raise OverloadedError(
                    "queue_full",
                    f"the solver queue is full: {self._admitted} requests running or waiting, "
                    f"the limit is {self.capacity}",
                )
            self._admitted += 1
        if self.kind == "processes":
            result = await self._in_process(timeout, fn, args, cancelled, large)
        else:
            result = await self._in_thread(timeout, fn, args, cancelled)
        if isinstance(result, _Failure):
            raise result.error()
        return result

    async def _in_process(
        self,
        timeout: float,
        fn: Callable[..., T],
        args: tuple[object, ...],
        cancelled: Cancelled | None,
        large: bool = False,
    ) -> T | _Failure:
        try:
            if self._processes is None:
                self._processes = ProcessWorkers(
                    self.workers, self._initializer, self.pin, max_rss=self.max_rss
                )
            workers = self._processes
            job = workers.submit(_guarded, (fn, *args), self._release, large)
        except BaseException:
            self._release()
            raise
        try:
            outcome = await _wait(job.future, timeout, cancelled)
        except WorkerDiedError:
            raise OverloadedError(
                "worker_died",
                "the solver process running this request died (out of memory?); "
                "a new one has taken its place",
            ) from None
        finally:
            if not job.finished:
                workers.abandon(job)  # frees the slot, and the worker if it ran the job
        return cast("T | _Failure", outcome)

    async def _in_thread(
        self,
        timeout: float,
        fn: Callable[..., T],
        args: tuple[object, ...],
        cancelled: Cancelled | None,
    ) -> T | _Failure:
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="solver")
        try:
            future: Future[T | _Failure] = self._threads.submit(_guarded, fn, *args)
        except BaseException:
            self._release()
            raise
        self._thread_jobs.add(future)
        future.add_done_callback(lambda _: self._release())
        future.add_done_callback(self._thread_jobs.discard)
        try:
            return await _wait(asyncio.wrap_future(future), timeout, cancelled)
        except asyncio.CancelledError:
            if future.cancelled() and self._draining:  # dropped from the queue by drain()
                raise _shutting_down() from None
            raise
        finally:
            # A job still waiting is dropped from the queue; one already running finishes on
            # its own (its time limit bounds it) and frees its slot then.
            future.cancel()

    def _release(self) -> None:
        with self._lock:
            self._admitted -= 1

    def drain(self) -> None:
        """The server is stopping: every job that has not started is answered
        ``OverloadedError`` (``shutting_down``: 503 with Retry-After) now, rather than after
        the running ones, and so is any job submitted from now on. Running jobs go on."""
        self._draining = True
        if self._processes is not None:
            for job in self._processes.drop_waiting():
                if not job.future.done():
                    job.future.set_exception(_shutting_down())
        for future in list(self._thread_jobs):
            future.cancel()  # only one still waiting for a thread is cancelled

    def shutdown(self) -> None:
        """Drop waiting jobs and stop the workers; a later job starts new ones."""
        threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        processes, self._processes = self._processes, None
        if processes is not None:
            processes.shutdown()
        self._draining = False


async def _wait(future: asyncio.Future[T], timeout: float, cancelled: Cancelled | None) -> T:
    """``future``'s result, or ``OverloadedError`` past ``timeout`` s or once ``cancelled()``;
    ``future`` itself is left as it is."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            raise _deadline(timeout)
        step = left if cancelled is None else min(left, CANCEL_POLL)
        done, _ = await asyncio.wait({future}, timeout=step)
        if done:
            return future.result()
        if cancelled is not None and await cancelled():
            raise OverloadedError(
                "client_disconnected", "the client went away before the request was answered"
            )


def _shutting_down() -> OverloadedError:
    return OverloadedError(
        "shutting_down", "the service is shutting down; send the request again (to another replica)"
    )


def _deadline(timeout: float) -> OverloadedError:
    return OverloadedError(
        "deadline_exceeded", f"the request was not answered within the deadline of {timeout:g} s"
    )
