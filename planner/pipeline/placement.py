"""A placement and what makes it safe: the one record every planning route hands on to its
assembly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.barriers import BarrierChoice
from planner.pipeline.schedule import Kind
from planner.pipeline.unrolled_stab import Choice
from planner.solvers.solution import Solution

__all__ = ["Placement"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Placement:
    """Offsets and what is proved of them (``result``), the barriers (new, relied on, and
    reuses no allowed barrier protects) and the aliases that make them safe.

    On straight-line code the conflicts are the occupied intervals of the request's graph,
    ``kind`` says which attempt of the portfolio made it, and the barriers are the fewest
    that stab its reuses (exact on intervals). On a program with loops and branches the
    conflicts are explicit pairs (``edges``), ``kind`` is None, a reuse no allowed point
    protects is placed apart as a conflict (so ``barriers.missed`` stays empty), and the
    barrier choices that stayed unproved within their budget are listed (``unproved``).
    """

    result: Solution
    barriers: BarrierChoice
    aliases: tuple[tuple[int, int], ...] = ()  # (earlier, later) reusing with no barrier
    kind: Kind | None = None
    edges: I64 | None = None  # conflicting buffer pairs (i, j), i < j, it was placed on
    unproved: tuple[Choice, ...] = ()  # barrier choices not proved the cheapest

    @property
    def offsets(self) -> I64:
        return self.result.plan_offsets

    @property
    def arena(self) -> int:
        return self.result.plan_arena

    @property
    def new_barriers(self) -> int:
        return len(self.barriers.inserted)
