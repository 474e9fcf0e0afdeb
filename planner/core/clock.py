"""The wall clock as a hard cap only.

Every exact method works to a deterministic budget (nodes, or CP-SAT's deterministic time)
derived from its share of the request's time limit, so the same request gives the same plan.
The clock is only a cap against a machine far slower than expected. Were that cap the
method's own share, a method whose budget nearly fills its share would stop at a different
point whenever the machine is busy; so while a request is planned the cap is the request's
own deadline instead: the time limit is still kept, and a busy machine changes nothing
unless the whole limit runs out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["deadline", "expired", "now", "paused", "wall_limit"]


class _Deadline:
    """The request's deadline, one object shared by every thread that runs in the request's
    context, so that time paused in any of them moves it for all."""

    __slots__ = ("end",)

    def __init__(self, end: float) -> None:
        self.end = end


_DEADLINE: ContextVar[_Deadline | None] = ContextVar("planner_deadline", default=None)


def now() -> float:
    """Seconds on the monotonic clock every deadline is measured on."""
    return time.perf_counter()


@contextmanager
def deadline(seconds: float, *, since: float | None = None) -> Iterator[None]:
    """Within the block, exact methods stop by the clock only ``seconds`` from now (or from
    ``since``, a reading of ``now()``)."""
    token = _DEADLINE.set(_Deadline((now() if since is None else since) + seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def wall_limit(share: float) -> float:
    """Seconds a method given ``share`` seconds of budget may run by the clock: until the
    request's deadline when one is set (never less than nothing), else ``share``."""
    end = _DEADLINE.get()
    if end is None:
        return share
    return max(0.0, end.end - now())


def expired() -> bool:
    """Whether the request's deadline has passed (never without one). Optional work (more
    heuristics, exact methods, fewer-barrier attempts) is skipped once it has: only a machine
    slower than the cost model assumes gets there (the ``planner.pipeline`` docstring)."""
    end = _DEADLINE.get()
    return end is not None and now() >= end.end


@contextmanager
def paused() -> Iterator[None]:
    """The time spent in the block does not count against the request's deadline (loading
    compiled code once per process, which a later request would not pay), in whichever of
    the request's threads it is spent."""
    began = now()
    try:
        yield
    finally:
        end = _DEADLINE.get()
        if end is not None:
            end.end += now() - began
