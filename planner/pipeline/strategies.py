"""The placements to choose from: the policy's, and under "insert" ones with fewer barriers.

Each attempt gets a fixed share of the time limit (``budget.schedule``), so the same request
gets the same budgets; optional attempts are skipped once the deadline has passed by the
clock (see ``planner.pipeline.facade``).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from planner.core.clock import expired
from planner.core.graph import sync_barriers
from planner.pipeline.aliased import alias_model_applies, exact_aliases
from planner.pipeline.attempt import attempt, with_barriers
from planner.pipeline.choice import choose
from planner.pipeline.context import Context
from planner.pipeline.few_barriers import few_barrier_points
from planner.pipeline.placement import Placement
from planner.pipeline.schedule import Eligible, Kind, schedule, share
from planner.solvers import registry
from planner.solvers.exact import granularity, round_up
from planner.solvers.solution import Solution

__all__ = ["attempts", "eligible"]

CAPPED_POOL_MAX = 32  # new barriers the fewer-barrier search picks from
BARRIER_MODEL_MAX_BUFFERS = 64  # the exact barrier model has a disjunction per pair
FEW_BARRIERS_MAX_BUFFERS = 128  # greedy barrier points: candidates x buffers work per point chosen
PARETO_STEPS = 8  # intermediate plans per method on the Pareto front


def eligible(ctx: Context, floor: int | None) -> Eligible:
    """Which attempts may run on this request (``floor``: its ``_few_barriers_floor``)."""
    opts = ctx.req.options
    return Eligible(
        inserts=opts.sync == "insert" and opts.max_new_barriers != 0,
        aliases=ctx.owners is not None,
        few_barriers_first=floor is not None,
        few_barriers=len(ctx.req.buffers) <= FEW_BARRIERS_MAX_BUFFERS,
        capped_barriers=opts.pareto or opts.max_new_barriers is not None,
        exact=_exact_applies(ctx),
        alias_model=alias_model_applies(ctx),
    )


def attempts(ctx: Context) -> list[Placement]:
    """Placements to choose from: the policy's, and under "insert" fewer-barrier ones."""
    req = ctx.req
    limit = req.options.time_limit
    floor = _few_barriers_floor(ctx)
    shares = schedule(eligible(ctx, floor))
    policy = sync_barriers(req)
    if Kind.EXISTING not in shares:  # no barrier may be inserted: the policy's plans only
        return _policy_only(ctx, shares, policy)
    early: Placement | None = None
    if floor is not None and not expired():
        # Few barriers at the bound: when that plan exists nothing beats it, and the full
        # plan (a barrier after nearly every last access) is not worth computing.
        early = _few_barriers(
            ctx,
            floor,
            share(shares, Kind.FEW_BARRIERS_FIRST, limit),
            Kind.FEW_BARRIERS_FIRST,
            floor,
        )
        if early.arena <= floor and not early.barriers.missed:
            at_bound = replace(early.result, bound=floor, proved_optimal=True)
            return [replace(early, result=at_bound)]
    full = attempt(ctx, policy, share(shares, Kind.POLICY, limit), Kind.POLICY)
    found = [full]
    if ctx.owners is not None and not expired():
        found.append(
            attempt(ctx, policy, share(shares, Kind.ALIASES, limit), Kind.ALIASES, merge=True)
        )
    if not full.new_barriers:
        return _with_alias_model(ctx, shares, found)
    found += _on_existing(ctx, shares, full)
    if full.new_barriers > 1 and Kind.FEW_BARRIERS in shares:
        found += _few_after_full(ctx, shares, full, early, floor)
    if Kind.CAPPED_BARRIERS in shares and not expired():
        found.extend(_fewer_barriers(ctx, full, share(shares, Kind.CAPPED_BARRIERS, limit)))
    # Nothing to gain when a plan without new barriers is already as small as the full one.
    settled = min((a.arena for a in found if not a.new_barriers), default=full.arena + 1) <= (
        full.arena
    )
    if Kind.EXACT in shares and not (settled and not req.options.pareto) and not expired():
        found.extend(_exact_barriers(ctx, full, share(shares, Kind.EXACT, limit)))
    return _with_alias_model(ctx, shares, found)


def _policy_only(
    ctx: Context, shares: dict[Kind, Fraction], policy: list[int] | None
) -> list[Placement]:
    """No barrier may be inserted: the policy's plan, with aliases where owners are known."""
    limit = ctx.req.options.time_limit
    found = [attempt(ctx, policy, share(shares, Kind.POLICY, limit), Kind.POLICY)]
    if ctx.owners is not None and not expired():
        aliases = share(shares, Kind.ALIASES, limit)
        found.append(attempt(ctx, policy, aliases, Kind.ALIASES, merge=True))
    return _with_alias_model(ctx, shares, found)


def _on_existing(ctx: Context, shares: dict[Kind, Fraction], full: Placement) -> list[Placement]:
    """The plans on the existing barriers alone, where the full plan inserts some."""
    limit = ctx.req.options.time_limit
    found: list[Placement] = []
    # Without new barriers no plan is below that graph's bound: when it is above the full
    # plan, such a plan is only wanted as a fallback (a cap, or candidates that may not
    # protect every reuse) or on the Pareto front.
    opts = ctx.req.options
    wanted = opts.max_new_barriers is not None or opts.barrier_candidates is not None
    wanted = wanted or opts.pareto or bool(full.barriers.missed)
    # The plan on the existing barriers is kept when it is the fallback, even past the deadline.
    # (The deadline is asked last: a yes is a cut only where the attempt would run.)
    if wanted or (_bound_with(ctx, []) <= full.arena and not expired()):
        found.append(attempt(ctx, ctx.existing, share(shares, Kind.EXISTING, limit), Kind.EXISTING))
    if ctx.owners is not None and not expired():
        seconds = share(shares, Kind.EXISTING_ALIASES, limit)
        found.append(attempt(ctx, ctx.existing, seconds, Kind.EXISTING_ALIASES, merge=True))
    return found


def _few_after_full(
    ctx: Context,
    shares: dict[Kind, Fraction],
    full: Placement,
    early: Placement | None,
    floor: int | None,
) -> list[Placement]:
    """The few-barriers plan at the full plan's arena (the early one where it is the same)."""
    # A plan of the full one's arena is all this attempt is for when that arena is
    # proved optimal: these lifetimes are no shorter, so no plan on them is smaller.
    capacity = ctx.req.effective_capacity
    fits = capacity is None or full.arena <= capacity
    stop_at = full.arena if full.result.proved_optimal and fits else None
    if early is not None and floor == full.arena == stop_at:
        return [early]  # the attempt made above: the same target and budget
    if expired():
        return []
    seconds = share(shares, Kind.FEW_BARRIERS, ctx.req.options.time_limit)
    return [_few_barriers(ctx, full.arena, seconds, Kind.FEW_BARRIERS, stop_at)]


def _with_alias_model(
    ctx: Context, shares: dict[Kind, Fraction], found: list[Placement]
) -> list[Placement]:
    """``found``, and where the exact alias model applies and the best plan is above the
    bound, that plan solved (or proved) on the request's own sharing rules."""
    if Kind.ALIAS_MODEL not in shares:
        return found
    best = choose(ctx.req, found)
    if best.arena <= ctx.bound.bytes or best.barriers.missed or expired():
        return found
    seconds = share(shares, Kind.ALIAS_MODEL, ctx.req.options.time_limit)
    solved = exact_aliases(ctx, best, seconds)
    return found if solved is None else [*found, solved]


def _few_barriers_floor(ctx: Context) -> int | None:
    """The arena no plan of the request is below, when a few-barrier plan is tried first: under
    "insert" with no cap, candidates, Pareto front or aliases, on an exact graph, within the
    capacity. None: plan as usual."""
    req = ctx.req
    opts = req.options
    if (
        opts.sync != "insert"
        or opts.max_new_barriers is not None
        or opts.barrier_candidates is not None
        or opts.pareto
        or ctx.owners is not None
        or not ctx.exact
        or len(req.buffers) > FEW_BARRIERS_MAX_BUFFERS
    ):
        return None
    g = ctx.reference
    floor = round_up(g.aligned_bound.bytes, granularity(g))
    capacity = req.effective_capacity
    return floor if capacity is None or floor <= capacity else None


def _few_barriers(
    ctx: Context, target: int, budget: float, kind: Kind, stop_at: int | None = None
) -> Placement:
    """A plan on the existing barriers plus new ones chosen greedily to bring the peak of
    live bytes down to ``target`` (bytes): usually that arena with far fewer barriers than
    the full plan. ``stop_at``: an arena nothing below is any better (a true bound)."""
    req, g = ctx.req, ctx.reference
    points = few_barrier_points(
        g.start,
        g.end,
        ctx.access_end,
        g.size,
        existing=ctx.existing,
        candidates=req.options.barrier_candidates,
        horizon=req.horizon,
        target=target,
    )
    return attempt(ctx, points, budget, kind, stop_at=stop_at)


def _fewer_barriers(ctx: Context, full: Placement, budget: float) -> list[Placement]:
    """Plans on the existing barriers plus k of the full plan's new ones, chosen greedily by
    the lower bound they allow, for the k the cap or the Pareto front asks for."""
    req = ctx.req
    pool = full.barriers.inserted[:CAPPED_POOL_MAX]
    cap = req.options.max_new_barriers
    top = min(full.new_barriers - 1, len(pool))  # more would be the full plan again
    wanted: set[int] = set()
    if req.options.pareto and top > 0:
        if top <= PARETO_STEPS:
            wanted = set(range(1, top + 1))
        else:
            wanted = {1 + (top - 1) * s // (PARETO_STEPS - 1) for s in range(PARETO_STEPS)}
    if cap is not None and 0 < cap <= top:
        wanted.add(cap)
    if not wanted:
        return []
    chosen: list[int] = []
    found: list[Placement] = []
    each = budget / len(wanted)
    for k in range(1, max(wanted) + 1):
        rest = [p for p in pool if p not in chosen]
        if not rest:
            break
        chosen.append(min(rest, key=lambda p: (_bound_with(ctx, [*chosen, p]), p)))
        if k in wanted:
            points = sorted(set(ctx.existing) | set(chosen))
            found.append(attempt(ctx, points, each, Kind.CAPPED_BARRIERS))
    return found


def _bound_with(ctx: Context, extra: list[int]) -> int:
    points = sorted(set(ctx.existing) | set(extra))
    g = ctx.reference.released(ctx.access_end, points, ctx.req.horizon)
    return g.lower_bound.bytes


def _exact_applies(ctx: Context) -> bool:
    """The barrier model runs on small requests when the solver asks for exact methods, or
    for the Pareto front. Under "auto" the greedy choices stand: the model saves barriers
    over them, never bytes, at 0.1-0.3 s a request (measured on 32 buffers)."""
    req = ctx.req
    asked = ctx.solver.barrier_model(req.options.pareto)
    return asked and len(req.buffers) <= BARRIER_MODEL_MAX_BUFFERS and registry.installed("cpsat")


def _exact_barriers(ctx: Context, full: Placement, budget: float) -> list[Placement]:
    """The barrier model at the cap (or none), and under ``pareto`` at every smaller cap."""
    from planner.solvers.barrier_model import BarrierProblem, solve_barriers

    req, g = ctx.req, ctx.reference
    aliases: frozenset[tuple[int, int]] = frozenset()
    if ctx.owners is not None:
        owners = ctx.owners
        aliases = frozenset(
            (a, b)
            for a in range(g.n)
            for b in range(g.n)
            if g.end[a] <= g.start[b] and owners.compatible(a, b, 0)
        )
    candidates = req.options.barrier_candidates
    problem = BarrierProblem(
        start=g.start,
        end=g.end,
        after=ctx.access_end,
        before=ctx.first_access,
        size=g.size,
        alignment=g.alignment,
        pinned=g.pinned,
        existing=ctx.existing,
        allowed=None if candidates is None else sorted(set(candidates)),
        aliases=aliases,
    )
    cap = req.options.max_new_barriers
    caps: list[int | None] = [cap]
    if req.options.pareto:
        top = full.new_barriers if cap is None else min(cap, full.new_barriers)
        caps += list(range(min(top, PARETO_STEPS)))
    each = budget / len(caps)
    stacked = int(g.size.sum()) + int(g.alignment.sum())  # bytes: room for any plan
    found: list[Placement] = []
    for k in caps:
        solved = solve_barriers(
            problem,
            capacity=req.effective_capacity,
            lower_bound=ctx.bound.bytes,
            # Without a cap the full plan is one of the model's: its arena bounds the space.
            upper=full.arena if k is None else stacked,
            max_new=k,
            time_limit=each,
            hint=(full.result.plan_offsets, full.barriers.inserted) if k is None else None,
        )
        if solved is None:
            continue
        # The model aliases only at equal offsets: its optimum proves nothing when aliases at
        # other offsets are possible.
        proved = solved.optimal and k == cap and ctx.owners is None
        result = Solution(
            name="exact:barrier-model",
            offsets=solved.offsets,
            arena_bytes=solved.arena_bytes,
            bound=solved.arena_bytes if proved else ctx.bound.bytes,
            proved_optimal=proved or solved.arena_bytes <= ctx.bound.bytes,
            tried=[*full.result.tried, ("exact:barrier-model", solved.arena_bytes)],
        )
        found.append(with_barriers(ctx, Kind.EXACT, result))
    return found
