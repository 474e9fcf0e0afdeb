"""Plans built by hand around raw offsets, for tests of what produces or checks offsets."""

from __future__ import annotations

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

__all__ = ["plan_from_offsets"]


def plan_from_offsets(
    request: PlanRequest, g: InterferenceGraph, offsets: npt.NDArray[np.int64]
) -> Plan:
    """A minimal plan around raw offsets, barriers at every point where reuse may need one."""
    arena = int((offsets + g.size).max()) if g.n else 0
    every = list(range(request.horizon + 1))
    sync = request.options.sync
    return Plan(
        name=request.name,
        status="feasible",
        arena_bytes=arena,
        lower_bound=g.lower_bound.bytes,
        naive_bytes=int(g.size.sum()),
        capacity=None,
        placements=[
            Placement(id=i, offset=int(o), size=int(s))
            for i, o, s in zip(g.ids, offsets, g.size, strict=True)
        ],
        barriers=Barriers(
            existing=sorted(set(request.barriers)),
            required=every if sync == "none" else [],
            inserted=sorted(
                set(every if (c := request.options.barrier_candidates) is None else c)
                - set(request.barriers)
            )
            if sync == "insert"
            else [],
        ),
        launch=Launch(dynamic_smem_bytes=arena, requires_opt_in=False),
        solver=SolverInfo(name="test", proved_optimal=False, bound=0, gap=0.0),
        graph=GraphStats(buffers=g.n, live_edges=0, hazard_edges=0, components=0),
        request_sha256="",
    )
