"""Exact method for small requests whose buffers may alias: CP-SAT on pairwise rules.

The interference graph keeps apart every pair that may not share *some* byte, so on a
request where thread-local aliasing (DESIGN, rule (b)) lets a pair share at some relative
offsets and not at others, a graph's optimum proves nothing. This model states each pair's
rule as it is, for a fixed set of barriers:

- ``apart``: the pair never shares a byte (their lifetimes meet, or no barrier and no
  aliasing makes the reuse safe at any offset);
- ``shifts``: the later buffer may overlap the earlier one only where its offset minus the
  earlier one's is in the given set (the shifts at which every shared byte has one owner);
- pairs not listed share freely (a barrier protects the reuse);
- ``guarded`` (under a cap of new barriers): the pair shares freely if one of the new points
  that protect its reuse is chosen, or at the shifts of an alias option whose enabling points
  include a chosen one (a new barrier after the later buffer's first access moves its cut-off
  earlier, so fewer of its accesses count and more shifts are allowed); at most ``max_new``
  of the ``points`` are chosen.

Its optimum is the request's optimum for those barriers, or within that cap. Deterministic
like ``cpsat``: one worker, a fixed seed and a deterministic-time limit from ``time_limit``
(``DETERMINISTIC_PER_SECOND``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from planner.core.clock import wall_limit
from planner.solvers.cpsat_run import deterministic_solver, run
from planner.solvers.solution import Solution

__all__ = ["AliasRules", "Guard", "solve_aliased"]

I64 = npt.NDArray[np.int64]
# Deterministic time units per second of the limit. Measured on random 12- and 24-buffer
# requests under a cap of new barriers: the model does 0.13-0.18 units per wall second on a
# busy shared 2-core machine, so 0.1 lets the deterministic limit stop it first.
DETERMINISTIC_PER_SECOND = 0.1


@dataclass(frozen=True)
class Guard:
    """A sequential pair whose sharing depends on which new barriers are chosen."""

    earlier: int
    later: int
    protect: Sequence[int]  # indices into ``AliasRules.points``: any one protects the reuse
    # (enabling point indices, allowed shifts in bytes): the shifts hold once one of those
    # points is chosen; no enabling points: they always hold
    aliases: Sequence[tuple[Sequence[int], Sequence[int]]]


@dataclass(frozen=True)
class AliasRules:
    """What may share, pair by pair (buffer indices; see the module docstring)."""

    apart: Sequence[tuple[int, int]]
    shifts: Sequence[tuple[int, int, Sequence[int]]]  # (earlier, later, allowed shifts, bytes)
    guarded: Sequence[Guard] = ()
    points: Sequence[int] = ()  # new barrier points the model may choose
    max_new: int | None = None  # at most this many of ``points`` (None: any number)
    barriers: Sequence[int] = ()  # the barriers every plan has (sorted), with ``guarded``


def solve_aliased(
    size: I64,
    alignment: I64,
    pinned: I64,
    rules: AliasRules,
    *,
    lower_bound: int,
    upper: int,
    hint: I64 | None,
    time_limit: float,
    lifetimes: tuple[I64, I64] | None = None,
    accesses: tuple[I64, I64] | None = None,
) -> Solution:
    """Smallest arena (bytes) under ``rules``, at most ``upper`` (the arena of a known plan;
    bytes) and at least ``lower_bound`` (a valid bound); ``hint`` is a plan to start from.
    ``lifetimes`` (start, end per buffer): the same rules stated once more as rectangles in
    (bytes x time) that may not overlap, and as the live bytes at each point, which the
    solver bounds far better than pairs alone."""
    n = int(size.size)
    sizes = [int(s) for s in size]
    aligns = [int(a) for a in alignment]
    pins = [int(p) for p in pinned]
    floor = max(lower_bound, max(sizes, default=0))
    if n == 0 or floor > upper:
        return Solution("alias-model", None, None, floor, False)
    model = cp_model.CpModel()
    height = model.new_int_var(floor, upper, "H")  # bytes
    x, units = _offsets(model, height, sizes, aligns, pins, upper)
    free = [p < 0 for p in pins]
    if lifetimes is not None:
        _add_rectangles(model, x, sizes, free, lifetimes, height)
    _add_pairs(model, x, sizes, rules)
    use = _add_guards(model, x, sizes, rules)
    if (
        accesses is not None
        and use
        and not rules.shifts
        and not any(g.aliases for g in rules.guarded)
    ):
        _add_releases(model, x, sizes, free, accesses, rules, use, height)
    model.minimize(height)
    if hint is not None and hint.shape == (n,):
        _add_hint(model, units, hint, aligns, sizes, upper)
    solver = deterministic_solver(DETERMINISTIC_PER_SECOND * time_limit, wall_limit(time_limit))
    status = run(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # Infeasible below ``upper`` proves nothing about a capacity: ``upper`` is a plan's.
        return Solution("alias-model", None, None, floor, False)
    offsets = np.asarray(
        [aligns[i] * int(solver.value(units[i])) if i in units else pins[i] for i in range(n)],
        dtype=np.int64,
    )
    arena = int((offsets + size).max())
    optimal = status == cp_model.OPTIMAL
    bound = arena if optimal else max(floor, int(solver.best_objective_bound))
    return Solution("alias-model", offsets, arena, bound, optimal)


def _offsets(
    model: cp_model.CpModel,
    height: cp_model.IntVar,
    sizes: list[int],
    aligns: list[int],
    pins: list[int],
    upper: int,
) -> tuple[list[cp_model.LinearExpr], dict[int, cp_model.IntVar]]:
    """Each buffer's offset in bytes (its pin, or a multiple of its alignment up to
    ``upper``) under ``height``: the offsets, and the unit variables of the free ones."""
    x: list[cp_model.LinearExpr] = []
    units: dict[int, cp_model.IntVar] = {}
    for i, (size, align, pin) in enumerate(zip(sizes, aligns, pins, strict=True)):
        if pin >= 0:
            x.append(model.new_constant(pin))
            model.add(height >= pin + size)
            continue
        k = model.new_int_var(0, max(0, (upper - size) // align), f"k{i}")
        units[i] = k
        x.append(align * k)
        model.add(height >= align * k + size)
    return x, units


def _add_pairs(
    model: cp_model.CpModel, x: list[cp_model.LinearExpr], sizes: list[int], rules: AliasRules
) -> None:
    """The pairs kept apart in bytes (``rules.apart``), and those that may instead overlap at
    one of their allowed shifts (``rules.shifts``)."""
    for a, b in rules.apart:
        below = model.new_bool_var(f"b{a}_{b}")
        model.add(x[a] + sizes[a] <= x[b]).only_enforce_if(below)
        model.add(x[b] + sizes[b] <= x[a]).only_enforce_if(~below)
    for a, b, allowed in rules.shifts:
        below = model.new_bool_var(f"b{a}_{b}")
        above = model.new_bool_var(f"a{a}_{b}")
        model.add(x[a] + sizes[a] <= x[b]).only_enforce_if(below)
        model.add(x[b] + sizes[b] <= x[a]).only_enforce_if(above)
        if allowed:
            alias = model.new_bool_var(f"s{a}_{b}")
            domain = cp_model.Domain.from_values(sorted({int(s) for s in allowed}))
            model.add_linear_expression_in_domain(x[b] - x[a], domain).only_enforce_if(alias)
            model.add_bool_or([below, above, alias])
        else:
            model.add_bool_or([below, above])


def _add_hint(
    model: cp_model.CpModel,
    units: dict[int, cp_model.IntVar],
    hint: I64,
    aligns: list[int],
    sizes: list[int],
    upper: int,
) -> None:
    """A known plan's offsets as the solver's first guess, where they fit the variables."""
    for i, k in units.items():
        offset = int(hint[i])
        if offset % aligns[i] == 0 and 0 <= offset <= upper - sizes[i]:
            model.add_hint(k, offset // aligns[i])


def _add_guards(
    model: cp_model.CpModel, x: list[cp_model.LinearExpr], sizes: list[int], rules: AliasRules
) -> list[cp_model.IntVar]:
    """The pairs whose sharing depends on the new barriers chosen, and the cap on them; the
    choice of each point (empty without guarded pairs)."""
    if not rules.guarded:
        return []
    use = [model.new_bool_var(f"y{p}") for p in rules.points]
    if rules.max_new is not None:
        model.add(sum(use) <= rules.max_new)
    for guard in rules.guarded:
        a, b = guard.earlier, guard.later
        below = model.new_bool_var(f"b{a}_{b}")
        above = model.new_bool_var(f"a{a}_{b}")
        model.add(x[a] + sizes[a] <= x[b]).only_enforce_if(below)
        model.add(x[b] + sizes[b] <= x[a]).only_enforce_if(above)
        options = [below, above, *(use[k] for k in guard.protect)]
        for j, (enablers, allowed) in enumerate(guard.aliases):
            alias = model.new_bool_var(f"s{a}_{b}_{j}")
            domain = cp_model.Domain.from_values(sorted({int(s) for s in allowed}))
            model.add_linear_expression_in_domain(x[b] - x[a], domain).only_enforce_if(alias)
            if enablers:
                model.add_bool_or([use[k] for k in enablers]).only_enforce_if(alias)
            options.append(alias)
        model.add_bool_or(options)
    return use


def _add_rectangles(
    model: cp_model.CpModel,
    x: list[cp_model.LinearExpr],
    sizes: list[int],
    free: list[bool],
    lifetimes: tuple[I64, I64],
    height: cp_model.IntVar,
) -> None:
    """Buffers live together never share bytes: implied by the pairs, stated for the
    solver's own reasoning on rectangles and on the live bytes at each point (pinned
    buffers left out: two of them are the caller's placement)."""
    start, end = lifetimes
    spans = [(int(s), int(e)) for s, e in zip(start.tolist(), end.tolist(), strict=True)]
    live = [i for i, (s, e) in enumerate(spans) if e > s and sizes[i] > 0 and free[i]]
    xs = [model.new_fixed_size_interval_var(x[i], sizes[i], f"x{i}") for i in live]
    ts = [
        model.new_fixed_size_interval_var(spans[i][0], spans[i][1] - spans[i][0], f"t{i}")
        for i in live
    ]
    model.add_no_overlap_2d(xs, ts)
    model.add_cumulative(ts, [sizes[i] for i in live], height)


def _add_releases(
    model: cp_model.CpModel,
    x: list[cp_model.LinearExpr],
    sizes: list[int],
    free: list[bool],
    accesses: tuple[I64, I64],
    rules: AliasRules,
    use: list[cp_model.IntVar],
    height: cp_model.IntVar,
) -> None:
    """Without aliasing, a buffer's bytes are busy from its first access until the first
    barrier at or after its last access + 1 (``release``): two buffers whose busy spans meet
    never share a byte (the later one's first access comes before any barrier after the
    earlier one's last). The release is a variable, tied to the barriers chosen: at most
    each chosen or existing point at or after that access, and past every point before
    which none is chosen. Implied by the pairs; it gives the solver rectangles to reason on.
    """
    first, after = accesses
    points = [int(p) for p in rules.points]
    fixed = sorted(int(p) for p in rules.barriers)
    horizon = max([*points, *fixed, *(int(a) for a in after.tolist())]) + 1
    xs: list[cp_model.IntervalVar] = []
    ts: list[cp_model.IntervalVar] = []
    demands: list[int] = []
    for i, size in enumerate(sizes):
        if size == 0 or not free[i]:
            continue
        lo, hi = int(first[i]), int(after[i])
        k = bisect.bisect_left(fixed, hi)
        top = fixed[k] if k < len(fixed) else horizon  # the first fixed barrier after it
        release = model.new_int_var(max(hi, lo + 1), max(top, lo + 1), f"r{i}")
        earlier: list[cp_model.IntVar] = []  # chosen points in [hi, p] so far
        for p, chosen in sorted(zip(points, use, strict=True), key=lambda q: q[0]):
            if p < hi or p >= top:
                continue
            model.add(release <= p).only_enforce_if(chosen)
            earlier.append(chosen)
            # No chosen point in [hi, p]: the release lies past p.
            model.add(release >= p + 1).only_enforce_if([~c for c in earlier])
        model.add(release >= top).only_enforce_if([~c for c in earlier])
        xs.append(model.new_fixed_size_interval_var(x[i], size, f"bx{i}"))
        ts.append(model.new_interval_var(lo, release - lo, release, f"bt{i}"))
        demands.append(size)
    model.add_no_overlap_2d(xs, ts)
    model.add_cumulative(ts, demands, height)
