"""Placement on an explicit conflict graph: the buffers of a program with loops, branches or
several live ranges, whose conflicts are no interval graph.

- ``fits``: the portfolio's gap-filling heuristics (``"<ordering>/best-fit"`` and
  ``"/first-fit"``), run by the same compiled kernel (``solvers._place.place``) on adjacency
  lists given as they are: every neighbour listed as a "backward" one, none as a forward range.
  Skyline heuristics build the arena over time slots and do not apply.
- ``exact_pairs``: CP-SAT with one disjunction per conflicting pair (``x_i + s_i <= x_j`` or
  ``x_j + s_j <= x_i``), the arena minimized, for up to ``EXACT_MAX_BUFFERS`` buffers. One
  worker, a fixed seed and a deterministic-time limit, as ``solvers.cpsat``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.arrays import distinct
from planner.core.clock import wall_limit
from planner.solvers._place import place
from planner.solvers.greedy import FITS
from planner.solvers.solution import Solution

__all__ = ["EDGE_HEURISTICS", "EXACT_MAX_BUFFERS", "ExplicitGraph", "exact_pairs", "fits"]

I64 = npt.NDArray[np.int64]
EXACT_MAX_BUFFERS = 64
DETERMINISTIC_PER_SECOND = 0.04  # as solvers.cpsat for small models
ORDERINGS = ("size", "length", "area", "start", "degree", "input")
EDGE_HEURISTICS = [f"{o}/{f}" for o in ORDERINGS for f in FITS]


class ExplicitGraph:
    """Buffers (request order) and their conflicting pairs."""

    def __init__(
        self,
        size: I64,
        alignment: I64,
        pinned: I64,
        start: I64,
        length: I64,
        edges: Iterable[tuple[int, int]],
    ) -> None:
        self.size = size  # bytes
        self.alignment = alignment  # bytes
        self.pinned = pinned  # bytes, -1 where free
        self.start = start  # first virtual point (orderings only)
        self.length = length  # virtual points live (orderings only)
        n = int(size.size)
        self.n = n
        listed = edges if isinstance(edges, (set, list)) else list(edges)
        given = np.fromiter(
            itertools.chain.from_iterable(listed), dtype=np.int64, count=2 * len(listed)
        ).reshape(-1, 2)
        lo, hi = np.minimum(given[:, 0], given[:, 1]), np.maximum(given[:, 0], given[:, 1])
        codes = distinct(lo * max(n, 1) + hi)
        pairs = np.stack([codes // max(n, 1), codes % max(n, 1)], axis=1)
        self.pairs = pairs  # conflicting (i, j), i < j, sorted
        src = np.concatenate([pairs[:, 0], pairs[:, 1]])
        dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
        order = np.lexsort((dst, src))  # adjacency lists sorted by buffer, then neighbour
        self.degree = np.bincount(src, minlength=n).astype(np.int64)
        self.back_ptr = np.zeros(n + 1, dtype=np.int64)
        self.back_ptr[1:] = np.cumsum(self.degree)
        self.back = dst[order].astype(np.int64)

    @property
    def edges(self) -> list[tuple[int, int]]:
        """The conflicting pairs (i, j), i < j, sorted."""
        return [(int(a), int(b)) for a, b in self.pairs.tolist()]

    def order(self, name: str) -> I64:
        """Buffer indices in the named ordering (ties by index)."""
        idx = np.arange(self.n, dtype=np.int64)
        area = self.size.astype(np.float64) * self.length.astype(np.float64)
        keys: dict[str, tuple[npt.NDArray[np.int64] | npt.NDArray[np.float64], ...]] = {
            "size": (-self.size, -self.length, self.start),
            "length": (-self.length, -self.size, self.start),
            "area": (-area, -self.size, self.start),
            "start": (self.start, -self.size),
            "degree": (-self.degree, -self.size, self.start),
            "input": (idx,),
        }
        return np.lexsort(tuple(reversed((*keys[name], idx)))).astype(np.int64)

    def arena(self, offsets: I64) -> int:
        return int((offsets + self.size).max()) if self.n else 0


def _run(g: ExplicitGraph, heuristic: str) -> I64:
    ordering, fit = heuristic.split("/")
    order = g.order(ordering)
    pinned = g.pinned[order] >= 0
    order = np.concatenate([order[pinned], order[~pinned]])
    ident = np.arange(g.n, dtype=np.int64)
    offsets: I64 = place(
        order,
        g.size,
        g.alignment,
        g.pinned,
        ident,
        ident,
        ident + 1,  # no forward range: every neighbour is in the back lists
        g.back_ptr,
        g.back,
        FITS[fit],
        0,
    )
    return offsets


def fits(g: ExplicitGraph, heuristics: list[str] | None, bound: int) -> Solution:
    """The smallest arena of the heuristics (default: all of ``EDGE_HEURISTICS``), ties to
    the earliest; stops once one meets ``bound`` (a lower bound, the solution's)."""
    names = EDGE_HEURISTICS if heuristics is None else heuristics
    best: tuple[int, str, I64] | None = None
    tried: list[tuple[str, int]] = []
    for name in names:
        offsets = _run(g, name)
        arena = g.arena(offsets)
        tried.append((f"greedy:{name}", arena))
        if best is None or arena < best[0]:
            best = (arena, name, offsets)
        if arena <= bound:
            break
    assert best is not None
    return Solution(f"greedy:{best[1]}", best[2], best[0], bound, best[0] <= bound, tried=tried)


def exact_pairs(
    g: ExplicitGraph,
    *,
    lower_bound: int,
    hint: I64,
    time_limit: float,
) -> tuple[I64, int, bool] | None:
    """CP-SAT on the pairs: (offsets, arena, proved optimal), or None when ortools is not
    installed or no plan was found in time."""
    try:
        from ortools.sat.python import cp_model

        from planner.solvers.cpsat_run import deterministic_solver, run
    except ImportError:
        return None
    upper = g.arena(hint)
    model = cp_model.CpModel()
    xs: list[Any] = []  # CP-SAT expressions: offsets in bytes
    for i in range(g.n):
        a, s = int(g.alignment[i]), int(g.size[i])
        if g.pinned[i] >= 0:
            xs.append(model.new_constant(int(g.pinned[i])))
            continue
        k = model.new_int_var(0, max(0, (upper - s) // a), f"k{i}")
        model.add_hint(k, int(hint[i]) // a)
        xs.append(k * a)
    height = model.new_int_var(lower_bound, upper, "arena")
    for i in range(g.n):
        model.add(height >= xs[i] + int(g.size[i]))
    for a, b in g.edges:
        below = model.new_bool_var(f"b{a}_{b}")
        model.add(xs[a] + int(g.size[a]) <= xs[b]).only_enforce_if(below)
        model.add(xs[b] + int(g.size[b]) <= xs[a]).only_enforce_if(~below)
    model.minimize(height)
    work = max(0.01, DETERMINISTIC_PER_SECOND * time_limit)
    solver = deterministic_solver(work, max(0.01, wall_limit(time_limit)))
    status = run(solver, model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    offsets = np.asarray([int(solver.value(x)) for x in xs], dtype=np.int64)
    return offsets, g.arena(offsets), status == cp_model.OPTIMAL
