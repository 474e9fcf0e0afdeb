"""The wall clock as a hard cap only.

Every exact method works to a deterministic budget (nodes, or CP-SAT's deterministic time)
derived from its share of the request's time limit, so the same request gives the same plan.
The clock is only a cap against a machine far slower than expected. Were that cap the
method's own share, a method whose budget nearly fills its share would stop at a different
point whenever the machine is busy; so while a request is planned the cap is the request's
own deadline instead: the time limit is still kept, and a busy machine changes nothing
unless the whole limit runs out.

When it does, the plan depends on the machine. So every place where the clock ends work that
the deterministic budgets would have let run on says so (``note_cut``; ``expired`` does when
it answers yes), and ``watching`` collects that for one request: its plan carries
``solver.cut_by_clock``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Cuts", "deadline", "expired", "note_cut", "now", "paused", "wall_limit", "watching"]


class _Deadline:
    """The request's deadline, one object shared by every thread that runs in the request's
    context, so that time paused in any of them moves it for all."""

    __slots__ = ("end",)

    def __init__(self, end: float) -> None:
        self.end = end


_DEADLINE: ContextVar[_Deadline | None] = ContextVar("planner_deadline", default=None)


class Cuts:
    """Whether the clock ended any of one request's work before its deterministic budget did:
    one object shared by every thread that runs in the request's context."""

    __slots__ = ("cut",)

    def __init__(self) -> None:
        self.cut = False


_CUTS: ContextVar[Cuts | None] = ContextVar("planner_cuts", default=None)


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
    slower than the cost model assumes gets there (the ``planner.pipeline`` docstring). Ask
    only where the answer decides whether such work runs: a yes is noted as a cut."""
    end = _DEADLINE.get()
    if end is None or now() < end.end:
        return False
    note_cut()
    return True


def note_cut() -> None:
    """Note that the clock ended work its deterministic budget would have let run on (a
    solver's hard cap reached, optional work skipped past the deadline)."""
    cuts = _CUTS.get()
    if cuts is not None:
        cuts.cut = True


@contextmanager
def watching() -> Iterator[Cuts]:
    """Within the block every cut by the clock is noted in the ``Cuts`` yielded. A block inside
    another notes in the outer one: a request planned in parts (spilling plans the kept and the
    spilled buffers apart) is cut when any part is."""
    outer = _CUTS.get()
    if outer is not None:
        yield outer
        return
    cuts = Cuts()
    token = _CUTS.set(cuts)
    try:
        yield cuts
    finally:
        _CUTS.reset(token)


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
