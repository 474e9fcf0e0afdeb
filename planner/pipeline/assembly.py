"""The plan of an outcome, for every route: placements, status, certificate and figures."""

from __future__ import annotations

from typing import Any

from planner.core.clusters import PORTABLE_CLUSTER, cluster_size
from planner.core.columns import columns
from planner.core.io import request_sha256
from planner.core.models import (
    Launch,
    Plan,
    PlanRequest,
    SolverAttempt,
    SolverInfo,
    Status,
    Stopped,
)
from planner.core.models.plan import shared_placements
from planner.core.targets import launch_figures
from planner.pipeline.outcome import Outcome
from planner.solvers.exact import allowed_gap

__all__ = ["assemble", "naive_bytes", "plan_status", "solver_info", "stop_reason"]


def assemble(req: PlanRequest, outcome: Outcome) -> Plan:
    """The plan of an outcome: its status, certificate, placements and figures."""
    o = outcome
    capacity = req.effective_capacity
    status: Status = (
        "infeasible"
        if capacity is not None and o.infeasible
        else plan_status(capacity, o.arena, o.bound, o.proved)
    )
    naive = naive_bytes(req)
    ids = [b.id for b in req.buffers]
    return Plan(
        name=req.name,
        status=status,
        arena_bytes=o.arena,
        lower_bound=o.lower_bound,
        naive_bytes=naive,
        capacity=capacity,
        # Built from checked arrays; skipping re-validation matters at 100k buffers.
        placements=shared_placements(ids, o.offsets.tolist(), o.sizes),
        barriers=o.barriers,
        footprints=o.footprints,
        launch=_launch(req, o.arena, naive),
        solver=solver_info(req, status, o.method, o.arena, o.bound, o.proved, o.tried),
        graph=o.graph,
        diagnostics=o.explain(status),
        certificate=o.certify(capacity)
        if status == "infeasible" and capacity is not None
        else None,
        request_sha256=request_sha256(req),
        aliases=[[ids[a], ids[b]] for a, b in o.aliases],
        # Fields most plans leave empty, passed only when set (each costs a validation).
        **_set(
            invals=o.invals,
            waits=o.waits,
            fences=o.fences,
            named_barriers=o.named_barriers,
            cluster_barriers=o.cluster_barriers,
        ),
    )


def _set(**fields: object) -> dict[str, Any]:
    """The fields that are not empty."""
    return {k: v for k, v in fields.items() if v}


def _launch(req: PlanRequest, arena: int, naive: int) -> Launch:
    """What launching takes: shared bytes, occupancy, and a cluster's dims where it has one."""
    launch = Launch(**launch_figures(req.profile, arena, naive, req.stated_base_alignment))
    if req.cluster is None:
        return launch
    dims = list(req.cluster)
    return launch.model_copy(
        update={"cluster": dims, "cluster_non_portable": cluster_size(dims) > PORTABLE_CLUSTER}
    )


def naive_bytes(req: PlanRequest) -> int:
    """Every buffer end to end, in request order, each aligned: the arena with no reuse."""
    cols = columns(req)
    top = 0
    for size, align in zip(cols.size.tolist(), cols.alignment.tolist(), strict=True):
        top = (top + align - 1) // align * align + size
    return top


def stop_reason(req: PlanRequest, status: Status, arena: int, bound: int, proved: bool) -> Stopped:
    """Why the search for this plan ended, but for the clock (the facade says "time" where
    it cut a plan short of its budgets): a proof, the gap tolerance, or the budgets."""
    if proved or status == "infeasible":
        return "proved"
    if status != "unknown" and arena - bound <= allowed_gap(
        req.options.gap_tolerance, bound, req.max_alignment
    ):
        return "within_tolerance"
    return "budget"


def solver_info(
    req: PlanRequest,
    status: Status,
    name: str,
    arena: int,
    bound: int,
    proved: bool,
    tried: list[tuple[str, int]],
) -> SolverInfo:
    """What the plan says of its search: the method, the best bound proved (bytes), the gap
    to it, every method's arena and why the search stopped."""
    gap = (arena - bound) / bound if bound else 0.0
    return SolverInfo(
        name=name,
        proved_optimal=proved,
        bound=bound,
        gap=round(gap, 6),
        tried=[SolverAttempt(name=m, arena_bytes=a) for m, a in tried],
        stopped=stop_reason(req, status, arena, bound, proved),
    )


def plan_status(capacity: int | None, arena: int, bound: int, proved: bool) -> Status:
    """A plan's status from its arena, the best bound proved (bytes) and whether the arena
    is proved optimal: infeasible when the bound is over the capacity, unknown when only the
    arena is, else optimal or feasible."""
    if capacity is not None and bound > capacity:
        return "infeasible"
    if capacity is not None and arena > capacity:
        return "unknown"
    return "optimal" if proved else "feasible"
