"""The bounded solver pool: CPU work off the event loop, a queue bound, a deadline per request.

A request is admitted only while fewer than ``threads + queue_size`` jobs are running or
waiting; past that, and when a request's deadline passes, it is refused with ``OverloadedError``
(503 with ``Retry-After``), never left hanging.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["OverloadedError", "SolverPool"]

T = TypeVar("T")


class OverloadedError(Exception):
    """The pool cannot take or finish this request in time; the client should retry later."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # "queue_full" or "deadline_exceeded"


class SolverPool:
    """``threads`` workers and at most ``queue_size`` jobs waiting for one."""

    def __init__(self, threads: int, queue_size: int) -> None:
        self.threads = threads
        self.capacity = threads + queue_size  # jobs running or waiting
        self._executor: ThreadPoolExecutor | None = None  # started on first use
        self._lock = threading.Lock()
        self._admitted = 0  # jobs submitted and not finished (a cancelled one is finished)

    @property
    def admitted(self) -> int:
        """Jobs running or waiting now."""
        return self._admitted

    async def run(self, timeout: float, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on a worker; ``OverloadedError`` when full or after ``timeout`` seconds."""
        with self._lock:
            if self._admitted >= self.capacity:
                raise OverloadedError(
                    "queue_full",
                    f"the solver queue is full: {self._admitted} requests running or waiting, "
                    f"the limit is {self.capacity}",
                )
            self._admitted += 1
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="solver")
        try:
            future: Future[T] = self._executor.submit(fn, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            # A job still waiting is dropped from the queue; one already running finishes on
            # its own (its time limit bounds it) and frees its slot then.
            future.cancel()
            raise OverloadedError(
                "deadline_exceeded",
                f"the request was not answered within the deadline of {timeout:g} s",
            ) from None

    def _release(self, _: object) -> None:
        with self._lock:
            self._admitted -= 1

    def shutdown(self) -> None:
        """Drop waiting jobs and let running ones finish; a later job starts new threads."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
