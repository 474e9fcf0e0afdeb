"""Exact method ``"cpsat"``: Dynamic Storage Allocation as an OR-Tools CP-SAT model.

Each buffer is a rectangle: a fixed time interval ``[start, occupied_end)`` by a variable
address interval ``[x, x + size)`` with ``x = alignment * k``. One ``NoOverlap2D`` keeps
rectangles apart (buffers whose time intervals are disjoint never touch in it); the
objective is the arena height ``H >= x + size``, at least the lower bound. The caller splits
the graph into connected components; this module builds one model for whatever it is given.

Determinism: one worker, a fixed seed, and a deterministic-time limit derived from
``time_limit`` (``DETERMINISTIC_PER_SECOND``), so the same input gives the same plan on any
machine. The wall clock is only a cap: ``time_limit`` alone, the request's deadline while a
request is planned (``planner.core.clock``), so only a machine far slower than the one calibrated
on can stop the search first, and only then can the result depend on timing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from ortools.sat.python import cp_model

from planner.core.clock import wall_limit
from planner.core.graph import InterferenceGraph
from planner.solvers.cpsat_run import deterministic_solver, run
from planner.solvers.exact import Progress, Stop
from planner.solvers.solution import Solution, unfit

__all__ = ["DETERMINISTIC_PER_SECOND", "solve_cpsat"]

I64 = npt.NDArray[np.int64]

DETERMINISTIC_PER_SECOND = 0.02  # deterministic time units a second of limit buys (one worker)
SMALL_MODEL = 128  # buffers up to which a model is small: a higher rate, dynamic precedences
DETERMINISTIC_PER_SECOND_SMALL = 0.04  # the rate for small models, which do more units a second


class _Progress(cp_model.CpSolverSolutionCallback):
    """Reports each improving solution's arena and the bound known then."""

    def __init__(self, height: cp_model.IntVar, lower_bound: int, report: Progress) -> None:
        super().__init__()
        self._height = height
        self._lower_bound = lower_bound
        self._report = report

    def on_solution_callback(self) -> None:
        bound = max(self._lower_bound, int(self.best_objective_bound))
        self._report(int(self.value(self._height)), bound)


def _symmetric_groups(g: InterferenceGraph) -> list[list[int]]:
    """Free buffers with identical (start, occupied_end, size, alignment), 2+ per group.

    Identical non-empty intervals always conflict, so any plan stays a plan when their
    offsets are permuted: ordering them by index loses no optimum.
    """
    groups: dict[tuple[int, int, int, int], list[int]] = {}
    for i in range(g.n):
        if g.pinned[i] >= 0:
            continue
        key = (int(g.start[i]), int(g.occupied_end[i]), int(g.size[i]), int(g.alignment[i]))
        groups.setdefault(key, []).append(i)
    return [members for members in groups.values() if len(members) > 1]


def _ordered_hint(hint: I64, groups: list[list[int]]) -> I64:
    """The hint with each symmetric group's offsets sorted into index order."""
    ordered = hint.astype(np.int64, copy=True)
    for members in groups:
        ordered[members] = np.sort(hint[members])
    return ordered


def solve_cpsat(
    g: InterferenceGraph,
    *,
    capacity: int | None,
    lower_bound: int,
    hint: I64 | None,
    time_limit: float,
    upper: int | None = None,
    on_progress: Progress | None = None,
    stop: Stop | None = None,
    tolerance: int = 0,
) -> Solution:
    """Smallest arena for ``g`` within ``capacity`` (bytes), searched for ``time_limit`` s.

    ``lower_bound`` must be valid (no plan uses fewer bytes); ``hint`` is a plan (bytes,
    request order) to start from; ``upper`` (bytes, the arena of a known plan, or the lower
    bound itself to ask only for a plan there) caps the address space below the capacity;
    a proof that no plan fits within it raises the bound returned past it. ``on_progress``
    sees each improving arena and the bound: for benchmarks; it does not change the result.
    ``stop`` may end the search early from another thread (then the result means nothing).
    ``tolerance``: bytes; the search stops once its plan is within them of its bound.
    """
    if g.n == 0:
        return Solution("cpsat", np.zeros(0, dtype=np.int64), 0, 0, True)
    h_max = _space(g, capacity, upper)
    if lower_bound > h_max or int(g.size.max()) > h_max:
        return Solution(
            "cpsat", None, None, max(lower_bound, 0), False, unfit(g, h_max == capacity)
        )
    least = max(lower_bound, int(g.size.max()))  # bytes: no plan is lower
    m = _model(g, least, h_max)
    if hint is not None and hint.shape == (g.n,):
        _add_hint(m, g, hint, least, h_max)
    solver = _solver(g.n, time_limit, tolerance, upper is not None and h_max <= least)
    progress = _Progress(m.height, lower_bound, on_progress) if on_progress else None
    if stop is not None and not stop.attach(solver.stop_search):
        return Solution("cpsat", None, None, lower_bound, False)
    status = run(solver, m.model, progress)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _found(g, m, solver, status == cp_model.OPTIMAL, lower_bound, tolerance)
    if status == cp_model.INFEASIBLE:
        # No plan within the space: every plan is higher, a proof. Only a capacity makes
        # the space a hard limit; ``upper`` was a cap of convenience.
        return Solution("cpsat", None, None, h_max + 1, False, unfit(g, h_max == capacity))
    return Solution("cpsat", None, None, lower_bound, False)


def _space(g: InterferenceGraph, capacity: int | None, upper: int | None) -> int:
    """The highest address (bytes) the model's buffers may reach: ``upper`` (at least the
    pins' top) within ``capacity``, else the capacity, else every free buffer stacked above
    every pin."""
    size = [int(s) for s in g.size]
    align = [int(a) for a in g.alignment]
    pinned = [int(p) for p in g.pinned]
    pin_top = max((p + s for p, s in zip(pinned, size, strict=True) if p >= 0), default=0)
    if upper is not None:
        # A plan of ``upper`` bytes is known: no need to look higher, and a small space
        # is what lets CP-SAT prove small models fast.
        h_max = max(upper, pin_top)  # pins are the caller's: the space holds them anyway
        if capacity is not None:
            h_max = min(h_max, capacity)
        return h_max
    if capacity is not None:
        return capacity
    # Every free buffer stacked above every pin, each padded to its alignment: a plan.
    h_max = pin_top + sum(s for p, s in zip(pinned, size, strict=True) if p < 0)
    return h_max + sum(a for p, a in zip(pinned, align, strict=True) if p < 0)


@dataclass(frozen=True)
class _Model:
    """The CP-SAT model of a graph and the variables its plan is read from."""

    model: cp_model.CpModel
    height: cp_model.IntVar  # bytes: the arena
    free: dict[int, cp_model.IntVar]  # buffer -> offset in units of its alignment
    groups: list[list[int]]  # symmetric free buffers, ordered by index in the model


def _model(g: InterferenceGraph, least: int, h_max: int) -> _Model:
    """Rectangles (time by address) kept apart by one ``NoOverlap2D``, the height between
    ``least`` and ``h_max`` bytes minimized, symmetric buffers in index order."""
    size = [int(s) for s in g.size]
    align = [int(a) for a in g.alignment]
    pinned = [int(p) for p in g.pinned]
    model = cp_model.CpModel()
    free: dict[int, cp_model.IntVar] = {}
    x_intervals: list[cp_model.IntervalVar] = []
    y_intervals: list[cp_model.IntervalVar] = []
    height = model.new_int_var(least, h_max, "H")  # bytes
    for i in range(g.n):
        t0, t1 = int(g.start[i]), int(g.occupied_end[i])  # program points, half-open
        y_intervals.append(model.new_fixed_size_interval_var(t0, t1 - t0, f"t{i}"))
        if pinned[i] >= 0:
            x_intervals.append(model.new_fixed_size_interval_var(pinned[i], size[i], f"x{i}"))
            model.add(height >= pinned[i] + size[i])
            continue
        k = model.new_int_var(0, (h_max - size[i]) // align[i], f"k{i}")  # units of alignment
        x = align[i] * k  # bytes
        x_intervals.append(model.new_fixed_size_interval_var(x, size[i], f"x{i}"))
        model.add(height >= x + size[i])
        free[i] = k
    model.add_no_overlap_2d(x_intervals, y_intervals)

    groups = _symmetric_groups(g)
    for members in groups:
        for a, b in itertools.pairwise(members):
            # Same interval, so they conflict: the lower one ends before the next begins.
            model.add(align[a] * free[a] + size[a] <= align[b] * free[b])
    model.minimize(height)
    return _Model(model, height, free, groups)


def _add_hint(m: _Model, g: InterferenceGraph, hint: I64, least: int, h_max: int) -> None:
    """Start the search from ``hint`` (bytes, request order), symmetric groups in index
    order; offsets and an arena outside the model's space are left out."""
    ordered = _ordered_hint(hint, m.groups)
    for i, k in m.free.items():
        offset = int(ordered[i])  # bytes
        align, size = int(g.alignment[i]), int(g.size[i])
        if offset % align == 0 and 0 <= offset <= h_max - size:
            m.model.add_hint(k, offset // align)
    arena = int((ordered + g.size).max())
    if least <= arena <= h_max:
        m.model.add_hint(m.height, arena)


def _solver(n: int, time_limit: float, tolerance: int, feasibility: bool) -> cp_model.CpSolver:
    """A deterministic solver for a model of ``n`` buffers (see the module docstring);
    ``feasibility``: the height can only be the bound."""
    rate = DETERMINISTIC_PER_SECOND_SMALL if n <= SMALL_MODEL else DETERMINISTIC_PER_SECOND
    solver = deterministic_solver(rate * time_limit, wall_limit(time_limit))
    params = solver.parameters
    if tolerance > 0:
        params.absolute_gap_limit = tolerance  # CP-SAT then calls the plan optimal: see below
    if feasibility:
        # A feasibility model, whose sections' no-overlap constraints order their intervals
        # as the search goes.
        params.use_dynamic_precedence_in_disjunctive = n <= SMALL_MODEL
    return solver


def _found(
    g: InterferenceGraph,
    m: _Model,
    solver: cp_model.CpSolver,
    optimal_status: bool,
    lower_bound: int,
    tolerance: int,
) -> Solution:
    """The plan the solver found, and its bound."""
    offsets = np.asarray(
        [
            int(g.alignment[i]) * int(solver.value(m.free[i])) if i in m.free else int(g.pinned[i])
            for i in range(g.n)
        ],
        dtype=np.int64,
    )
    arena = int((offsets + g.size).max())
    bound = max(lower_bound, int(solver.best_objective_bound))
    # Within the tolerance CP-SAT reports optimal; only an arena at its bound is proved.
    optimal = optimal_status and (tolerance == 0 or arena <= bound)
    return Solution("cpsat", offsets, arena, arena if optimal else bound, optimal)
