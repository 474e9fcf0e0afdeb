"""The straight-line route: requests without loops, branches, ranges, partitions or asynchronous
agents, planned on intervals by the portfolio of attempts (``planner.pipeline.strategies``)."""

from __future__ import annotations

import numpy as np

from planner.core.graph import InterferenceGraph
from planner.core.models import Barriers, Certificate, GraphStats, PlanRequest
from planner.pipeline.choice import allowed, choose, frontier, with_best_bound
from planner.pipeline.context import Context, build_context
from planner.pipeline.diagnostics import diagnostics
from planner.pipeline.outcome import Outcome, Routed
from planner.pipeline.placement import Placement
from planner.pipeline.strategies import attempts
from planner.solvers.registry import SolverChoice
from planner.solvers.solution import Solution

__all__ = ["route_straight"]


def route_straight(req: PlanRequest, solver: SolverChoice, optional_share: float) -> Routed:
    """The chosen attempt with the best bound any attempt proved, and under "insert" with
    ``options.pareto`` the front of (arena, new barriers) attempts."""
    ctx = build_context(req, solver, optional_share)
    found = attempts(ctx)
    picked = choose(req, found)
    chosen = _outcome(ctx, with_best_bound(ctx, picked, found), True)
    if not req.options.pareto or req.options.sync != "insert":
        # Under "existing" and "none" no barrier is inserted: the front is the one plan.
        return Routed(chosen, [chosen])
    front = [
        chosen if a is picked else _outcome(ctx, a, False) for a in frontier(allowed(req, found))
    ]
    return Routed(chosen, front)


def _outcome(ctx: Context, attempt: Placement, chosen: bool) -> Outcome:
    """One attempt as an outcome; ``chosen``: the main plan (its diagnostics say why)."""
    g = ctx.reference
    result, choice = attempt.result, attempt.barriers
    return Outcome(
        method=result.name,
        offsets=result.plan_offsets,
        sizes=g.size.tolist(),
        arena=result.plan_arena,
        tried=result.tried,
        lower_bound=ctx.bound.bytes,
        bound=result.bound,
        proved=result.proved_optimal,
        barriers=Barriers(
            existing=ctx.existing, inserted=choice.inserted, required=choice.required
        ),
        graph=GraphStats(
            buffers=g.n,
            live_edges=g.live_edges,
            hazard_edges=g.hazard_edges,
            components=g.components,
        ),
        certify=lambda capacity: _certificate(g, result, capacity),
        explain=lambda status: diagnostics(ctx, attempt, status, chosen),
        infeasible=result.infeasible is not None,
        footprints=ctx.footprints,
        aliases=list(attempt.aliases),
    )


def _certificate(g: InterferenceGraph, result: Solution, capacity: int) -> Certificate:
    """Why nothing fits: the peak of live bytes, or a set of buffers proved not to fit."""
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
