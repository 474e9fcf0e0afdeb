"""The plan of one attempt: placements, barriers, status, certificate and figures."""

from __future__ import annotations

import numpy as np

from planner.core.graph import InterferenceGraph
from planner.core.io import request_sha256
from planner.core.models import (
    Barriers,
    Certificate,
    GraphStats,
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
from planner.pipeline.attempt import Attempt
from planner.pipeline.context import Context
from planner.pipeline.diagnostics import diagnostics
from planner.solvers.auto import Solution
from planner.solvers.exact import allowed_gap

__all__ = ["assemble", "naive_bytes", "plan_status", "solver_info", "stop_reason"]


def assemble(ctx: Context, attempt: Attempt, chosen: bool) -> Plan:
    """The plan of one attempt; ``chosen``: the main plan (its diagnostics say why)."""
    req, g = ctx.req, ctx.reference
    result, choice = attempt.result, attempt.barriers
    arena = result.arena_bytes
    capacity = req.effective_capacity
    status = _status(result, capacity)
    certificate = _certificate(g, result, capacity) if status == "infeasible" else None
    naive = naive_bytes(req)
    return Plan(
        name=req.name,
        status=status,
        arena_bytes=arena,
        lower_bound=ctx.bound.bytes,
        naive_bytes=naive,
        capacity=capacity,
        # Built from checked arrays; skipping re-validation matters at 100k buffers.
        placements=shared_placements(g.ids, result.offsets.tolist(), g.size.tolist()),
        barriers=Barriers(
            existing=ctx.existing,
            inserted=choice.inserted,
            required=choice.required,
        ),
        footprints=ctx.footprints,
        launch=Launch(**launch_figures(req.profile, arena, naive, req.stated_base_alignment)),
        solver=solver_info(
            req, status, result.name, arena, result.bound, result.proved_optimal, result.tried
        ),
        graph=GraphStats(
            buffers=g.n,
            live_edges=g.live_edges,
            hazard_edges=g.hazard_edges,
            components=g.components,
        ),
        diagnostics=diagnostics(ctx, attempt, status, chosen),
        certificate=certificate,
        request_sha256=request_sha256(req),
        aliases=[[g.ids[a], g.ids[b]] for a, b in attempt.aliases],
    )


def naive_bytes(req: PlanRequest) -> int:
    """Every buffer end to end, in request order, each aligned: the arena with no reuse."""
    top = 0
    for size, align in ((b.size, req.alignment_of(b)) for b in req.buffers):
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


def _status(result: Solution, capacity: int | None) -> Status:
    if capacity is not None and result.infeasible is not None:
        return "infeasible"
    return plan_status(capacity, result.arena_bytes, result.bound, result.proved_optimal)


def _certificate(g: InterferenceGraph, result: Solution, capacity: int | None) -> Certificate:
    """Why nothing fits: the peak of live bytes, or a set of buffers proved not to fit."""
    assert capacity is not None
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
