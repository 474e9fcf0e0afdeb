"""The window bound: a capacity that a window of the program cannot fit below bounds every plan.

Clip every lifetime to a window of consecutive sections (the spans between distinct time
points) and keep the buffers live there. Two buffers conflict in the window only if they
conflict in the request, so every plan of the request is a plan of the window, and a capacity
the window cannot fit below, the request cannot either. Where the bound is a few granules
below the optimum because of how buffers of several sections must interleave (alignments
that pad differently from section to section), the search cannot prove that on the whole
request: every order of the buffers far from the crowded sections is tried again under each
failing one. On a window of ``WINDOW_SECTIONS`` sections those buffers are gone, and the
search exhausts it in a few thousand nodes.

Windows are tried in decreasing order of their peak, the ``WINDOW_COUNT`` fullest, each
decided by the search's orders in turns on its share of a node budget; each proof raises the
bound by one granule and the scan starts again from the fullest. Node counts decide, so the
same request gets the same bound on any machine; the clock is only a hard cap.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from planner.core.clock import note_cut, wall_limit
from planner.core.graph import InterferenceGraph
from planner.solvers.exact import Progress, Stop, granularity, round_up
from planner.solvers.search import ORDERS, exhausts, node_budget
from planner.solvers.solution import Solution, unfit

__all__ = ["WINDOW_COUNT", "WINDOW_SECTIONS", "solve_windows", "window_bound"]

I64 = npt.NDArray[np.int64]

# Sections per window and windows tried, chosen on the parts of random kernels whose first
# search decides nothing, 40 000 nodes each: on seeds 1000-2999 (30 parts) windows of 3, 8
# and 16 sections each raised the bounds by 15 granules in all, and 16 windows instead of 8
# by 12; on seeds 3000-4999 (33 parts) 8 sections by 18, 3 by 4, 16 by 10. Neither set is
# the one kernels64 reports on.
WINDOW_SECTIONS = 8
WINDOW_COUNT = 8
# Two of the search's orders (MiniMalloc's first two) decide a window: one order that
# exhausts it is a proof, and a second is a second chance at a short one.
WINDOW_ORDERS = ORDERS[:2]


def solve_windows(
    g: InterferenceGraph,
    *,
    capacity: int | None,
    lower_bound: int,
    hint: npt.NDArray[np.int64] | None,
    time_limit: float,
    upper: int | None = None,
    on_progress: Progress | None = None,
    stop: Stop | None = None,
    tolerance: int = 0,
) -> Solution:
    """The window bound as an exact method's result: no plan, the bound raised from
    ``lower_bound`` within the nodes ``time_limit`` buys (``search.node_budget``). A bound
    above ``capacity`` proves that nothing fits. ``hint``, ``upper`` and ``tolerance`` are
    not used.
    ``stop``: once stopped (a plan at ``lower_bound`` is known), no further window is tried."""
    start = round_up(max(lower_bound, 0), granularity(g))
    deadline = time.perf_counter() + wall_limit(time_limit)
    bound = window_bound(g, start, node_budget(g, time_limit), deadline=deadline, stop=stop)
    if on_progress is not None and bound > start:
        on_progress(None, bound)
    return Solution(
        "search", None, None, bound, False, unfit(g, capacity is not None and bound > capacity)
    )


def window_bound(
    g: InterferenceGraph,
    bound: int,
    nodes: int,
    sections: int = WINDOW_SECTIONS,
    deadline: float = float("inf"),
    stop: Stop | None = None,
) -> int:
    """The lowest capacity (bytes, a multiple of the granularity, at least ``bound``) that no
    window of ``sections`` sections proves too low within ``nodes`` search nodes. The clock
    (``deadline``, a ``time.perf_counter`` value) is only a hard cap; ``stop`` ends the scan
    between windows (the bound proved so far is returned)."""
    points = np.unique(np.concatenate([g.start, g.occupied_end]))
    if int(points.size) - 1 <= sections or nodes <= 0:
        return bound  # the one window would be the request itself
    first = np.searchsorted(points, g.start)
    last = np.searchsorted(points, g.occupied_end)
    load = np.zeros(points.size, dtype=np.int64)
    np.add.at(load, first, g.size)
    np.add.at(load, last, -g.size)
    peaks = sliding_window_view(np.cumsum(load)[:-1], sections).max(axis=1)
    fullest = np.argsort(-peaks, kind="stable")[:WINDOW_COUNT].tolist()
    windows = {k: _clipped(g, int(points[k]), int(points[k + sections])) for k in fullest}
    per = max(1, nodes // WINDOW_COUNT)
    step = granularity(g)
    left = nodes
    while left > 0:
        for k in fullest:
            proved, used = exhausts(windows[k], bound, min(per, left), WINDOW_ORDERS, deadline)
            left -= used
            if proved:
                bound += step
                break
            if left <= 0 or (stop is not None and stop.stopped):
                return bound
            if time.perf_counter() > deadline:
                note_cut()
                return bound
        else:
            return bound  # no window proves this capacity too low
    return bound


def _clipped(g: InterferenceGraph, a: int, b: int) -> InterferenceGraph:
    """The buffers occupied in ``[a, b)``, every lifetime clipped to it."""
    members: I64 = np.flatnonzero((g.start < b) & (g.occupied_end > a)).astype(np.int64)
    sub = g.subgraph(members)
    start = np.maximum(sub.start, a)
    occupied_end = np.minimum(sub.occupied_end, b)
    end = np.clip(np.minimum(sub.end, occupied_end), start, None)
    return replace(sub, start=start, end=end, occupied_end=occupied_end)
