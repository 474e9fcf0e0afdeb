"""Gap filling without neighbour lists: the offsets of ``_place.place``, in memory and time
that grow with the buffers, not the conflicts (compiled with numba).

Occupied intervals are mapped onto the sorted distinct start points (two intervals meet iff
they cover a common start point), and a segment tree over those points keeps, per node, two
unions of placed byte ranges, each a sorted list of disjoint ``[lo, hi)`` runs:

- ``own``: buffers that cover the node's whole range (inserted at their canonical nodes);
- ``sub``: buffers that meet the node's range (their canonical nodes and boundary paths).

The placed buffers that conflict with a query range are then exactly those in ``sub`` of its
canonical nodes and ``own`` of the nodes on its two boundary paths, so the union of their
byte ranges comes from O(log n) lists instead of one entry per conflict. Each list is a
union, so long-lived buffers stacked on one another collapse into a few runs. ``place``
looks only at that union (with sizes of at least one byte, the gaps between merged runs are
the gaps between the neighbours), so both kernels give the same offsets.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.solvers._place import fit

I64 = npt.NDArray[np.int64]
_FIRST_CAPACITY = 4  # runs a list holds before it first grows


@njit
def _grow_pool(pool_lo: I64, pool_hi: I64, need: int) -> tuple[I64, I64]:
    size = pool_lo.shape[0]
    while size < need:
        size *= 2
    lo = np.empty(size, dtype=np.int64)
    hi = np.empty(size, dtype=np.int64)
    lo[: pool_lo.shape[0]] = pool_lo
    hi[: pool_hi.shape[0]] = pool_hi
    return lo, hi


@njit
def _insert(
    s: int,
    lo: int,
    hi: int,
    head: I64,
    count: I64,
    cap: I64,
    pool: tuple[I64, I64, I64],
) -> tuple[I64, I64, I64]:
    """Add ``[lo, hi)`` to list ``s``, merged with the runs it overlaps or touches."""
    pool_lo, pool_hi, used = pool
    h = head[s]
    m = count[s]
    # First run that ends at or after lo (runs are disjoint, so their ends increase).
    a, b = 0, m
    while a < b:
        mid = (a + b) >> 1
        if pool_hi[h + mid] < lo:
            a = mid + 1
        else:
            b = mid
    k = a
    j = k  # runs k .. j-1 start at or before hi: they merge with the new one
    while j < m and pool_lo[h + j] <= hi:
        j += 1
    if j > k:
        new_lo = min(lo, pool_lo[h + k])
        new_hi = max(hi, pool_hi[h + j - 1])
        pool_lo[h + k] = new_lo
        pool_hi[h + k] = new_hi
        gone = j - k - 1
        if gone > 0:
            for t in range(j, m):
                pool_lo[h + t - gone] = pool_lo[h + t]
                pool_hi[h + t - gone] = pool_hi[h + t]
            count[s] = m - gone
        return pool
    if m == cap[s]:  # full: move the list to a block twice as large at the pool's end
        new_cap = max(_FIRST_CAPACITY, 2 * m)
        at = used[0]
        if at + new_cap > pool_lo.shape[0]:
            pool_lo, pool_hi = _grow_pool(pool_lo, pool_hi, at + new_cap)
        pool_lo[at : at + m] = pool_lo[h : h + m]
        pool_hi[at : at + m] = pool_hi[h : h + m]
        head[s] = at
        cap[s] = new_cap
        used[0] = at + new_cap
        h = at
    for t in range(m - 1, k - 1, -1):
        pool_lo[h + t + 1] = pool_lo[h + t]
        pool_hi[h + t + 1] = pool_hi[h + t]
    pool_lo[h + k] = lo
    pool_hi[h + k] = hi
    count[s] = m + 1
    return (pool_lo, pool_hi, used)


@njit
def _gather(
    s: int,
    pool: tuple[I64, I64, I64],
    head: I64,
    count: I64,
    lo_buf: I64,
    hi_buf: I64,
    m: int,
) -> tuple[I64, I64, int]:
    """Append list ``s``'s runs to the scratch arrays (grown as needed) after ``m`` runs."""
    c = count[s]
    if m + c > lo_buf.shape[0]:
        lo_buf, hi_buf = _grow_pool(lo_buf, hi_buf, m + c)
    h = head[s]
    lo_buf[m : m + c] = pool[0][h : h + c]
    hi_buf[m : m + c] = pool[1][h : h + c]
    return lo_buf, hi_buf, m + c


@njit
def _sift_down(heap: I64, size: int, i: int) -> None:
    while True:
        c = 2 * i + 1
        if c >= size:
            return
        if c + 1 < size and heap[c + 1] < heap[c]:
            c += 1
        if heap[i] <= heap[c]:
            return
        heap[i], heap[c] = heap[c], heap[i]
        i = c


@njit
def _past(pool_hi: I64, h: int, c: int, q: int, top: int) -> int:
    """The first of runs ``q .. c-1`` of the list at ``h`` that ends above ``top`` (``c`` if
    none), galloping from ``q``: runs end in increasing order, so those skipped lie wholly
    below ``top``."""
    if q >= c or pool_hi[h + q] > top:
        return q
    step = 1  # pool_hi[h + q] <= top: the answer lies in q+1 ..
    while q + step < c and pool_hi[h + q + step] <= top:
        q += step
        step *= 2
    lo, up = q + 1, min(q + step, c)
    while lo < up:
        mid = (lo + up) >> 1
        if pool_hi[h + mid] <= top:
            lo = mid + 1
        else:
            up = mid
    return lo


@njit
def _merge_fit(
    lists: I64,
    k: int,
    s_b: int,
    a: int,
    best_fit: bool,
    pool: tuple[I64, I64, I64],
    head: I64,
    count: I64,
) -> int:
    """``_place.fit`` over the union of ``k`` lists: their runs merged in offset order by a
    heap of packed (offset, list slot) keys. A list's runs that end at or below the highest
    byte covered so far can open no gap, so each list skips past them at once. First fit
    stops at the first gap that takes ``s_b`` bytes at a multiple of ``a``; best fit keeps
    the first of the smallest such gaps (one of exactly ``s_b`` bytes cannot be beaten)."""
    bits = 1
    while (1 << bits) <= k:
        bits += 1
    mask = (1 << bits) - 1
    heap = np.empty(k, dtype=np.int64)
    at = np.zeros(k, dtype=np.int64)  # next run of each list
    size = 0
    for j in range(k):
        if count[lists[j]] > 0:
            heap[size] = (pool[0][head[lists[j]]] << bits) | j
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, i)
    top = 0
    best = -1
    best_gap = np.iinfo(np.int64).max
    while size > 0:
        j = heap[0] & mask
        s = lists[j]
        h = head[s]
        lo = pool[0][h + at[j]]
        cand = (top + a - 1) & -a
        if cand + s_b <= lo:
            if not best_fit:
                return cand
            if lo - top < best_gap:
                best_gap = lo - top
                best = cand
                if best_gap == s_b:
                    return best
        hi = pool[1][h + at[j]]
        if hi > top:
            top = hi
        at[j] = _past(pool[1], h, count[s], at[j] + 1, top)
        if at[j] < count[s]:
            heap[0] = (pool[0][h + at[j]] << bits) | j
        else:
            size -= 1
            heap[0] = heap[size]
        _sift_down(heap, size, 0)
    return best if best >= 0 else (top + a - 1) & -a


@njit
def _lists(left: int, right: int, nodes: int, lists: I64) -> int:
    """The lists a query on leaves ``left .. right`` reads, into ``lists``; their number."""
    k = 0
    x, y = left, right
    while x >= 1:
        lists[k] = x
        k += 1
        if y != x:
            lists[k] = y
            k += 1
        x >>= 1
        y >>= 1
    lq, rq = left, right + 1
    while lq < rq:
        if lq & 1:
            lists[k] = lq + nodes
            k += 1
            lq += 1
        if rq & 1:
            rq -= 1
            lists[k] = rq + nodes
            k += 1
        lq >>= 1
        rq >>= 1
    return k


@njit
def _leaves(start: I64, occupied_end: I64) -> tuple[I64, I64, int]:
    """Each interval's first and last leaf (inclusive) of a tree over the sorted distinct
    start points, and the tree's width (leaves, a power of two)."""
    points = np.unique(start)
    leaf_lo = np.searchsorted(points, start, side="left")
    leaf_hi = np.searchsorted(points, occupied_end, side="left") - 1  # >= leaf_lo
    width = 1
    while width < points.shape[0]:
        width *= 2
    return leaf_lo, leaf_hi, width


@njit
def _gathered_fit(
    lists: I64,
    k: int,
    size: int,
    alignment: int,
    best_fit: bool,
    offset_bits: int,
    pool: tuple[I64, I64, I64],
    head: I64,
    count: I64,
    bufs: tuple[I64, I64, I64],
) -> tuple[int, tuple[I64, I64, I64]]:
    """The fit on the runs of the ``k`` lists gathered into one array and sorted by their
    start; ``bufs`` (the runs' starts and ends, the sort keys) grow as needed and come back."""
    lo_buf, hi_buf, key = bufs
    m = 0
    for t in range(k):
        lo_buf, hi_buf, m = _gather(lists[t], pool, head, count, lo_buf, hi_buf, m)
    if key.shape[0] < m:
        key = np.empty(lo_buf.shape[0], dtype=np.int64)
    index_bits = 1
    while (1 << index_bits) <= m:
        index_bits += 1
    if offset_bits + index_bits <= 62:  # packed keys sort faster than an argsort
        mask = (1 << index_bits) - 1
        for t in range(m):
            key[t] = (lo_buf[t] << index_bits) | t
        sorted_idx = np.sort(key[:m]) & mask
    else:
        sorted_idx = np.argsort(lo_buf[:m], kind="mergesort")
    best = fit(lo_buf, hi_buf, sorted_idx, m, alignment, size, best_fit)
    return best, (lo_buf, hi_buf, key)


@njit
def _add_placed(
    left: int,
    right: int,
    nodes: int,
    lo: int,
    hi: int,
    head: I64,
    count: I64,
    cap: I64,
    pool: tuple[I64, I64, I64],
) -> tuple[I64, I64, I64]:
    """Add bytes ``[lo, hi)`` of a buffer on leaves ``left .. right``: to ``own`` and
    ``sub`` of its canonical nodes, and to ``sub`` of the nodes on both boundary paths."""
    lq, rq = left, right + 1
    while lq < rq:
        if lq & 1:
            pool = _insert(lq, lo, hi, head, count, cap, pool)
            pool = _insert(lq + nodes, lo, hi, head, count, cap, pool)
            lq += 1
        if rq & 1:
            rq -= 1
            pool = _insert(rq, lo, hi, head, count, cap, pool)
            pool = _insert(rq + nodes, lo, hi, head, count, cap, pool)
        lq >>= 1
        rq >>= 1
    x, y = left, right
    while x >= 1:
        pool = _insert(x + nodes, lo, hi, head, count, cap, pool)
        if y != x:
            pool = _insert(y + nodes, lo, hi, head, count, cap, pool)
        x >>= 1
        y >>= 1
    return pool


@njit
def place_tree(
    order: I64,
    start: I64,
    occupied_end: I64,
    size: I64,
    alignment: I64,
    pinned: I64,
    best_fit: bool,
    offset_bits: int,
) -> I64:
    """Offsets (bytes) for buffers visited in ``order`` (pinned ones first); pinned ones keep
    their offset. The same offsets as ``_place.place`` for sizes of at least one byte.
    ``offset_bits``: bits of the highest offset possible; the runs of one query then sort as
    packed (offset, slot) keys when both fit in 62 bits, as in ``place``. Per buffer: the
    lists its range reads (``_lists``), the fit on their merged runs (``_merge_fit``) or on
    them gathered and sorted (``_gathered_fit``: offsets too wide to pack, or an empty
    buffer), and its bytes added to the tree (``_add_placed``)."""
    n = start.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return offset
    leaf_lo, leaf_hi, width = _leaves(start, occupied_end)
    nodes = 2 * width  # node 1 is the root; leaves at width .. 2*width-1
    head = np.zeros(2 * nodes, dtype=np.int64)  # list s: own of node s, sub of node s-nodes
    count = np.zeros(2 * nodes, dtype=np.int64)
    cap = np.zeros(2 * nodes, dtype=np.int64)
    pool: tuple[I64, I64, I64] = (
        np.empty(16 * n + 64, dtype=np.int64),
        np.empty(16 * n + 64, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
    )
    bufs = (
        np.empty(64, dtype=np.int64),
        np.empty(64, dtype=np.int64),
        np.empty(64, dtype=np.int64),
    )
    lists = np.empty(256, dtype=np.int64)  # 4 lists a tree level at most
    for i in range(order.shape[0]):
        b = order[i]
        left = leaf_lo[b] + width
        right = leaf_hi[b] + width  # inclusive leaf
        if pinned[b] >= 0:
            best = pinned[b]
        else:
            k = _lists(left, right, nodes, lists)
            if size[b] > 0 and offset_bits + 8 <= 62:
                best = _merge_fit(lists, k, size[b], alignment[b], best_fit, pool, head, count)
            else:
                best, bufs = _gathered_fit(
                    lists, k, size[b], alignment[b], best_fit, offset_bits, pool, head, count, bufs
                )
        offset[b] = best
        if size[b] > 0:
            pool = _add_placed(left, right, nodes, best, best + size[b], head, count, cap, pool)
    return offset
