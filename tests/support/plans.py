"""Plans built by hand around raw offsets, for tests of what produces or checks offsets."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from planner.core.graph import InterferenceGraph
from planner.core.models import (
    Barriers,
    GraphStats,
    Launch,
    Placement,
    Plan,
    PlanRequest,
    SolverInfo,
)

__all__ = ["hand_plan", "plan_from_offsets"]


def plan_from_offsets(
    request: PlanRequest, g: InterferenceGraph, offsets: npt.NDArray[np.int64]
) -> Plan:
    """A minimal plan around raw offsets, barriers at every point where reuse may need one."""
    every = list(range(request.horizon + 1))
    sync = request.options.sync
    barriers = Barriers(
        existing=sorted(set(request.barriers)),
        required=every if sync == "none" else [],
        inserted=sorted(
            set(every if (c := request.options.barrier_candidates) is None else c)
            - set(request.barriers)
        )
        if sync == "insert"
        else [],
    )
    placed = {str(i): int(o) for i, o in zip(g.ids, offsets, strict=True)}
    sizes = {str(i): int(s) for i, s in zip(g.ids, g.size, strict=True)}
    return hand_plan(request, placed, barriers, sizes=sizes, lower_bound=g.lower_bound.bytes)


def hand_plan(
    request: PlanRequest,
    offsets: Mapping[str, int],
    barriers: Barriers,
    *,
    sizes: Mapping[str, int] | None = None,
    lower_bound: int = 0,
    capacity: int | None = None,
) -> Plan:
    """A feasible plan placing each buffer at ``offsets[id]`` (``sizes[id]`` bytes, else its
    size) with ``barriers``."""
    size = {b.id: b.size for b in request.buffers} if sizes is None else sizes
    arena = max((offsets[b.id] + size[b.id] for b in request.buffers), default=0)
    return Plan(
        name=request.name,
        status="feasible",
        arena_bytes=arena,
        lower_bound=lower_bound,
        naive_bytes=sum(size.values()),
        capacity=capacity,
        placements=[
            Placement(id=b.id, offset=offsets[b.id], size=size[b.id]) for b in request.buffers
        ],
        barriers=barriers,
        launch=Launch(dynamic_smem_bytes=arena, requires_opt_in=False),
        solver=SolverInfo(name="by hand", proved_optimal=False, bound=0, gap=0.0),
        graph=GraphStats(buffers=len(request.buffers), live_edges=0, hazard_edges=0, components=0),
        request_sha256="",
    )


def pairs_on_common_bytes(plan: Plan) -> list[tuple[int, int]]:
    """Buffer pairs ``(i, j)``, ``i < j`` in request order, that ``plan`` places on a common
    byte."""
    where = [(p.offset, p.offset + p.size) for p in plan.placements]
    return [
        (i, j)
        for i, j in itertools.combinations(range(len(where)), 2)
        if where[i][0] < where[j][1] and where[j][0] < where[i][1]
    ]
