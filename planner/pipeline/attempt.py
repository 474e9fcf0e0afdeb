"""One attempt of the straight-line portfolio: a placement on some barriers, and the barriers
and aliases that make it safe."""

from __future__ import annotations

from dataclasses import replace

from planner.core.aliasing import alias_chains, merge_chains, sharing_pairs
from planner.core.barriers import choose_barriers, hits, reuses
from planner.pipeline.context import Context
from planner.pipeline.placement import Placement, place
from planner.pipeline.schedule import Kind
from planner.solvers.solution import Solution

__all__ = ["attempt", "with_barriers"]


def attempt(
    ctx: Context,
    points: list[int] | None,
    time_limit: float,
    kind: Kind,
    *,
    merge: bool = False,
    stop_at: int | None = None,
) -> Placement:
    """Plan on occupied intervals that end at ``points`` (None: at the lifetime's end)."""
    req = ctx.req
    g = ctx.reference.released(ctx.access_end, points, req.horizon)
    solve_on, node = g, None
    if merge and ctx.owners is not None:
        parent = alias_chains(g, ctx.owners)
        if any(p >= 0 for p in parent):
            solve_on, node = merge_chains(g, parent)
    result = place(ctx, solve_on, seconds=time_limit, stop_at=stop_at)
    trusted = kind is Kind.POLICY and ctx.exact
    if node is not None:
        offsets = result.plan_offsets[node]
        arena = int((offsets + g.size).max()) if g.n else 0
        result = replace(result, offsets=offsets, arena_bytes=arena, infeasible=None)
    if not trusted:
        # Proofs on this graph hold for it alone; only the request-wide bound is kept.
        bound = ctx.bound.bytes
        result = replace(
            result,
            bound=bound,
            proved_optimal=result.plan_arena <= bound,
            infeasible=None,
        )
    return with_barriers(ctx, kind, result)


def with_barriers(ctx: Context, kind: Kind, result: Solution) -> Placement:
    """The barriers (fewest) and aliases that make a placement safe."""
    req = ctx.req
    g = ctx.reference
    sync = req.options.sync
    candidates = req.options.barrier_candidates
    allowed = None if candidates is None else sorted(set(candidates))
    offsets = result.plan_offsets
    if ctx.owners is None:
        found = reuses(
            g.start, g.end, offsets, g.size, after=ctx.access_end, before=ctx.first_access
        )
        return Placement(result, choose_barriers(found, ctx.existing, sync, allowed), kind=kind)
    owners = ctx.owners
    pairs = sharing_pairs(req, offsets, g.size)
    local = [
        r
        for r in pairs
        if not hits(ctx.existing, r.after, r.before)
        and owners.compatible(r.previous, r.next, int(offsets[r.next] - offsets[r.previous]))
    ]
    alias_set = {(r.previous, r.next) for r in local}
    rest = [r for r in pairs if (r.previous, r.next) not in alias_set]
    choice = choose_barriers(rest, ctx.existing, sync, allowed)
    runtime = sorted(set(ctx.existing) | set(choice.inserted))
    aliases = [(r.previous, r.next) for r in local if not hits(runtime, r.after, r.before)]
    return Placement(result, choice, tuple(sorted(aliases)), kind=kind)
