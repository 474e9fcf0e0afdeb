"""Row lists for the search's arrays (compiled with numba): two counting sorts in place of
a comparison sort of every pair."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

I64 = npt.NDArray[np.int64]


@njit
def rows_by_rank(src: I64, dst: I64, rank: I64) -> tuple[I64, I64]:
    """Row pointers and columns of the pairs ``(src, dst)``, each row's columns by ``rank``
    (a permutation of the rows): the pairs bucketed by their column's rank, then dealt to
    their rows in that order. The same lists as sorting ``src * n + rank[dst]``, in time
    linear in the pairs."""
    n = rank.shape[0]
    m = src.shape[0]
    start = np.zeros(n + 1, dtype=np.int64)
    for k in range(m):
        start[rank[dst[k]] + 1] += 1
    for r in range(n):
        start[r + 1] += start[r]
    by_column = np.empty(m, dtype=np.int64)
    for k in range(m):
        r = rank[dst[k]]
        by_column[start[r]] = k
        start[r] += 1
    ptr = np.zeros(n + 1, dtype=np.int64)
    for k in range(m):
        ptr[src[k] + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    fill = ptr[:n].copy()
    cols = np.empty(m, dtype=np.int64)
    for t in range(m):
        k = by_column[t]
        row = src[k]
        cols[fill[row]] = dst[k]
        fill[row] += 1
    return ptr, cols
