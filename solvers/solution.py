"""What every solver returns (``Solution``): the offsets it found and what it proved."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.core.graph import InterferenceGraph

__all__ = ["Solution", "unfit"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Solution:
    """The offsets a solver found (None: no plan) and what is proved about them.

    The greedy portfolio (its bound: the aligned peak), the fits on an explicit conflict graph
    (``solvers.edges``), every exact method (``solvers.exact.ExactMethod``) and ``auto``
    return one; all but the exact methods' always hold a plan.
    """

    name: str  # the method whose offsets these are, e.g. "search", "greedy:size/best-fit"
    offsets: I64 | None  # bytes, request order; None when no plan was found
    arena_bytes: int | None  # max(offset + size) of ``offsets``; None without them
    bound: int  # bytes: no plan within the constraints uses fewer
    proved_optimal: bool  # arena_bytes == bound, and proved
    # Proved: these buffers (request order) alone cannot fit the capacity; None: no such proof.
    infeasible: list[int] | None = None
    tried: list[tuple[str, int]] = field(default_factory=list)  # (method, arena bytes), in order
    notes: list[str] = field(default_factory=list)  # what could not run, and why

    @property
    def plan_offsets(self) -> I64:
        """``offsets`` of a solution that has a plan (greedy's and ``auto``'s always do)."""
        if self.offsets is None:
            raise ValueError(f"the solution of {self.name!r} holds no plan")
        return self.offsets

    @property
    def plan_arena(self) -> int:
        """``arena_bytes`` of a solution that has a plan (greedy's and ``auto``'s always do)."""
        if self.arena_bytes is None:
            raise ValueError(f"the solution of {self.name!r} holds no plan")
        return self.arena_bytes


def unfit(g: InterferenceGraph, proved: bool = True) -> list[int] | None:
    """``infeasible`` for a method that decides ``g`` whole: every buffer when it ``proved``
    that no plan fits the capacity, else None."""
    return list(range(g.n)) if proved else None
