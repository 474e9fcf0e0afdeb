"""The bounded solver pool: CPU work off the event loop, a queue bound, a deadline per request.

A request is admitted only while fewer than ``workers + queue_size`` jobs are running or
waiting; past that, and when a request's deadline passes, it is refused with
``OverloadedError`` (503 with ``Retry-After``), never left hanging.

Workers are processes or threads. Planning is mostly Python and compiled code that holds the
GIL for tens of milliseconds at a time, so threads solve about one request at a time and a
long solve stalls the event loop; processes use every core and leave the event loop alone,
at the price of parsing the body again and sending the answer through a pipe.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from planner.errors import InternalError, PlannerError, RequestError

__all__ = ["OverloadedError", "PoolKind", "SolverPool"]

T = TypeVar("T")
PoolKind = Literal["processes", "threads"]
PARENT_POLL = 0.5  # s between a worker process's checks that its server is still there


class OverloadedError(Exception):
    """The pool cannot take or finish this request in time; the client should retry later."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # "queue_full" or "deadline_exceeded"


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


def _start_worker(parent: int, initializer: Callable[[], None] | None) -> None:
    """In a new worker process: exit when the server that started it is gone (killed, so
    it could not stop its workers), then run ``initializer``."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        os._exit(0)  # the server is gone: nobody will send work or read an answer

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    if initializer is not None:
        initializer()


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
    ) -> None:
        self.workers = workers
        self.kind = kind
        self.capacity = workers + queue_size  # jobs running or waiting
        self._initializer = initializer  # run once in each worker process
        self._executor: Executor | None = None  # started on first use
        self._lock = threading.Lock()
        self._admitted = 0  # jobs submitted and not finished (a cancelled one is finished)

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    def _start(self) -> Executor:
        if self._executor is None:
            if self.kind == "processes":
                # spawn: a fork of a process running an event loop and threads is unsafe.
                self._executor = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start_worker,
                    initargs=(os.getpid(), self._initializer),
                )
            else:
                self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="solver")
        return self._executor

    async def start(self) -> None:
        """Start every worker now (processes take a second to import and warm up)."""
        if self.kind == "processes":
            await asyncio.gather(*(self.run(300, int) for _ in range(self.workers)))

    async def run(self, timeout: float, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker; ``OverloadedError`` when full or after ``timeout`` s.

        ``fn`` and its arguments must pickle when the workers are processes.
        """
        with self._lock:
            if self._admitted >= self.capacity:
                raise OverloadedError(
                    "queue_full",
                    f"the solver queue is full: {self._admitted} requests running or waiting, "
                    f"the limit is {self.capacity}",
                )
            self._admitted += 1
        try:
            future: Future[T | _Failure] = self._start().submit(_guarded, fn, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            # A job still waiting is dropped from the queue; one already running finishes on
            # its own (its time limit bounds it) and frees its slot then.
            future.cancel()
            raise OverloadedError(
                "deadline_exceeded",
                f"the request was not answered within the deadline of {timeout:g} s",
            ) from None
        except BrokenProcessPool:
            self.shutdown()  # the next job starts fresh workers
            raise InternalError("a solver process died (out of memory?)") from None
        if isinstance(result, _Failure):
            raise result.error()
        return result

    def _release(self, _: object) -> None:
        with self._lock:
            self._admitted -= 1

    def shutdown(self) -> None:
        """Drop waiting jobs and let running ones finish; a later job starts new workers."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
