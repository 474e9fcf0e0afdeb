"""Sync "insert", exactly: offsets and new barriers chosen together by one CP-SAT model.

Buffers live together never share bytes (``NoOverlap2D`` over their lifetimes). A sequential
pair ``a`` before ``b`` may share bytes only if an existing barrier, or a chosen new one
(an optional boolean per candidate point), stands in ``[after_a, before_b]``, or, for pairs
the caller marks as thread-local aliases, when ``b`` sits exactly at ``a``'s offset. The
objective is lexicographic, smallest arena then fewest new barriers, as one weighted sum;
``max_new`` caps the barriers. For small requests only: the model has a disjunction per
sequential pair.

Determinism: one worker, a fixed seed and a deterministic-time limit derived from
``time_limit`` (``DETERMINISTIC_PER_SECOND``); the wall clock is only a cap, the request's
deadline while a request is planned (``planner.core.clock``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from planner.core.clock import wall_limit
from planner.solvers.cpsat_run import deterministic_solver, run

__all__ = ["BarrierProblem", "BarrierSolution", "solve_barriers"]

I64 = npt.NDArray[np.int64]
# Deterministic time units per second of the limit. Measured on random 32-buffer requests:
# the model reaches 0.025 units in at most 0.8 wall seconds, so with a 2.5 s limit the
# deterministic limit stops it first, with a margin of 3 for load.
DETERMINISTIC_PER_SECOND = 0.01


@dataclass(frozen=True)
class BarrierProblem:
    """Buffers as arrays (request order); points are program points."""

    start: I64
    end: I64  # lifetime, half-open
    after: I64  # last access + 1: a barrier at or after it follows every access
    before: I64  # first access: a barrier at or before it precedes every access
    size: I64  # bytes
    alignment: I64  # bytes
    pinned: I64  # bytes, -1 where free
    existing: list[int]  # sorted
    allowed: list[int] | None  # sorted points a new barrier may take; None: any point
    aliases: frozenset[tuple[int, int]]  # (a, b) that may share at equal offsets, no barrier


@dataclass(frozen=True)
class BarrierSolution:
    """A plan of the model: offsets and the new barriers it chose."""

    offsets: I64  # bytes, request order
    arena_bytes: int
    inserted: list[int]  # sorted
    optimal: bool  # proved: no plan within the cap has a smaller arena, or as small with fewer


def _window_points(p: BarrierProblem, pairs: list[tuple[int, int]]) -> dict[int, list[int]]:
    """Candidate point -> indices of the pairs it separates; one point per distinct set."""
    if p.allowed is None:
        points = sorted({int(x) for x in p.before[[b for _, b in pairs]]}) if pairs else []
    else:
        points = [x for x in p.allowed if x not in set(p.existing)]
    by_set: dict[tuple[int, ...], int] = {}
    for x in points:
        hit = tuple(k for k, (a, b) in enumerate(pairs) if int(p.after[a]) <= x <= int(p.before[b]))
        if hit and hit not in by_set:
            by_set[hit] = x
    return {x: list(hit) for hit, x in by_set.items()}


def solve_barriers(
    p: BarrierProblem,
    *,
    capacity: int | None,
    lower_bound: int,
    upper: int,
    max_new: int | None,
    time_limit: float,
    hint: tuple[I64, list[int]] | None = None,
) -> BarrierSolution | None:
    """Smallest arena, then fewest new barriers (at most ``max_new``); None if none found.

    ``upper`` (bytes) caps the address space: the arena of a known plan, or more.
    """
    n = int(p.size.size)
    h_max = upper if capacity is None else min(upper, capacity)
    if n == 0 or lower_bound > h_max or int(p.size.max()) > h_max:
        return None
    model = cp_model.CpModel()
    height = model.new_int_var(max(lower_bound, int(p.size.max())), h_max, "H")  # bytes
    x, units = _offsets(model, p, h_max, height)
    use = _reuses(model, p, x)
    count = sum(use.values()) if use else 0
    if max_new is not None and use:
        model.add(count <= max_new)
    model.minimize(height * (len(use) + 1) + count)
    if hint is not None:
        _add_hint(model, p, h_max, units, use, hint)
    solver = deterministic_solver(DETERMINISTIC_PER_SECOND * time_limit, wall_limit(time_limit))
    status = run(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    offsets = np.asarray(
        [
            int(p.pinned[i]) if i not in units else int(p.alignment[i]) * solver.value(units[i])
            for i in range(n)
        ],
        dtype=np.int64,
    )
    inserted = sorted(pt for pt, var in use.items() if solver.value(var))
    arena = int((offsets + p.size).max())
    return BarrierSolution(offsets, arena, inserted, status == cp_model.OPTIMAL)


def _offsets(
    model: cp_model.CpModel, p: BarrierProblem, h_max: int, height: cp_model.IntVar
) -> tuple[list[cp_model.LinearExprT], dict[int, cp_model.IntVar]]:
    """Each buffer's offset (its pin, or a multiple of its alignment up to ``h_max``) under
    ``height``, and no two buffers overlapping in bytes while both are live: the offsets, and
    the unit variables of the free ones."""
    x: list[cp_model.LinearExprT] = []
    units: dict[int, cp_model.IntVar] = {}
    xs: list[cp_model.IntervalVar] = []
    ts: list[cp_model.IntervalVar] = []
    for i in range(int(p.size.size)):
        s, a = int(p.size[i]), int(p.alignment[i])
        if p.pinned[i] >= 0:
            xi: cp_model.LinearExprT = int(p.pinned[i])
        else:
            unit = model.new_int_var(0, (h_max - s) // a, f"k{i}")  # units of alignment
            units[i] = unit
            xi = a * unit
        x.append(xi)
        model.add(height >= xi + s)
        xs.append(model.new_fixed_size_interval_var(xi, s, f"x{i}"))
        t0, t1 = int(p.start[i]), int(p.end[i])
        ts.append(model.new_fixed_size_interval_var(t0, t1 - t0, f"t{i}"))
    model.add_no_overlap_2d(xs, ts)
    return x, units


def _reuses(
    model: cp_model.CpModel, p: BarrierProblem, x: list[cp_model.LinearExprT]
) -> dict[int, cp_model.IntVar]:
    """Each pair where the later buffer could take the earlier one's bytes without an
    existing barrier between them: apart in bytes, or a new barrier at a point that separates
    them, or (an allowed alias) at the same offset. The new-barrier variables by point."""
    pairs = [
        (a, b)
        for a in range(int(p.size.size))
        for b in range(int(p.size.size))
        if p.end[a] <= p.start[b] and not _covered(p.existing, int(p.after[a]), int(p.before[b]))
    ]
    points = _window_points(p, pairs)
    use = {pt: model.new_bool_var(f"y{pt}") for pt in points}
    covers: list[list[cp_model.IntVar]] = [[] for _ in pairs]
    for pt, hit in points.items():
        for j in hit:
            covers[j].append(use[pt])
    for j, (a, b) in enumerate(pairs):
        below = model.new_bool_var(f"below{a}_{b}")
        above = model.new_bool_var(f"above{a}_{b}")
        model.add(x[a] + int(p.size[a]) <= x[b]).only_enforce_if(below)
        model.add(x[b] + int(p.size[b]) <= x[a]).only_enforce_if(above)
        options = [below, above, *covers[j]]
        if (a, b) in p.aliases:
            same = model.new_bool_var(f"same{a}_{b}")
            model.add(x[a] == x[b]).only_enforce_if(same)
            options.append(same)
        model.add_bool_or(options)
    return use


def _add_hint(
    model: cp_model.CpModel,
    p: BarrierProblem,
    h_max: int,
    units: dict[int, cp_model.IntVar],
    use: dict[int, cp_model.IntVar],
    hint: tuple[I64, list[int]],
) -> None:
    """A known plan (offsets, new barrier points) as the solver's first guess."""
    offsets, inserted = hint
    for i, unit in units.items():
        off = int(offsets[i])
        if off % int(p.alignment[i]) == 0 and off + int(p.size[i]) <= h_max:
            model.add_hint(unit, off // int(p.alignment[i]))
    chosen = set(inserted)
    for pt, var in use.items():
        model.add_hint(var, pt in chosen)


def _covered(points: list[int], after: int, before: int) -> bool:
    k = bisect.bisect_left(points, after)
    return k < len(points) and points[k] <= before
