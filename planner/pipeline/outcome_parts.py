"""The parts of an outcome every route builds alike: its block barriers and their counts, its
conflict graph's figures, and the certificate of why nothing fits a capacity."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from planner.core.graph import InterferenceGraph
from planner.core.models import Barriers, Certificate, GraphStats, PlanRequest
from planner.pipeline.ground import Ground
from planner.pipeline.placement import component_count
from planner.solvers.solution import Solution

__all__ = [
    "Solved",
    "Witness",
    "block_barriers",
    "interval_certificate",
    "interval_stats",
    "pair_certifier",
    "pair_stats",
    "partition_barriers",
    "solved",
]

I64 = npt.NDArray[np.int64]


class Solved(TypedDict):
    """The outcome's fields a placement gives (``planner.pipeline.outcome.Outcome``)."""

    method: str
    offsets: I64
    arena: int
    tried: list[tuple[str, int]]
    bound: int
    proved: bool


def solved(result: Solution, offsets: I64 | None = None, arena: int | None = None) -> Solved:
    """The placement ``result``'s method, offsets and arena (``offsets`` and ``arena`` where
    the route plans others from it: the unrolled program's), what it tried, the bound it
    proved and whether the arena is proved optimal."""
    return Solved(
        method=result.name,
        offsets=result.plan_offsets if offsets is None else offsets,
        arena=result.plan_arena if arena is None else arena,
        tried=result.tried,
        bound=result.bound,
        proved=result.proved_optimal,
    )


def block_barriers(
    g: Ground, inserted: list[int], required: list[int], running: Sequence[int] | None = None
) -> Barriers:
    """The plan's block barriers with the kernel's counts (programs and partitions): the
    request's and those inserted, the executions of those that run (``running``; default:
    the request's and the inserted ones) and of the required ones, each point counted as
    often as the loops around it run it."""
    req, existing = g.req, g.existing
    points = sorted({*existing, *inserted})
    return Barriers(
        existing=existing,
        inserted=inserted,
        required=required,
        static=len(points),
        executions=sum(req.executions_at(p) for p in (points if running is None else running)),
        required_executions=sum(req.executions_at(p) for p in required),
    )


def partition_barriers(g: Ground, new: list[int]) -> Barriers:
    """The request's block barriers and the new ones (``new``) of a partitioned plan:
    inserted under sync "insert", required under "insert" and "none"."""
    inserted = new if g.sync == "insert" else []
    required = new if g.sync != "existing" else []
    return block_barriers(g, inserted, required)


def interval_stats(g: InterferenceGraph) -> GraphStats:
    """The figures of an interval graph (the straight-line route's)."""
    return GraphStats(
        buffers=g.n,
        live_edges=g.live_edges,
        hazard_edges=g.hazard_edges,
        components=g.components,
    )


def pair_stats(n: int, live: int, edges: I64 | Sequence[tuple[int, int]]) -> GraphStats:
    """The figures of an explicit conflict graph on ``n`` buffers: ``edges`` the pairs kept
    apart (an ``(m, 2)`` array or pairs, each once), ``live`` of them live at one time."""
    return GraphStats(
        buffers=n,
        live_edges=live,
        hazard_edges=len(edges) - live,
        components=component_count(n, edges),
    )


@dataclass(frozen=True)
class Witness:
    """Buffers every plan holds at once: ``live_bytes`` together (at ``point``, where there
    is one point), the request's lower bound."""

    buffers: list[int]
    live_bytes: int
    point: int | None = None


def pair_certifier(req: PlanRequest, witness: Witness, proved: int) -> Callable[[int], Certificate]:
    """Why no plan on explicit pairs fits a capacity: the witness of the lower bound (its
    buffers and their ``live_bytes``) where that alone is over the capacity, else every
    buffer together, which needs ``proved`` bytes (the placement's bound)."""

    def certify(capacity: int) -> Certificate:
        if witness.live_bytes > capacity:
            return Certificate(
                reason="lower_bound",
                capacity=capacity,
                live_bytes=witness.live_bytes,
                point=witness.point,
                buffers=[req.buffers[k].id for k in witness.buffers],
            )
        return Certificate(
            reason="infeasible_subset",
            capacity=capacity,
            live_bytes=proved,
            buffers=[b.id for b in req.buffers],
        )

    return certify


def interval_certificate(g: InterferenceGraph, result: Solution, capacity: int) -> Certificate:
    """Why nothing fits on an interval graph: the peak of live bytes, or a set of buffers
    proved not to fit."""
    for reason, bound in (("lower_bound", g.lower_bound), ("aligned_bound", g.aligned_bound)):
        if bound.bytes > capacity:
            return Certificate(
                reason=reason,
                capacity=capacity,
                live_bytes=bound.bytes,
                point=bound.point,
                buffers=[g.ids[i] for i in bound.buffers],
            )
    # A bound over the capacity with no smaller witness (barrier hazards, or the granularity
    # of offsets): all the buffers together are the set that cannot fit.
    subset = (
        np.arange(g.n, dtype=np.int64)
        if result.infeasible is None
        else np.asarray(result.infeasible, dtype=np.int64)
    )
    return Certificate(
        reason="infeasible_subset",
        capacity=capacity,
        live_bytes=g.subgraph(subset).lower_bound.bytes,
        buffers=[g.ids[i] for i in subset.tolist()],
    )
