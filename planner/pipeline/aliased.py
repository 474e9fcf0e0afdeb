"""The exact attempt for small requests whose buffers may alias.

On such a request the graph-based methods plan with same-thread reuses either forbidden or
merged into chains, so what they prove holds for their graph, not for the request. When the
barriers are fixed (``sync: existing``, a cap of 0 new barriers, or no cap, where every
allowed point may hold one and more barriers never hurt) the request's own rules are pairwise
(DESIGN, "Reuse hazard"), and ``solvers.alias_model`` solves them exactly: its optimum is the
request's, so the plan it proves is reported optimal with gap 0.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from planner.core.access import ANY, NONE
from planner.core.aliasing import Owners
from planner.core.barriers import hits
from planner.core.graph import InterferenceGraph, sync_barriers
from planner.core.install import available
from planner.pipeline.attempt import Attempt, protect
from planner.pipeline.budget import Kind
from planner.pipeline.context import Context
from planner.solvers.auto import Solution

if TYPE_CHECKING:
    from planner.solvers.alias_model import AliasRules

__all__ = ["ALIAS_MODEL_MAX_BUFFERS", "alias_model_applies", "exact_aliases"]

ALIAS_MODEL_MAX_BUFFERS = 24  # a disjunction per pair, and the shifts of each aliasing pair
MAX_SHIFTS = 4096  # relative offsets of one pair judged; past this the model does not run
MAX_BYTE_CHECKS = 1 << 24  # byte pairs compared over every pair of buffers (~0.1 s)


def alias_model_applies(ctx: Context) -> bool:
    """Whether the exact alias attempt may run: aliases possible, barriers fixed by the
    request, few buffers, an exact solver (or ``auto``) and its extra installed."""
    req = ctx.req
    opts = req.options
    return (
        ctx.owners is not None
        and opts.max_new_barriers in (None, 0)
        and opts.solver in ("auto", "exact", "cpsat")
        and len(req.buffers) <= ALIAS_MODEL_MAX_BUFFERS
        and available("exact")
    )


def exact_aliases(ctx: Context, best: Attempt, time_limit: float) -> Attempt | None:
    """The request solved exactly on its fixed barriers, seeded with ``best`` (a plan of
    the request); None when the rules are too large to state."""
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
    return protect(ctx, Kind.ALIAS_MODEL, result)


def _rules(ctx: Context) -> AliasRules | None:
    """The pairwise rules on the request's fixed barriers (``solvers.alias_model``)."""
    from planner.solvers.alias_model import AliasRules

    owners = ctx.owners
    assert owners is not None
    g = ctx.reference
    barriers = sync_barriers(ctx.req)  # None: every point may hold a barrier
    free = [p < 0 for p in g.pinned.tolist()]
    apart: list[tuple[int, int]] = []
    shifts: list[tuple[int, int, list[int]]] = []
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
            if barriers is None or hits(barriers, int(ctx.after[a]), int(ctx.before[b])):
                continue  # a barrier protects the reuse at any offset
            size_a, size_b = int(g.size[a]), int(g.size[b])
            if size_a == 0 or size_b == 0:
                continue
            if not (owners.patterned[a] and owners.patterned[b]):
                apart.append((a, b))  # a byte of one may be touched by any thread
                continue
            step = math.gcd(_grid(g, a), _grid(g, b)) or 1
            lo = -((size_b - 1) // step) * step
            count = (size_a - 1 - lo) // step + 1
            checks += size_a * size_b
            if count > MAX_SHIFTS or checks > MAX_BYTE_CHECKS:
                return None
            allowed = _shared_shifts(owners, a, b, range(lo, size_a, step))
            if allowed:
                shifts.append((a, b, allowed))
            else:
                apart.append((a, b))
    return AliasRules(apart=apart, shifts=shifts)


def _shared_shifts(owners: Owners, earlier: int, later: int, shifts: range) -> list[int]:
    """The shifts (``later``'s offset minus ``earlier``'s, bytes) at which the two overlap
    and every shared byte is untouched by one of them or owned by one thread in both
    (``Owners.compatible``, for every shift at once: byte ``i`` of ``earlier`` meets byte
    ``j`` of ``later`` at shift ``i - j``)."""
    first = owners.owners(earlier, None).owners
    second = owners.owners(later, owners.cut(later)).owners
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
