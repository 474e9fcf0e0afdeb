"""A route's placement and what is proved of it: the one result ``assembly.assemble`` turns
into a plan, whichever route planned the request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.core.models import (
    Barriers,
    Certificate,
    ClusterBarriers,
    Diagnostic,
    Fence,
    Footprint,
    GraphStats,
    Inval,
    NamedBarrier,
    Status,
    Wait,
)

__all__ = ["Outcome", "Routed"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Outcome:
    """Offsets, the synchronisation they rely on, and the bounds and proofs behind them."""

    method: str  # the placement's method, as the plan's ``solver.name``
    offsets: I64  # per buffer, request order
    sizes: list[int]  # bytes planned per buffer (declared, or the per-block footprint)
    arena: int
    tried: list[tuple[str, int]]  # every method run and its arena
    lower_bound: int  # the plan's ``lower_bound``: valid for every plan of the request
    bound: int  # the best bound proved (bytes): ``lower_bound`` or a search's stronger one
    proved: bool  # the arena is proved optimal
    barriers: Barriers
    graph: GraphStats
    certify: Callable[
        [int], Certificate
    ]  # why nothing fits a capacity (when the plan is infeasible)
    explain: Callable[[Status], list[Diagnostic]]  # the plan's diagnostics, given its status
    infeasible: bool = False  # a proof that nothing fits the capacity besides the bound
    footprints: list[Footprint] = field(default_factory=list)
    aliases: list[tuple[int, int]] = field(default_factory=list)  # (earlier, later) buffers
    invals: list[Inval] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    named_barriers: list[NamedBarrier] = field(default_factory=list)
    cluster_barriers: ClusterBarriers | None = None

    @property
    def new_barriers(self) -> int:
        return len(self.barriers.inserted)


@dataclass(frozen=True)
class Routed:
    """What a route returns: the chosen outcome and the Pareto front (arena against new
    barriers, fewest barriers first; the chosen one in it as the same object)."""

    chosen: Outcome
    front: list[Outcome]
