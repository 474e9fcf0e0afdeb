"""A placement and what makes it safe: the one record every planning route hands on to its
assembly, and the one placement step every route places its buffers with (``place``)."""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from planner.core.arrays import distinct
from planner.core.barriers import BarrierChoice
from planner.core.budget import GREEDY_SHARE, PAIRS_EXACT_SHARE
from planner.core.columns import columns
from planner.core.graph import InterferenceGraph
from planner.core.sync_choice import SyncChoice
from planner.pipeline.ground import Ground
from planner.pipeline.schedule import Kind
from planner.solvers.auto import solve
from planner.solvers.edges import EXACT_MAX_BUFFERS, ExplicitGraph, exact_pairs
from planner.solvers.edges import fits as greedy_fits
from planner.solvers.exact import exact_budget
from planner.solvers.solution import Solution

__all__ = [
    "Placement",
    "component_count",
    "on_common_bytes",
    "pair_graph",
    "place",
]

I64 = npt.NDArray[np.int64]
Pairs = Set[tuple[int, int]]  # conflicting buffer pairs (i, j), i < j, of the ground's buffers


@dataclass(frozen=True)
class Placement:
    """Offsets and what is proved of them (``result``), the barriers (new, relied on, and
    reuses no allowed barrier protects) and the aliases that make them safe.

    On straight-line code the conflicts are the occupied intervals of the request's graph,
    ``kind`` says which attempt of the portfolio made it, and the barriers are the fewest
    that stab its reuses (exact on intervals). On a program with loops and branches the
    conflicts are explicit pairs (``edges``), ``kind`` is None, a reuse no allowed point
    protects is placed apart as a conflict (so ``barriers.missed`` stays empty), and the
    barrier choices that stayed unproved within their budget are listed (``unproved``).
    """

    result: Solution
    barriers: BarrierChoice
    aliases: tuple[tuple[int, int], ...] = ()  # (earlier, later) reusing with no barrier
    kind: Kind | None = None
    edges: I64 | None = None  # conflicting buffer pairs (i, j), i < j, it was placed on
    unproved: tuple[SyncChoice, ...] = ()  # barrier choices not proved the cheapest

    @property
    def offsets(self) -> I64:
        return self.result.plan_offsets

    @property
    def arena(self) -> int:
        return self.result.plan_arena

    @property
    def new_barriers(self) -> int:
        return len(self.barriers.inserted)


@overload
def place(
    ground: Ground,
    conflicts: InterferenceGraph,
    bound: None = None,
    *,
    seconds: float,
    stop_at: int | None = None,
) -> Solution: ...


@overload
def place(
    ground: Ground,
    conflicts: ExplicitGraph | Pairs,
    bound: int,
    *,
    fits: list[str] | None = None,
    exact: bool = True,
) -> Solution: ...


def place(
    ground: Ground,
    conflicts: InterferenceGraph | ExplicitGraph | Pairs,
    bound: int | None = None,
    *,
    seconds: float | None = None,
    stop_at: int | None = None,
    fits: list[str] | None = None,
    exact: bool = True,
) -> Solution:
    """The placement of the buffers kept apart by ``conflicts``, and what is proved of it.

    On the occupied intervals of an ``InterferenceGraph`` (straight-line code): the ground's
    solver (its greedy portfolio, restricted to the ground's fits, and its exact methods)
    within ``seconds``, the greedy part within ``GREEDY_SHARE`` of what the fixed work leaves
    of them (``optional_share``), stopping at a plan of ``stop_at`` bytes; its bound is the
    graph's own. On explicit pairs (an ``ExplicitGraph``, or pairs of the ground's buffers):
    ``fits`` (None: the ground's), then CP-SAT on the pairs where the ground's solver allows
    it and ``exact``; its bound is ``bound``, or the arena CP-SAT proves optimal. Capacity,
    gap tolerance and time limit are the ground's request's."""
    req = ground.req
    if isinstance(conflicts, InterferenceGraph):
        limit = req.options.time_limit if seconds is None else seconds
        return solve(
            conflicts,
            solver=ground.solver,
            heuristics=ground.heuristics,
            capacity=req.effective_capacity,
            time_limit=limit,
            stop_at=stop_at,
            greedy_seconds=GREEDY_SHARE * limit * ground.optional_share,
            gap_tolerance=req.options.gap_tolerance,
        )
    assert bound is not None  # explicit pairs have no bound of their own
    g = conflicts if isinstance(conflicts, ExplicitGraph) else pair_graph(ground, conflicts)
    heuristics = ground.heuristics if fits is None else fits
    return _on_pairs(ground, g, bound, heuristics, exact and ground.pair_model)


def _on_pairs(
    ground: Ground, g: ExplicitGraph, bound: int, heuristics: list[str] | None, exact: bool
) -> Solution:
    """The fits of ``g``, then CP-SAT on its pairs (``exact``) when the fits leave a gap to
    ``bound`` over the tolerance, within ``PAIRS_EXACT_SHARE`` of the time limit."""
    req = ground.req
    found = greedy_fits(g, heuristics, bound)
    offsets, arena, name, tried, optimal = (
        found.plan_offsets,
        found.plan_arena,
        found.name,
        list(found.tried),
        found.plan_arena <= bound,
    )
    seconds, slack = exact_budget(
        req.options.gap_tolerance,
        arena - bound,
        bound,
        req.max_alignment,
        PAIRS_EXACT_SHARE * req.options.time_limit,
    )
    tolerated = arena - bound <= slack
    if not optimal and not tolerated and exact and 0 < g.n <= EXACT_MAX_BUFFERS:
        solved = exact_pairs(g, lower_bound=bound, hint=offsets, time_limit=seconds)
        if solved is not None:
            x_offsets, x_arena, proved = solved
            tried.append(("exact:cpsat-pairs", min(arena, x_arena)))
            if x_arena < arena:
                offsets, arena, name = x_offsets, x_arena, "exact:cpsat-pairs"
            optimal = proved and x_arena <= arena
    return Solution(
        name=name,
        offsets=offsets,
        arena_bytes=arena,
        bound=arena if optimal else bound,
        proved_optimal=optimal or arena <= bound,
        tried=tried,
    )


def pair_graph(
    ground: Ground, edges: Pairs, spans: tuple[list[int], list[int]] | None = None
) -> ExplicitGraph:
    """The ground's buffers (its planned sizes, their alignment and pins) with the conflict
    pairs ``edges``; each from its start for its length, ``spans`` (default: its lifetime),
    which order the fits."""
    cols = columns(ground.req)
    start, length = (cols.start, cols.end - cols.start) if spans is None else spans
    return ExplicitGraph(
        size=np.asarray(ground.sizes, dtype=np.int64),
        alignment=cols.alignment.copy(),
        pinned=cols.pinned.copy(),
        start=np.array(start, dtype=np.int64),
        length=np.array(length, dtype=np.int64),
        edges=edges,
    )


def on_common_bytes(sizes: list[int], offsets: npt.NDArray[np.int64]) -> set[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, placed on common bytes."""
    lo = np.asarray(offsets, dtype=np.int64)
    hi = lo + np.asarray(sizes, dtype=np.int64)
    common = np.triu((lo[:, None] < hi[None, :]) & (lo[None, :] < hi[:, None]), k=1)
    rows, cols = np.nonzero(common)
    return set(zip(rows.tolist(), cols.tolist(), strict=True))


def component_count(n: int, edges: I64 | Iterable[tuple[int, int]]) -> int:
    """Connected components of the graph on ``n`` buffers with ``edges`` (an ``(m, 2)``
    array or pairs): labels spread as minima along the edges, with pointer jumping, until
    they settle."""
    pairs = np.asarray(edges if isinstance(edges, np.ndarray) else list(edges), dtype=np.int64)
    labels = np.arange(n, dtype=np.int64)
    if pairs.size:
        a, b = pairs[:, 0], pairs[:, 1]
        while True:
            spread = labels.copy()
            np.minimum.at(spread, a, labels[b])
            np.minimum.at(spread, b, labels[a])
            spread = spread[spread]
            if np.array_equal(spread, labels):
                break
            labels = spread
    return int(distinct(labels).size)
