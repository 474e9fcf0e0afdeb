"""Greedy portfolio: orderings crossed with placement rules, registered by name.

A heuristic is ``"<ordering>/<placement>"``:

- ``"size/best-fit"`` and the like: visit buffers in the order the ordering gives (pinned
  buffers always first, at their offsets) and put each into the lowest (first fit) or
  tightest (best fit) gap among the placed buffers it conflicts with;
- ``"length/skyline"``, ``"size/skyline"``, ``"area/skyline"``: build the arena bottom-up on
  its skyline (``solvers._skyline``), the named key choosing among the buffers that fit;
- ``"random/skyline"``: the best of ``SKYLINE_RUNS`` skyline runs with seeded random weights.

Skyline heuristics apply to requests with no pinned buffer and at most
``SKYLINE_MAX_BUFFERS`` buffers (their cost grows with buffers x time points). The portfolio
runs every applicable heuristic and keeps the smallest arena; ties go to the earlier name in
``HEURISTICS``, and every random choice is seeded, so the result is deterministic. Given a
time, the default portfolio keeps the heuristics whose estimated cost fits it
(``affordable``, from counts alone). On ``dense`` graphs (model-like) first fit runs on a
segment tree of byte-range unions (``solvers._tree``, the same offsets in memory that grows
with the buffers), and past ``TREE_MIN_EDGES`` conflicts all gap filling does and the
portfolio is ``TREE_PORTFOLIO``; past ``NEIGHBOUR_EDGES_MAX`` on other graphs only the
heuristics without neighbour lists run. Past ``SKYLINE_MAX_BUFFERS`` buffers the portfolio
starts with the first fits that win on model-like requests (``degree-size``: conflicts x
bytes, first fit only), so every order of OmniMalloc's greedy_by_all is tried when the time
allows.

Thread-local aliasing enters as a move on the graph the portfolio is given: the planner
(``planner.core.aliasing``) fuses each buffer that can sit exactly over a dead, owner-compatible one
into a single node, so every heuristic here, and every exact method, places the pair at one
offset with no barrier between them.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Generator
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from planner.core.budget import (
    DENSE_REST_SHARE,
    GAP_FILL_RATE,
    GREEDY_MIN_SECONDS,
    LIST_RATE,
    SKYLINE_RATE,
    SWEEP_RATE,
    TREE_FIRST_FIT_RATE,
)
from planner.core.clock import expired
from planner.core.errors import RequestError
from planner.core.graph import InterferenceGraph
from planner.solvers._place import place, place_sweep
from planner.solvers._skyline import RULES, best_of_random, skyline
from planner.solvers._tree import place_tree
from planner.solvers.solution import Solution

__all__ = [
    "FITS",
    "HEURISTICS",
    "LARGE_ORDERINGS",
    "ORDERINGS",
    "RANDOM_SKYLINE",
    "affordable",
    "applicable",
    "arena_of",
    "cost",
    "default_heuristics",
    "dense",
    "fit_in_order",
    "ordering_of",
    "portfolio",
    "run",
    "uses_tree",
]

I64 = npt.NDArray[np.int64]
T = TypeVar("T")
R = TypeVar("R")
Ordering = Callable[[InterferenceGraph], I64]


def _length(g: InterferenceGraph) -> I64:
    result: I64 = g.occupied_end - g.start
    return result


def _lexsort(*keys: npt.NDArray[np.int64] | npt.NDArray[np.float64]) -> I64:
    """Indices sorted by ``keys[0]``, then ``keys[1]``..., ties by index (stable)."""
    return np.lexsort(tuple(reversed(keys))).astype(np.int64)


def order_by_size(g: InterferenceGraph) -> I64:
    """Largest first; then longest occupied interval, then earliest start."""
    return _lexsort(-g.size, -_length(g), g.start)


def order_by_length(g: InterferenceGraph) -> I64:
    """Longest occupied interval first; then largest."""
    return _lexsort(-_length(g), -g.size, g.start)


def order_by_area(g: InterferenceGraph) -> I64:
    """Largest bytes x points first (float: the product can pass 2**63)."""
    area = g.size.astype(np.float64) * _length(g).astype(np.float64)
    return _lexsort(-area, -g.size, g.start)


def order_by_start(g: InterferenceGraph) -> I64:
    """Earliest start first; then largest."""
    return _lexsort(g.start, -g.size)


def order_by_degree(g: InterferenceGraph) -> I64:
    """Most conflicts first; then largest."""
    return _lexsort(-g.degree, -g.size, g.start)


def order_by_degree_size(g: InterferenceGraph) -> I64:
    """Largest conflicts x bytes first (float: the product can pass 2**63); then largest."""
    weight = g.degree.astype(np.float64) * g.size.astype(np.float64)
    return _lexsort(-weight, -g.size, g.start)


def order_by_input(g: InterferenceGraph) -> I64:
    """The request's own order: with first fit, never above the naive end-to-end layout."""
    return np.arange(g.n, dtype=np.int64)


ORDERINGS: dict[str, Ordering] = {
    "size": order_by_size,
    "length": order_by_length,
    "area": order_by_area,
    "start": order_by_start,
    "degree": order_by_degree,
    "input": order_by_input,
}


def _product(a: I64, b: I64) -> I64:
    """``a * b`` element by element, saturated at the largest int64 (no wrap-around)."""
    big = np.iinfo(np.int64).max
    over = a.astype(np.float64) * b.astype(np.float64) >= float(big)
    result: I64 = np.where(over, big, a * np.where(over, 0, b))
    return result


def _stable(*keys: I64) -> I64:
    """Indices sorted by ``keys`` descending, ties in request order (a stable sort)."""
    return _lexsort(*(-k for k in keys))


def order_by_size_stable(g: InterferenceGraph) -> I64:
    """Largest first, ties in request order (OmniMalloc's greedy_by_size)."""
    return _stable(g.size)


def order_by_length_stable(g: InterferenceGraph) -> I64:
    """Longest occupied interval first, ties in request order (greedy_by_duration)."""
    return _stable(_length(g))


def order_by_area_stable(g: InterferenceGraph) -> I64:
    """Largest bytes x points first, ties in request order (greedy_by_area)."""
    return _stable(_product(g.size, _length(g)))


def order_by_degree_stable(g: InterferenceGraph) -> I64:
    """Most conflicts first, then largest, ties in request order (greedy_by_conflict)."""
    return _stable(g.degree, g.size)


def order_by_degree_size_stable(g: InterferenceGraph) -> I64:
    """Largest conflicts x bytes first, then largest, ties in request order
    (greedy_by_conflict_size)."""
    return _stable(_product(g.degree, g.size), g.size)


# Orderings the portfolio runs past SKYLINE_MAX_BUFFERS buffers only, with first fit (not
# names a request may give: plans of smaller requests stay as they were). The ``-stable``
# ones are OmniMalloc's greedy_by_* orders, whose ties keep the request's order; with
# ``input`` and ``start`` they make its ``omni`` ensemble, so on dense graphs the portfolio
# is never above it.
LARGE_ORDERINGS: dict[str, Ordering] = {
    "degree-size": order_by_degree_size,
    "size-stable": order_by_size_stable,
    "length-stable": order_by_length_stable,
    "area-stable": order_by_area_stable,
    "degree-stable": order_by_degree_stable,
    "degree-size-stable": order_by_degree_size_stable,
}
FITS: dict[str, bool] = {"best-fit": True, "first-fit": False}  # name -> best fit?
SKYLINE_MAX_BUFFERS = 2000
# Heuristics run by a sweep that needs no neighbour lists (``solvers._place.place_sweep``).
SWEPT = frozenset({"start/first-fit"})
PARALLEL_MIN_BUFFERS = 1000  # below this, threads cost more than they save
PARALLEL_MIN_SKYLINE = 100  # the same for random/skyline, which does SKYLINE_RUNS runs
LARGE_INPUT = 20_000  # buffers; above this the portfolio runs LARGE_PORTFOLIO only
# OmniMalloc's orders that ours break ties in differently: each runs only where its order
# differs from every one run before it (``_distinct``).
STABLE_FIRST_FITS = (
    "size-stable/first-fit",
    "degree-size-stable/first-fit",
    "length-stable/first-fit",
    "area-stable/first-fit",
    "degree-stable/first-fit",
)
# On dense graphs of up to LARGE_INPUT buffers these come first: first fit in every order of
# OmniMalloc's greedy_by_all, the ones that win most often on model-like requests first.
DENSE_FIRST = (
    "size/first-fit",
    "degree-size/first-fit",
    "input/first-fit",
    "start/first-fit",
    "area/first-fit",
    "length/first-fit",
    "degree/first-fit",
    *STABLE_FIRST_FITS,
)
LARGE_PORTFOLIO = (
    "size/best-fit",
    "start/first-fit",
    "area/best-fit",
    "length/best-fit",
    # Then the first fits that win on model-like requests: plans change only where they win.
    "degree-size/first-fit",
    "size/first-fit",
)
SKYLINE_RUNS = 256  # random/skyline: seeded runs, cycling rules and noise levels
SKYLINE_NOISE = (0.05, 0.1, 0.2, 0.4)  # relative spread of the random weights
SKYLINE_SEED = 20231
DENSE_DEGREE = 1024  # mean conflicts a buffer from which first fit runs on the tree
NEIGHBOUR_EDGES_MAX = 1 << 25  # conflicts: neighbour lists at 8 bytes each, 256 MiB
TREE_MIN_EDGES = NEIGHBOUR_EDGES_MAX  # past this, gap filling runs on the segment tree
# Past TREE_MIN_EDGES conflicts (model-like requests: long-lived weights and nested saved
# activations conflict with nearly everything) the portfolio starts with the sweep, as
# before the tree, then tries first fit in every order OmniMalloc's greedy_by_all uses (each
# one of ours gives the same offsets, ties apart), the ones that win there first, then
# best fit; ``affordable`` keeps what the time allows.
TREE_PORTFOLIO = (
    "start/first-fit",
    "size/first-fit",
    "degree-size/first-fit",
    "input/first-fit",
    "area/first-fit",
    "length/first-fit",
    "degree/first-fit",
    *STABLE_FIRST_FITS,
    "size/best-fit",
    "area/best-fit",
    "length/best-fit",
)
RANDOM_SKYLINE = "random/skyline"
HEURISTICS: list[str] = [
    *(f"{o}/{f}" for o in ORDERINGS for f in FITS),
    *(f"{rule}/skyline" for rule in RULES),
    RANDOM_SKYLINE,
]
# Past SKYLINE_MAX_BUFFERS buffers the default portfolio starts with size first fit and this
# one: on model-like requests (where conflicts are many and the time affords only a few
# heuristics) they are the best of OmniMalloc's greedy_by_all (greedy_by_size and
# greedy_by_conflict_size); the rest of HEURISTICS follows in its order.
MODEL_HEURISTIC = "degree-size/first-fit"


def arena_of(g: InterferenceGraph, offsets: I64) -> int:
    """Bytes from the arena base to the end of the highest buffer."""
    return int((offsets + g.size).max()) if g.n else 0


def applicable(g: InterferenceGraph, heuristic: str) -> bool:
    """Whether the heuristic can plan this graph (skyline: no pins, not too large)."""
    if heuristic.endswith("/skyline"):
        return g.n <= SKYLINE_MAX_BUFFERS and not bool((g.pinned >= 0).any())
    return True


def _skyline(g: InterferenceGraph, rule: str) -> I64:
    if rule != "random":
        ones = np.ones(g.n, dtype=np.float64)
        result: I64 = skyline(g.start, g.occupied_end, g.size, g.alignment, RULES[rule], ones)
        return result
    # The runs split into contiguous chunks, one per thread; each chunk keeps its best and
    # ties go to the lowest run, so the winner does not depend on the number of threads.
    workers = _workers(g, 4, PARALLEL_MIN_SKYLINE)
    bounds = [SKYLINE_RUNS * w // workers for w in range(workers + 1)]
    levels = np.asarray(SKYLINE_NOISE, dtype=np.float64)

    def chunk(w: int) -> tuple[I64, int, int]:
        found: tuple[I64, int, int] = best_of_random(
            g.start,
            g.occupied_end,
            g.size,
            g.alignment,
            bounds[w],
            bounds[w + 1],
            SKYLINE_SEED,
            levels,
        )
        return found

    results = [r for r in _stream(chunk, list(range(workers)), workers) if r[2] >= 0]
    offsets, _, _ = min(results, key=lambda r: (r[1], r[2]))
    return offsets


def run(g: InterferenceGraph, heuristic: str) -> I64:
    """Offsets from one named heuristic."""
    ordering, fit = heuristic.split("/")
    if fit == "skyline":
        return _skyline(g, ordering)
    order = ordering_of(ordering)(g)
    if heuristic in SWEPT:
        pinned = g.pinned[order] >= 0
        swept: I64 = place_sweep(
            order[~pinned], g.start, g.occupied_end, g.size, g.alignment, g.pinned
        )
        return swept
    return fit_in_order(g, order, fit, uses_tree(g, heuristic))


def fit_in_order(
    g: InterferenceGraph, order: I64, fit: str = "first-fit", tree: bool = False
) -> I64:
    """Offsets of the buffers placed in ``order`` (pinned ones first, where they are), each
    at the lowest (``first-fit``) or tightest (``best-fit``) gap its placed neighbours
    leave; on the segment tree where ``tree``."""
    pinned = g.pinned[order] >= 0
    order = np.concatenate([order[pinned], order[~pinned]])  # pinned first, fixed
    if tree:
        on_tree: I64 = place_tree(
            order,
            g.start,
            g.occupied_end,
            g.size,
            g.alignment,
            g.pinned,
            FITS[fit],
            _offset_bits(g),
        )
        return on_tree
    pos, hi, back_ptr, back = g.neighbours
    offsets: I64 = place(
        order,
        g.size,
        g.alignment,
        g.pinned,
        pos,
        g.by_start,
        hi,
        back_ptr,
        back,
        FITS[fit],
        _index_bits(g),
    )
    return offsets


def ordering_of(name: str) -> Ordering:
    """The ordering named ``name``, of ``ORDERINGS`` or ``LARGE_ORDERINGS``."""
    return ORDERINGS[name] if name in ORDERINGS else LARGE_ORDERINGS[name]


def uses_tree(g: InterferenceGraph, heuristic: str | None = None) -> bool:
    """Whether gap filling runs on the segment tree (``solvers._tree``) rather than the
    neighbour lists: on ``dense`` graphs only (elsewhere its unions fragment and it is the
    slower kernel), for first fit always and for the rest past ``TREE_MIN_EDGES``
    conflicts. Both give the same offsets (for sizes of at least one byte); the tree's
    memory grows with the buffers."""
    if not dense(g) or int(g.size.min(initial=1)) < 1:  # the cheaper test first
        return False
    if heuristic is not None and heuristic.endswith("/first-fit") and heuristic not in SWEPT:
        return True
    return g.conflict_edges > TREE_MIN_EDGES


def dense(g: InterferenceGraph) -> bool:
    """Past ``SKYLINE_MAX_BUFFERS`` buffers, at least ``DENSE_DEGREE`` conflicts a buffer on
    average (model-like: long-lived weights and nested activations meet nearly everything).
    There the tree's unions stay compact, so its first fit is the cheaper kernel."""
    return g.n > SKYLINE_MAX_BUFFERS and 2 * g.conflict_edges >= DENSE_DEGREE * g.n


def _offset_bits(g: InterferenceGraph) -> int:
    """Bits of the highest offset a gap-filling heuristic can give."""
    highest = int(g.pinned.max(initial=0)) + int(g.size.sum()) + int(g.alignment.max(initial=1))
    return highest.bit_length()


def _index_bits(g: InterferenceGraph) -> int:
    """Bits for a scratch slot in a packed sort key; 0 if offsets might not fit beside it."""
    bits = max(1, int(g.n).bit_length())
    highest = int(g.pinned.max(initial=0)) + int(g.size.sum()) + int(g.alignment.max(initial=1))
    return bits if highest.bit_length() + bits <= 62 else 0


def _workers(g: InterferenceGraph, tasks: int, least: int = PARALLEL_MIN_BUFFERS) -> int:
    """Threads worth using: the kernels release the GIL, but only large inputs repay them."""
    if g.n < least:
        return 1
    return max(1, min(tasks, os.cpu_count() or 1))


def _stream(func: Callable[[T], R], items: list[T], workers: int) -> Generator[R, None, None]:
    """``func(x)`` for each of ``items`` in order, computed ahead on ``workers`` threads when
    more than one (each in the caller's context: its deadline, which a kernel loading on a
    thread pauses), a thread taking the next item as soon as it is free: items of unequal cost
    keep every thread busy, where batches of ``workers`` would each wait for their dearest.
    Closed early, the items not started are not run (those running finish first)."""
    if workers <= 1:
        for x in items:
            yield func(x)
        return
    from concurrent.futures import ThreadPoolExecutor  # only large inputs: a few ms to import

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        # Each task in the caller's context, a copy of its own.
        futures = [pool.submit(contextvars.copy_context().run, func, x) for x in items]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def default_heuristics(g: InterferenceGraph) -> list[str]:
    """Every heuristic (past ``SKYLINE_MAX_BUFFERS`` buffers size first fit and
    ``MODEL_HEURISTIC`` first, or on ``dense`` graphs ``DENSE_FIRST``), on very large inputs
    the ones that win there, and on inputs with too many conflicts for neighbour lists
    ``TREE_PORTFOLIO``."""
    if uses_tree(g):
        return list(TREE_PORTFOLIO)
    if g.n > LARGE_INPUT:
        return list(LARGE_PORTFOLIO)
    if g.n <= SKYLINE_MAX_BUFFERS:
        return list(HEURISTICS)
    first = list(DENSE_FIRST) if dense(g) else ["size/first-fit", MODEL_HEURISTIC]
    return [*first, *(h for h in HEURISTICS if h not in first)]


def needs_neighbours(heuristic: str, g: InterferenceGraph | None = None) -> bool:
    """Whether the heuristic walks neighbour lists (memory grows with the conflicts); on
    ``g``, gap filling on the segment tree needs none."""
    if g is not None and uses_tree(g, heuristic):
        return False
    return not heuristic.endswith("/skyline") and heuristic not in SWEPT


def cost(g: InterferenceGraph, heuristic: str) -> float:
    """Estimated seconds of one heuristic on ``g``, from counts alone (deterministic): gap
    filling visits every conflict twice, skyline steps over buffers x time slots (once per
    seeded run for ``RANDOM_SKYLINE``), the sweep visits each buffer once."""
    n = g.n
    if heuristic.endswith("/skyline"):
        slots = 2 * n + 1  # at most this many distinct points
        runs = SKYLINE_RUNS if heuristic.startswith("random/") else 1
        return runs * n * slots / SKYLINE_RATE
    if heuristic in SWEPT:
        return n / SWEEP_RATE
    if uses_tree(g, heuristic) and heuristic.endswith("/first-fit"):
        return (n + 2 * g.conflict_edges) / TREE_FIRST_FIT_RATE
    return (n + 2 * g.conflict_edges) / GAP_FILL_RATE


def affordable(g: InterferenceGraph, names: list[str], seconds: float | None) -> list[str]:
    """The heuristics, in order, whose estimated costs add up to at most ``seconds`` (the
    first of them always, or, when it alone is over, the cheapest); None: all of them. On
    ``dense`` graphs heuristics other than first fits count against ``DENSE_REST_SHARE`` of
    ``seconds`` only.

    The neighbour lists gap filling shares are counted once. The choice depends on the
    graph's counts and the time limit only, never on the clock, so the same request runs
    the same heuristics on any machine.
    """
    if seconds is None or not names:
        return names
    budget = max(seconds, GREEDY_MIN_SECONDS)
    lists = (g.n + g.conflict_edges) / LIST_RATE  # seconds to build the neighbour lists
    chosen: list[str] = []
    spent = 0.0
    listed = False
    # On dense graphs the first fits share the whole budget; the dearer rest only what is left
    # of ``DENSE_REST_SHARE`` of it.
    rest = DENSE_REST_SHARE * budget if dense(g) else budget
    for name in names:
        extra = cost(g, name) + (lists if needs_neighbours(name, g) and not listed else 0.0)
        cap = budget if name.endswith("/first-fit") else rest
        if spent + extra <= cap:
            chosen.append(name)
            spent += extra
            listed = listed or needs_neighbours(name, g)
    if not chosen:
        cheapest = min(names, key=lambda h: cost(g, h) + (lists if needs_neighbours(h, g) else 0.0))
        chosen = [cheapest]
    return chosen


def _distinct(g: InterferenceGraph, names: list[str]) -> list[str]:
    """``names`` without each of ``STABLE_FIRST_FITS`` whose order is that of its
    counterpart (the same name without ``-stable``) listed before it: the same order gives
    the same offsets, and ties go to the earlier name."""
    kept: list[str] = []
    for name in names:
        twin = name.replace("-stable/", "/")
        if name in STABLE_FIRST_FITS and twin in kept:
            mine = ordering_of(name.split("/")[0])(g)
            if np.array_equal(mine, ordering_of(twin.split("/")[0])(g)):
                continue
        kept.append(name)
    return kept


def portfolio(
    g: InterferenceGraph,
    heuristics: list[str] | None = None,
    bound: int | None = None,
    *,
    seconds: float | None = None,
    without: tuple[str, ...] = (),
    head: int | None = None,
) -> Solution:
    """Run each heuristic; keep the smallest arena, ties to the earliest listed: the winner's
    name and offsets, every arena in ``tried``, and the aligned peak as the bound.

    Stops once a plan meets ``bound`` (a lower bound: nothing can beat it). Heuristics run
    in parallel (the kernels release the GIL), but the result and ``tried`` are those of
    running them one by one in order, whatever the number of cores. ``seconds``: the default
    portfolio keeps the heuristics ``affordable`` in that time; heuristics asked for by name
    all run; ``without`` leaves heuristics out of the default portfolio; ``head`` runs only
    that many of the first heuristics (the result the whole run gives when they meet
    ``bound``). Past
    ``NEIGHBOUR_EDGES_MAX`` conflicts only heuristics without neighbour lists apply; when none
    of those is asked for, ``RequestError`` names the limit.
    """
    if heuristics is None:
        wanted = [h for h in default_heuristics(g) if h not in without]
    else:
        wanted = heuristics
    names = [h for h in wanted if applicable(g, h)]
    if g.conflict_edges > NEIGHBOUR_EDGES_MAX:
        listless = [h for h in names if not needs_neighbours(h, g)]
        if not listless and names:
            raise RequestError.field(
                ("options", "solver"),
                f"heuristic {names[0]!r} needs the list of conflicting pairs, and this "
                f"request has {g.conflict_edges}, over the limit of {NEIGHBOUR_EDGES_MAX}; "
                f"use {' or '.join(sorted(SWEPT))} or solver 'auto'",
                "conflict_budget_exceeded",
                names[0],
            )
        names = listless
    if heuristics is None:
        names = _distinct(g, affordable(g, names, seconds))
    names = names[:head]
    best: tuple[int, str, I64] | None = None
    tried: list[tuple[str, int]] = []
    results = _stream(lambda h: run(g, h), names, _workers(g, len(names)))
    try:
        for k, (name, offsets) in enumerate(zip(names, results, strict=True)):
            arena = arena_of(g, offsets)
            tried.append((name, arena))
            if best is None or arena < best[0]:
                best = (arena, name, offsets)
            if bound is not None and arena <= bound:
                break
            if k + 1 < len(names) and expired():
                break  # a machine slower than the cost model: keep what is found
    finally:
        results.close()  # the heuristics not started are not run
    if best is None:
        raise ValueError(f"none of the heuristics {names} applies to this request")
    bound = g.aligned_bound.bytes
    return Solution(best[1], best[2], best[0], bound, best[0] <= bound, tried=tried)
