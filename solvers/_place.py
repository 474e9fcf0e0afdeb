"""The placement kernel every greedy heuristic shares (compiled with numba)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner._jit import njit

I64 = npt.NDArray[np.int64]


@njit
def place(
    order: I64,
    size: I64,
    alignment: I64,
    pinned: I64,
    pos: I64,
    by_start: I64,
    hi: I64,
    back_ptr: I64,
    back: I64,
    best_fit: bool,
    index_bits: int,
) -> I64:
    """Offsets (bytes) for buffers visited in ``order``; pinned ones keep their offset.

    Each buffer goes into a gap between the placed buffers it conflicts with: the lowest
    that fits (first fit) or the tightest that fits (best fit), else on top of them all.
    Neighbours come from the sweep-built adjacency of ``InterferenceGraph.neighbours``.
    ``index_bits`` > 0 packs (offset, scratch slot) into one int64 sort key, which sorts
    faster than an argsort; the caller passes 0 when offsets could overflow the packing.
    """
    n = order.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    lo = np.empty(n, dtype=np.int64)  # scratch: extents of placed neighbours
    up = np.empty(n, dtype=np.int64)
    key = np.empty(n, dtype=np.int64)
    mask = (1 << index_bits) - 1
    for i in range(n):
        b = order[i]
        if pinned[b] >= 0:
            offset[b] = pinned[b]
            continue
        p = pos[b]
        m = 0
        for q in range(p + 1, hi[p]):
            c = by_start[q]
            if offset[c] >= 0:
                lo[m] = offset[c]
                up[m] = offset[c] + size[c]
                m += 1
        for k in range(back_ptr[p], back_ptr[p + 1]):
            c = by_start[back[k]]
            if offset[c] >= 0:
                lo[m] = offset[c]
                up[m] = offset[c] + size[c]
                m += 1
        a = alignment[b]
        s = size[b]
        if index_bits > 0:
            for t in range(m):
                key[t] = (lo[t] << index_bits) | t
            sorted_idx = np.sort(key[:m]) & mask
        else:
            sorted_idx = np.argsort(lo[:m], kind="mergesort")
        top = 0  # highest byte covered by the neighbours seen so far
        best = -1
        best_gap = np.iinfo(np.int64).max
        for t in range(m):
            k = sorted_idx[t]
            cand = (top + a - 1) // a * a
            if cand + s <= lo[k]:
                gap = lo[k] - top
                if not best_fit:
                    best = cand
                    break
                if gap < best_gap:
                    best_gap = gap
                    best = cand
            if up[k] > top:
                top = up[k]
        if best < 0:
            best = (top + a - 1) // a * a
        offset[b] = best
    return offset
