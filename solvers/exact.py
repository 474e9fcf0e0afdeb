"""How an exact method is called (``ExactMethod``; it returns a ``solvers.solution.Solution``:
the best plan it found and what it proved) and the budgets and bounds they share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from planner.core.budget import SMALL_GAP_SECONDS
from planner.core.clock import note_cut
from planner.core.graph import InterferenceGraph
from planner.solvers.solution import Solution

__all__ = [
    "DEFAULT_GAP_PARTS",
    "ExactMethod",
    "GapTolerance",
    "Progress",
    "Stop",
    "allowed_gap",
    "exact_budget",
    "granularity",
    "note_cpsat_cut",
    "note_cpsat_run",
    "round_up",
]

I64 = npt.NDArray[np.int64]
# Called as an exact method improves: (arena bytes of its best plan or None, bound bytes).
# For benchmarks; it never changes the result.
Progress = Callable[[int | None, int], None]
# ``options.gap_tolerance``: bytes (an int), a fraction of the bound (a float below 1), or None
# for the default rule (``allowed_gap``).
GapTolerance = int | float | None
DEFAULT_GAP_PARTS = 1_000_000  # the default tolerates a gap below this part of the bound


class Stop:
    """Asks a method running on another thread to stop early; what it returns then is thrown
    away. A method that takes one calls ``attach`` with its own way of stopping (before it
    starts: ``False`` means stopped already)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []
        self.stopped = False

    def attach(self, hook: Callable[[], None]) -> bool:
        with self._lock:
            if not self.stopped:
                self._hooks.append(hook)
            return not self.stopped

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            hooks = list(self._hooks)
        for hook in hooks:
            hook()


class ExactMethod(Protocol):
    """How every exact method (``search``, ``cpsat``, ``windows``) is called.

    The smallest arena (bytes) for ``g`` within ``capacity``, or a proof that none fits, in
    about ``time_limit`` seconds. ``lower_bound`` is valid (no plan uses fewer bytes);
    ``hint`` is a plan (bytes, request order) to start from; ``upper`` an arena the caller
    already has (bytes): only smaller ones are searched. ``on_progress`` sees each
    improvement (for benchmarks; it never changes the result). ``stop`` may end the method
    early from another thread, and what it returns then means nothing. ``tolerance``: bytes;
    it stops once its plan is within them of the bound it has proved. A method may take
    options of its own beyond these, each with a default.
    """

    def __call__(
        self,
        g: InterferenceGraph,
        *,
        capacity: int | None,
        lower_bound: int,
        hint: I64 | None,
        time_limit: float,
        upper: int | None = None,
        on_progress: Progress | None = None,
        stop: Stop | None = None,
        tolerance: int = 0,
    ) -> Solution: ...


def granularity(g: InterferenceGraph) -> int:
    """Bytes every arena is a multiple of: the gcd of the sizes, the free buffers'
    alignments and the pinned offsets (1 when there is nothing to divide).

    A free offset is a multiple of its alignment, a pinned one is given, so every
    ``offset + size`` is a multiple of this, and so is ``max(offset + size)``.
    """
    free = g.pinned < 0
    values = np.concatenate([g.size, g.alignment[free], g.pinned[~free]]).astype(np.int64)
    step = int(np.gcd.reduce(values)) if values.size else 1
    return max(1, step)


def allowed_gap(tolerance: GapTolerance, bound: int, alignment: int) -> int:
    """Bytes above ``bound`` a plan may stay for the exact methods not to run, or to stop.

    ``tolerance`` is bytes (an int), a fraction of ``bound`` (a float), or None: the default,
    which tolerates a gap smaller than ``alignment`` (the largest alignment in the request: a
    gap below it rarely buys anything a compiler could use) or than a millionth of the bound
    (whole-model arenas of gigabytes, where closing kilobytes is not worth seconds of search).
    0 asks for a proof of optimality.
    """
    if tolerance is None:
        return max(alignment - 1, bound // DEFAULT_GAP_PARTS)
    if isinstance(tolerance, int):
        return tolerance
    return int(bound * tolerance)


def exact_budget(
    tolerance: GapTolerance, gap: int, bound: int, alignment: int, seconds: float
) -> tuple[float, int]:
    """(seconds of budget, bytes of gap at which they stop) for the exact methods on a plan
    ``gap`` bytes above ``bound``, given ``seconds``.

    A tolerance given is kept as it is. The default stops at a millionth of the bound, and
    gives a gap below the largest alignment (``allowed_gap``) at most ``SMALL_GAP_SECONDS``:
    kernel-sized parts close such gaps in milliseconds, and none gets seconds for it.
    """
    if tolerance is not None:
        return seconds, allowed_gap(tolerance, bound, alignment)
    if gap <= allowed_gap(None, bound, alignment):
        seconds = min(seconds, SMALL_GAP_SECONDS)
    return seconds, bound // DEFAULT_GAP_PARTS


def round_up(value: int, step: int) -> int:
    """``value`` rounded up to a multiple of ``step``."""
    return -(-value // step) * step


def note_cpsat_cut(finished: bool, seconds: float, cap: float, work: float, budget: float) -> None:
    """Note a cut by the clock (``planner.core.clock.note_cut``) for a CP-SAT run that did not
    finish (``finished``: optimal, or proved infeasible) and stopped on its clock cap (``seconds``
    of wall time, ``cap`` its limit) before its deterministic budget (``work`` spent of
    ``budget``)."""
    if not finished and seconds >= cap and work < budget:
        note_cut()


def note_cpsat_run(solver: Any, finished: bool) -> None:
    """``note_cpsat_cut`` for a CP-SAT solver that has run (``finished``: its status was
    optimal or infeasible): its wall time and deterministic time against its limits."""
    params = solver.parameters
    note_cpsat_cut(
        finished,
        solver.wall_time,
        params.max_time_in_seconds,
        solver.deterministic_time,
        params.max_deterministic_time,
    )
