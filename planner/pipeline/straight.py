"""The straight-line route: requests without loops, branches, ranges, partitions or asynchronous
agents, planned on intervals by the portfolio of attempts (``planner.pipeline.strategies``)."""

from __future__ import annotations

from planner.core.models import Barriers
from planner.pipeline.choice import allowed, choose, frontier, with_best_bound
from planner.pipeline.context import Context, build_context
from planner.pipeline.diagnostics import diagnostics
from planner.pipeline.ground import Ground
from planner.pipeline.outcome import Outcome, Routed
from planner.pipeline.outcome_parts import interval_certificate, interval_stats, solved
from planner.pipeline.placement import Placement
from planner.pipeline.strategies import attempts

__all__ = ["route_straight"]


def route_straight(ground: Ground) -> Routed:
    """The chosen attempt with the best bound any attempt proved, and under "insert" with
    ``options.pareto`` the front of (arena, new barriers) attempts."""
    ctx = build_context(ground)
    req = ctx.req
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
        **solved(result),
        sizes=g.size.tolist(),
        lower_bound=ctx.bound.bytes,
        barriers=Barriers(
            existing=ctx.existing, inserted=choice.inserted, required=choice.required
        ),
        graph=interval_stats(g),
        certify=lambda capacity: interval_certificate(g, result, capacity),
        explain=lambda status: diagnostics(ctx, attempt, status, chosen),
        infeasible=result.infeasible is not None,
        footprints=ctx.footprints,
        aliases=list(attempt.aliases),
    )
