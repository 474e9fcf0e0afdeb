"""Greedy placement of many configurations of one kernel at once (the sweeps).

Every configuration shares one conflict graph (its occupied intervals do not depend on
sizes) and differs only in sizes and alignments, so one compiled loop places them all: per
configuration, each visit order below is tried with first fit, and the smaller arena wins
(ties: the first order). Alignments are powers of two, so aligning is a mask.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

__all__ = ["peaks", "place_batch", "visit_orders"]

I64 = npt.NDArray[np.int64]


def visit_orders(start: I64, size: I64) -> list[I64]:
    """Per configuration (rows of ``size``), the visit orders tried: largest first (ties by
    start, then index), and earliest start first (ties: largest, then index)."""
    count, n = size.shape
    index = np.broadcast_to(np.arange(n, dtype=np.int64), (count, n))
    begin = np.broadcast_to(start, (count, n))
    by_size = np.lexsort((index, begin, -size), axis=-1).astype(np.int64)
    by_start = np.lexsort((index, -size, begin), axis=-1).astype(np.int64)
    return [by_size, by_start]


def peaks(start: I64, occupied_end: I64, size: I64) -> I64:
    """Per configuration, the most bytes occupied at one point (the lower bound): the peak
    is reached at some buffer's start."""
    points = np.unique(start)
    live = (start[None, :] <= points[:, None]) & (occupied_end[None, :] > points[:, None])
    if int(size.max(initial=0)) * max(1, size.shape[1]) < 1 << 53:
        # Exact in doubles, and a BLAS product instead of numpy's integer loop.
        exact: I64 = (
            (size.astype(np.float64) @ live.T.astype(np.float64)).max(axis=1).astype(np.int64)
        )
        return exact
    result: I64 = (size @ live.T.astype(np.int64)).max(axis=1)
    return result


@njit
def place_batch(
    orders: I64,  # (orders, configurations, buffers)
    size: I64,  # (configurations, buffers), bytes
    alignment: I64,  # (configurations, buffers), bytes, powers of two
    adj_ptr: I64,  # CSR of the conflict graph
    adj: I64,
) -> tuple[I64, I64]:
    """Offsets (configurations, buffers) and arenas (bytes) of the best order per row."""
    k_orders, count, n = orders.shape
    best = np.empty((count, n), dtype=np.int64)
    arena = np.empty(count, dtype=np.int64)
    offset = np.empty(n, dtype=np.int64)
    lo = np.empty(n, dtype=np.int64)
    hi = np.empty(n, dtype=np.int64)
    for c in range(count):
        arena[c] = -1
        for k in range(k_orders):
            for i in range(n):
                offset[i] = -1
            top = 0
            for step in range(n):
                b = orders[k, c, step]
                m = 0
                for t in range(adj_ptr[b], adj_ptr[b + 1]):
                    j = adj[t]
                    if offset[j] >= 0:
                        # Insertion by lower end: neighbours are few.
                        q = m
                        while q > 0 and lo[q - 1] > offset[j]:
                            lo[q] = lo[q - 1]
                            hi[q] = hi[q - 1]
                            q -= 1
                        lo[q] = offset[j]
                        hi[q] = offset[j] + size[c, j]
                        m += 1
                s = size[c, b]
                mask = alignment[c, b] - 1
                at = 0
                for q in range(m):
                    if hi[q] <= at:
                        continue
                    if lo[q] >= at + s:
                        break
                    at = (hi[q] + mask) & ~mask
                offset[b] = at
                if at + s > top:
                    top = at + s
            if arena[c] < 0 or top < arena[c]:
                arena[c] = top
                for i in range(n):
                    best[c, i] = offset[i]
    return best, arena
