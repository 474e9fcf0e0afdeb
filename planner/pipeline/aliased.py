"""The exact attempt for small requests whose buffers may alias, or whose new barriers are
capped.

On a request with aliases the graph-based methods plan with same-thread reuses either
forbidden or merged into chains, so what they prove holds for their graph, not for the
request; under a cap of new barriers they plan on one barrier set at a time. The request's
own rules are pairwise (DESIGN, "Reuse hazard") once the barriers are known: fixed
(``sync: existing``, a cap of 0 new barriers, or no cap, where every allowed point may hold
one and more barriers never hurt), or under a cap of k new barriers, chosen by the model
among the allowed points, at most k of them. ``solvers.alias_model`` solves them exactly:
its optimum is the request's, so the plan it proves is reported optimal with gap 0.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from planner.core.access import ANY, NONE
from planner.core.aliasing import Owners
from planner.core.barriers import hits
from planner.core.graph import InterferenceGraph, sync_barriers
from planner.core.install import available
from planner.pipeline.attempt import with_barriers
from planner.pipeline.context import Context
from planner.pipeline.placement import Placement
from planner.pipeline.schedule import Kind
from planner.solvers.solution import Solution

if TYPE_CHECKING:
    from planner.solvers.alias_model import AliasRules

__all__ = ["ALIAS_MODEL_MAX_BUFFERS", "alias_model_applies", "exact_aliases"]

ALIAS_MODEL_MAX_BUFFERS = 24  # a disjunction per pair, and the shifts of each aliasing pair
MAX_SHIFTS = 4096  # relative offsets of one pair judged; past this the model does not run
MAX_BYTE_CHECKS = 1 << 24  # byte pairs compared over every pair of buffers (~0.1 s)
NOTHING = (0, 0)  # an empty span of new barrier points: an alias option that always holds


def alias_model_applies(ctx: Context) -> bool:
    """Whether the exact attempt may run: aliases possible or a cap of new barriers, few
    buffers, an exact solver (or ``auto``) and its extra installed."""
    req = ctx.req
    opts = req.options
    capped = opts.sync == "insert" and (opts.max_new_barriers or 0) > 0
    return (
        (ctx.owners is not None or capped)
        and ctx.solver.alias_model
        and len(req.buffers) <= ALIAS_MODEL_MAX_BUFFERS
        and available("exact")
    )


def exact_aliases(ctx: Context, best: Placement, time_limit: float) -> Placement | None:
    """The request solved exactly on its own rules, seeded with ``best`` (a plan of the
    request); None when the rules are too large to state."""
    from planner.solvers.alias_model import solve_aliased

    rules = _rules(ctx)
    if rules is None:
        return None
    g = ctx.reference
    solved = solve_aliased(
        g.size,
        g.alignment,
        g.pinned,
        rules,
        lower_bound=ctx.bound.bytes,
        upper=best.arena,
        hint=best.result.offsets,
        time_limit=time_limit,
        lifetimes=(g.start, g.end),
        accesses=(ctx.first_access, ctx.access_end),
    )
    offsets = best.result.offsets
    arena = best.arena
    if solved.offsets is not None and solved.arena_bytes is not None and solved.arena_bytes < arena:
        offsets, arena = solved.offsets, solved.arena_bytes
    bound = max(ctx.bound.bytes, solved.bound)
    if solved.proved_optimal:
        bound = max(bound, arena)  # the model's optimum is the request's
    result = Solution(
        name="exact:alias-model" if offsets is not best.result.offsets else best.result.name,
        offsets=offsets,
        arena_bytes=arena,
        bound=bound,
        proved_optimal=arena <= bound,
        tried=[*best.result.tried, ("exact:alias-model", arena)],
    )
    return with_barriers(ctx, Kind.ALIAS_MODEL, result)


def _rules(ctx: Context) -> AliasRules | None:
    """The pairwise rules on the request's barriers (``solvers.alias_model``): fixed ones, or
    under a cap of new barriers the existing ones and the points a new one may take."""
    from planner.solvers.alias_model import AliasRules, Guard

    owners = ctx.owners
    g = ctx.reference
    fixed, pool, cap = _barrier_choice(ctx)
    free = [p < 0 for p in g.pinned.tolist()]
    apart: list[tuple[int, int]] = []
    shifts: list[tuple[int, int, list[int]]] = []
    pending: list[tuple[int, int, tuple[int, int], list[tuple[tuple[int, int], list[int]]]]] = []
    checks = 0  # byte pairs to compare, bounded by MAX_BYTE_CHECKS
    for a in range(g.n):
        for b in range(g.n):
            if a == b or not (free[a] or free[b]):
                continue  # two pins: the caller's placement, never changed
            if g.start[a] < g.end[b] and g.start[b] < g.end[a]:
                if a < b:
                    apart.append((a, b))
                continue
            if g.end[a] > g.start[b]:
                continue  # b before a: judged as (b, a)
            after, before = int(ctx.access_end[a]), int(ctx.first_access[b])
            if fixed is None or hits(fixed, after, before):
                continue  # a barrier protects the reuse at any offset
            size_a, size_b = int(g.size[a]), int(g.size[b])
            if size_a == 0 or size_b == 0:
                continue
            protect = _span(pool, after, before)  # new points that would protect it
            options: list[tuple[tuple[int, int], list[int]]] = []
            if owners is not None and owners.patterned[a] and owners.patterned[b]:
                shifted = _shift_options(ctx, owners, a, b, fixed, pool, before, checks)
                if shifted is None:
                    return None
                options, checks = shifted
            if protect[0] == protect[1] and not options:
                apart.append((a, b))
            elif protect[0] == protect[1] and len(options) == 1 and options[0][0] == NOTHING:
                shifts.append((a, b, options[0][1]))
            else:
                pending.append((a, b, protect, options))
    if not pending:
        return AliasRules(apart=apart, shifts=shifts)
    points, index = _distinct_points(
        pool, [r for _, _, protect, opts in pending for r in [protect, *(e for e, _ in opts)]]
    )
    guarded = [
        Guard(
            earlier=a,
            later=b,
            protect=index(protect),
            aliases=[(index(enable), allowed) for enable, allowed in options],
        )
        for a, b, protect, options in pending
    ]
    barriers = [] if fixed is None else fixed
    return AliasRules(
        apart=apart, shifts=shifts, guarded=guarded, points=points, max_new=cap, barriers=barriers
    )


def _shift_options(
    ctx: Context,
    owners: Owners,
    a: int,
    b: int,
    fixed: list[int],
    pool: list[int],
    before: int,
    checks: int,
) -> tuple[list[tuple[tuple[int, int], list[int]]], int] | None:
    """The shifts at which patterned ``a`` and later ``b`` may share bytes, each with the new
    barrier span that enables it, latest cut-off first; and the byte pairs compared so far
    (``checks`` and these). None where the shifts or the comparisons pass their limits."""
    g = ctx.reference
    size_a, size_b = int(g.size[a]), int(g.size[b])
    options: list[tuple[tuple[int, int], list[int]]] = []
    step = math.gcd(_grid(g, a), _grid(g, b)) or 1
    lo = -((size_b - 1) // step) * step
    if (size_a - 1 - lo) // step + 1 > MAX_SHIFTS:
        return None
    # The later buffer's cut-off: the first barrier at or after its first
    # access, an existing one, or earlier a new one past ``before``.
    k = bisect.bisect_left(fixed, before)
    last = fixed[k] if k < len(fixed) else None
    cuts = _cut_levels(ctx, b, pool, before, last)
    held: list[int] = []
    for cut in [last, *reversed(cuts)]:  # latest first: fewest shifts
        checks += size_a * size_b
        if checks > MAX_BYTE_CHECKS:
            return None
        allowed = _shared_shifts(owners, a, b, range(lo, size_a, step), cut)
        if len(allowed) > len(held):  # earlier cut-offs allow more (a superset)
            held = allowed
            enable = NOTHING if cut is last else _span_of(pool, before + 1, cut)
            options.append((enable, allowed))
    return options, checks


def _barrier_choice(ctx: Context) -> tuple[list[int] | None, list[int], int | None]:
    """(barriers every plan has, sorted, None: every point; points a new barrier may take,
    sorted; the cap on new ones). Barriers are fixed unless "insert" has a cap of at least 1:
    without a cap every allowed point may hold one, and more barriers never hurt."""
    req = ctx.req
    cap = req.options.max_new_barriers
    if req.options.sync != "insert" or cap is None or cap == 0:
        return sync_barriers(ctx.req), [], None
    candidates = req.options.barrier_candidates
    points = range(req.horizon + 1) if candidates is None else candidates
    return ctx.existing, sorted(set(points) - set(ctx.existing)), cap


def _span(points: list[int], left: int, right: int) -> tuple[int, int]:
    """The indices ``[i, j)`` of ``points`` (sorted) within ``[left, right]``."""
    return bisect.bisect_left(points, left), bisect.bisect_right(points, right)


def _span_of(points: list[int], left: int, right: int | None) -> tuple[int, int]:
    return _span(points, left, points[-1] if right is None else right)


def _cut_levels(
    ctx: Context, later: int, pool: list[int], before: int, last: int | None
) -> list[int]:
    """New points that may be ``later``'s cut-off (the first barrier at or after its first
    access ``before``) ahead of ``last``, the fixed one: one per set of its accesses left
    before the cut-off, the latest such point (the most ways to reach that set). A point
    past its last access before ``last`` leaves the set the fixed cut-off leaves."""
    times = sorted({a.at for a in ctx.req.buffers[later].accesses})
    levels: list[int] = []
    for t in times:  # cut-offs up to t leave out the accesses at t and after
        if t <= before or (last is not None and t >= last):
            continue
        k = bisect.bisect_right(pool, t) - 1  # the latest new point at or before t
        if k >= 0 and pool[k] > before and (not levels or pool[k] > levels[-1]):
            levels.append(pool[k])
    return levels


def _distinct_points(
    pool: list[int], spans: list[tuple[int, int]]
) -> tuple[list[int], Callable[[tuple[int, int]], list[int]]]:
    """One point of ``pool`` per distinct set of ``spans`` it lies in (a barrier matters only
    through the reuses it protects and the cut-offs it moves), and a map from a span to the
    indices of the kept points within it."""
    # The set a point lies in changes only where a span begins or ends.
    starts = sorted({i for span in spans for i in span if 0 <= i < len(pool)})
    signature: set[tuple[int, ...]] = set()
    kept: list[int] = []  # indices into pool
    for i in starts:
        key = tuple(k for k, (lo, hi) in enumerate(spans) if lo <= i < hi)
        if key and key not in signature:
            signature.add(key)
            kept.append(i)

    def index(span: tuple[int, int]) -> list[int]:
        return [k for k, i in enumerate(kept) if span[0] <= i < span[1]]

    return [pool[i] for i in kept], index


def _shared_shifts(
    owners: Owners, earlier: int, later: int, shifts: range, cut: int | None
) -> list[int]:
    """The shifts (``later``'s offset minus ``earlier``'s, bytes) at which the two overlap
    and every shared byte is untouched by one of them or owned by one thread in both, the
    later one's accesses counted before ``cut`` (None: all; ``Owners.compatible``, for
    every shift at once: byte ``i`` of ``earlier`` meets byte ``j`` of ``later`` at shift
    ``i - j``)."""
    first = owners.owners(earlier, None).owners
    second = owners.owners(later, cut).owners
    touched = (first != NONE)[:, None] & (second != NONE)[None, :]
    clash = touched & ((first[:, None] != second[None, :]) | (first == ANY)[:, None])
    size_a, size_b = first.size, second.size
    bad = np.zeros(size_a + size_b - 1, dtype=np.bool_)  # at index shift + size_b - 1
    if size_b <= size_a:
        for j in range(size_b):  # column j: shifts i - j for every i
            bad[size_b - 1 - j : size_b - 1 - j + size_a] |= clash[:, j]
    else:
        for i in range(size_a):  # row i: shifts i - j for every j
            bad[i : i + size_b] |= clash[i, ::-1]
    return [s for s in shifts if not bad[s + size_b - 1]]


def _grid(g: InterferenceGraph, i: int) -> int:
    """What every offset of buffer ``i`` is a multiple of (its pin, or its alignment)."""
    pinned = int(g.pinned[i])
    return pinned if pinned >= 0 else int(g.alignment[i])
