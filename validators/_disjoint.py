"""A compiled pre-check for the static validator's sweep: whether any two extents it would
compare share a byte at all. When none does, the sweep has nothing to report, so a valid
plan of 100 000 buffers is checked in O(n log n) compiled steps instead of a Python loop."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import loaded_any, njit, ready

I64 = npt.NDArray[np.int64]
NEVER = np.iinfo(np.int64).max  # release point of an extent no barrier releases


def releases(end: I64, last: I64, barriers: list[int]) -> I64:
    """Per extent: the first barrier after its last access, at least its end (the sweep's
    release point); ``NEVER`` when no barrier follows its last access."""
    points = np.asarray(barriers, dtype=np.int64)
    k = np.searchsorted(points, last, side="right")
    out = np.full(end.shape[0], NEVER, dtype=np.int64)
    inside = k < points.size
    out[inside] = np.maximum(points[k[inside]], end[inside])
    return out


def any_clash(lo: I64, hi: I64, start: I64, end: I64, release: I64) -> bool:
    """Whether an extent, entering in order of (start, end, index), shares a byte with one
    entered before it and not yet released (release <= its start). Extents of no byte never
    enter. While nothing clashes the entered extents are disjoint, so only the one with the
    highest ``lo`` below the newcomer's ``hi`` can meet it: a Fenwick tree over the ranks of
    the ``lo`` values finds it in O(log n)."""
    order = np.lexsort((np.arange(lo.shape[0]), end, start)).astype(np.int64)
    gone = np.argsort(release, kind="stable").astype(np.int64)
    return bool(_any_clash(order, gone, lo, hi, start, release))


@njit(small=True)
def _any_clash(order: I64, gone: I64, lo: I64, hi: I64, start: I64, release: I64) -> bool:
    n = lo.shape[0]
    values = np.unique(lo)
    rank = np.searchsorted(values, lo)
    m = values.shape[0]
    tree = np.zeros(m + 1, dtype=np.int64)
    holder = np.full(m, -1, dtype=np.int64)
    inside = np.zeros(n, dtype=np.bool_)
    steps = 1
    while steps * 2 <= m:
        steps *= 2
    r = 0
    for t in range(n):
        b = order[t]
        while r < n and release[gone[r]] <= start[b]:
            j = gone[r]
            r += 1
            if inside[j]:
                inside[j] = False
                k = rank[j] + 1
                while k <= m:
                    tree[k] -= 1
                    k += k & -k
        if hi[b] <= lo[b]:
            continue
        # Entered extents with lo < hi[b]: their count, then the last of them.
        bound = np.searchsorted(values, hi[b])
        c = 0
        k = bound
        while k > 0:
            c += tree[k]
            k -= k & -k
        if c > 0:
            pos = 0
            step = steps
            while step > 0:
                if pos + step <= m and tree[pos + step] < c:
                    pos += step
                    c -= tree[pos]
                step >>= 1
            j = holder[pos]  # rank pos (0-based) holds the c-th entered extent
            if hi[j] > lo[b]:
                return True
        inside[b] = True
        holder[rank[b]] = b
        k = rank[b] + 1
        while k <= m:
            tree[k] += 1
            k += k & -k
    return False


# The kernel itself, held where loading leaves it: a kernel's load puts numba's dispatcher in
# place of every kernel named in its module.
_KERNEL = (_any_clash,)


def loaded() -> bool:
    """Whether the compiled check is cheap to call: it has run in this process, or another
    compiled kernel has (numba is in; loading this one from the cache is quick)."""
    return ready(_KERNEL[0]) or loaded_any()
