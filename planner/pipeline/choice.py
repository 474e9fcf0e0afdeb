"""Which attempt becomes the plan: the smallest arena, then the fewest new barriers; the
Pareto front; and the best bound any attempt proved."""

from __future__ import annotations

from dataclasses import replace

from planner.core.models import PlanRequest
from planner.pipeline.context import Context
from planner.pipeline.placement import Placement

__all__ = ["allowed", "choose", "frontier", "with_best_bound"]


def allowed(req: PlanRequest, attempts: list[Placement]) -> list[Placement]:
    """The attempts within ``max_new_barriers`` whose reuses all have a barrier."""
    cap = req.options.max_new_barriers
    return [a for a in attempts if (cap is None or a.new_barriers <= cap) and not a.barriers.missed]


def choose(req: PlanRequest, attempts: list[Placement]) -> Placement:
    """Smallest arena, then fewest new barriers, among the plans within the cap."""
    return min(allowed(req, attempts) or attempts, key=lambda a: (a.arena, a.new_barriers))


def frontier(attempts: list[Placement]) -> list[Placement]:
    """Non-dominated (arena, new barriers) attempts, fewest barriers first."""
    out: list[Placement] = []
    for a in sorted(attempts, key=lambda a: (a.new_barriers, a.arena)):
        if not out or a.arena < out[-1].arena:
            out.append(a)
    return out


def with_best_bound(ctx: Context, chosen: Placement, attempts: list[Placement]) -> Placement:
    """``chosen`` with the largest bound any attempt proved: each holds for the whole request
    (within the cap). When that bound is over the capacity and the peak of live bytes is not,
    the attempt's proof that nothing fits (its infeasible subset) comes with it."""
    source = max(attempts, key=lambda a: a.result.bound)
    bound = source.result.bound
    if bound <= chosen.result.bound:
        return chosen
    result = chosen.result
    proved = result.proved_optimal or chosen.arena <= bound
    infeasible = result.infeasible
    capacity = ctx.req.effective_capacity
    peak = ctx.reference.aligned_bound.bytes  # the certificate's first witness
    if infeasible is None and capacity is not None and peak <= capacity < bound:
        infeasible = source.result.infeasible
    return replace(
        chosen, result=replace(result, bound=bound, proved_optimal=proved, infeasible=infeasible)
    )
