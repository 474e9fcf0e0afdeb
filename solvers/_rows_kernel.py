"""Row lists for the search's arrays (compiled with numba): counting passes in place of
building and sorting every conflicting pair."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

I64 = npt.NDArray[np.int64]


@njit
def neighbour_rows(by_start: I64, hi: I64, rank: I64) -> tuple[I64, I64]:
    """Row pointers and columns: each buffer's conflicting buffers, by ``rank`` (a
    permutation of the buffers), read straight from the sweep's form (in start order,
    position ``p`` conflicts with ``p+1 .. hi[p]-1``). The rows are filled unordered, then
    each buffer, in rank order, joins its neighbours' final rows: linear in the pairs."""
    n = by_start.shape[0]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for p in range(n):
        ptr[by_start[p] + 1] += hi[p] - p - 1
        for q in range(p + 1, hi[p]):
            ptr[by_start[q] + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    fill = ptr[:n].copy()
    raw = np.empty(ptr[n], dtype=np.int64)  # each row's neighbours, unordered
    for p in range(n):
        a = by_start[p]
        for q in range(p + 1, hi[p]):
            b = by_start[q]
            raw[fill[a]] = b
            fill[a] += 1
            raw[fill[b]] = a
            fill[b] += 1
    by_rank = np.empty(n, dtype=np.int64)
    for i in range(n):
        by_rank[rank[i]] = i
    fill[:] = ptr[:n]
    cols = np.empty(ptr[n], dtype=np.int64)
    for r in range(n):  # each buffer, in rank order, joins its neighbours' rows
        c = by_rank[r]
        for k in range(ptr[c], ptr[c + 1]):
            row = raw[k]
            cols[fill[row]] = c
            fill[row] += 1
    return ptr, cols
