"""The clique bound: the buffers live at one point, stacked as tightly as alignment allows.

Buffers occupied at a common point pairwise conflict, so their address ranges are disjoint:
sorted by offset, each starts at or above the top of the one before, at a multiple of its
alignment. The lowest top over every order is the exact arena of that set alone (a dynamic
program over subsets: for a set, only its lowest top matters to what can follow, since
rounding up is monotone), and no plan of the whole request is lower. Pinned buffers are
treated as free, which only relaxes the bound. Where alignments differ (16 and 128 bytes,
say) this exceeds the peak and the aligned bound, often up to the optimum.

The program costs ``2^k * k`` steps for ``k`` live buffers, so points are taken in
decreasing order of what they could reach, stopping once none can beat the bound in hand,
within a fixed budget of steps (deterministic).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner._jit import njit
from planner.graph import InterferenceGraph, LowerBound
from solvers.exact import granularity

__all__ = ["CLIQUE_MAX", "MAX_BUFFERS", "STEP_BUDGET", "clique_bound", "stack_height"]

I64 = npt.NDArray[np.int64]

CLIQUE_MAX = 18  # live buffers: points with more are left to the other bounds
MAX_BUFFERS = 2000  # the live sets are found by a points x buffers table
STEP_BUDGET = 8_000_000  # steps of the subset program over all points of one request


@njit
def stack_height(size: I64, alignment: I64) -> int:
    """Lowest top (bytes) of the buffers stacked disjoint from 0, each aligned."""
    k = size.shape[0]
    full = 1 << k
    never = np.iinfo(np.int64).max // 4
    top = np.full(full, never, dtype=np.int64)
    top[0] = 0
    for mask in range(full):
        t = top[mask]
        if t == never:
            continue
        for i in range(k):
            bit = 1 << i
            if mask & bit == 0:
                a = alignment[i]
                reach = (t + a - 1) // a * a + size[i]
                if reach < top[mask | bit]:
                    top[mask | bit] = reach
    return int(top[full - 1])


def clique_bound(g: InterferenceGraph, floor: int = 0) -> LowerBound:
    """Largest stacked height of the buffers live at one point (bytes), with the point and
    those buffers; ``floor`` bytes (no point) when no point within the budget beats it, or
    alignment cannot pad (every arena is then a multiple of every alignment)."""
    best = LowerBound(floor, None, [])
    if g.n == 0 or g.n > MAX_BUFFERS or int(g.alignment.max()) <= granularity(g):
        return best
    points = np.unique(g.start)
    live = (g.start[None, :] <= points[:, None]) & (g.occupied_end[None, :] > points[:, None])
    counts = live.sum(axis=1)
    # No stacking exceeds the sizes plus the most each alignment can pad.
    reach = np.where(live, g.size[None, :] + g.alignment[None, :] - 1, 0).sum(axis=1)
    steps = 0
    for p in np.argsort(-reach, kind="stable").tolist():
        if int(reach[p]) <= best.bytes:
            break  # the rest cannot beat it either
        k = int(counts[p])
        cost = (1 << k) * k
        if k > CLIQUE_MAX or steps + cost > STEP_BUDGET:
            continue
        steps += cost
        members = np.flatnonzero(live[p])
        height = stack_height(
            g.size[members].astype(np.int64), g.alignment[members].astype(np.int64)
        )
        if height > best.bytes:
            best = LowerBound(height, int(points[p]), [int(i) for i in members])
    return best
