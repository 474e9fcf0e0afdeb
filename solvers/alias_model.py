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
like ``cpsat``: one worker, a fixed seed and a deterministic-time limit from ``time_limit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from planner.core.clock import wall_limit
from planner.solvers.cpsat import DETERMINISTIC_PER_SECOND_SMALL, SEED
from planner.solvers.exact import ExactResult

__all__ = ["AliasRules", "Guard", "solve_aliased"]

I64 = npt.NDArray[np.int64]


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
) -> ExactResult:
    """Smallest arena (bytes) under ``rules``, at most ``upper`` (the arena of a known plan;
    bytes) and at least ``lower_bound`` (a valid bound); ``hint`` is a plan to start from."""
    n = int(size.size)
    sizes = [int(s) for s in size]
    aligns = [int(a) for a in alignment]
    pins = [int(p) for p in pinned]
    floor = max(lower_bound, max(sizes, default=0))
    if n == 0 or floor > upper:
        return ExactResult("alias-model", None, None, floor, False, False)
    model = cp_model.CpModel()
    height = model.new_int_var(floor, upper, "H")  # bytes
    x: list[cp_model.LinearExpr] = []  # bytes
    units: dict[int, cp_model.IntVar] = {}
    for i in range(n):
        if pins[i] >= 0:
            x.append(model.new_constant(pins[i]))
            model.add(height >= pins[i] + sizes[i])
            continue
        k = model.new_int_var(0, max(0, (upper - sizes[i]) // aligns[i]), f"k{i}")
        units[i] = k
        x.append(aligns[i] * k)
        model.add(height >= aligns[i] * k + sizes[i])
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
    _add_guards(model, x, sizes, rules)
    model.minimize(height)
    if hint is not None and hint.shape == (n,):
        for i, k in units.items():
            offset = int(hint[i])
            if offset % aligns[i] == 0 and 0 <= offset <= upper - sizes[i]:
                model.add_hint(k, offset // aligns[i])
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = 1
    params.random_seed = SEED
    params.max_deterministic_time = DETERMINISTIC_PER_SECOND_SMALL * time_limit
    params.max_time_in_seconds = wall_limit(time_limit)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        # Infeasible below ``upper`` proves nothing about a capacity: ``upper`` is a plan's.
        return ExactResult("alias-model", None, None, floor, False, False)
    offsets = np.asarray(
        [aligns[i] * int(solver.value(units[i])) if i in units else pins[i] for i in range(n)],
        dtype=np.int64,
    )
    arena = int((offsets + size).max())
    optimal = status == cp_model.OPTIMAL
    bound = arena if optimal else max(floor, int(solver.best_objective_bound))
    return ExactResult("alias-model", offsets, arena, bound, optimal, False)


def _add_guards(
    model: cp_model.CpModel, x: list[cp_model.LinearExpr], sizes: list[int], rules: AliasRules
) -> None:
    """The pairs whose sharing depends on the new barriers chosen, and the cap on them."""
    if not rules.guarded:
        return
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
