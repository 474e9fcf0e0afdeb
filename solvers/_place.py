"""The placement kernel every greedy heuristic shares (compiled with numba). Every alignment
is a power of two, so aligning is a mask, never a division."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

I64 = npt.NDArray[np.int64]

SHORT_SORT = 128  # keys up to which an insertion sort beats the general one


@njit(small=True)
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
            sort_keys(key, m)
            sorted_idx = key[:m] & mask
        else:
            sorted_idx = np.argsort(lo[:m], kind="mergesort")
        offset[b] = fit(lo, up, sorted_idx, m, a, s, best_fit)
    return offset


@njit(small=True)
def sort_keys(key: I64, m: int) -> None:
    """Sorts ``key[:m]`` in place: by insertion up to ``SHORT_SORT`` keys (most buffers have
    a few dozen placed neighbours, where a general sort's set-up costs more than the sort),
    else by the general sort."""
    if m > SHORT_SORT:
        key[:m].sort()
        return
    for t in range(1, m):
        v = key[t]
        u = t - 1
        while u >= 0 and key[u] > v:
            key[u + 1] = key[u]
            u -= 1
        key[u + 1] = v


@njit(small=True)
def fit(lo: I64, up: I64, sorted_idx: I64, m: int, a: int, s: int, best_fit: bool) -> int:
    """The offset of a buffer of ``s`` bytes aligned to ``a`` among ``m`` placed neighbours
    ``[lo, up)``, visited in ``sorted_idx`` order (by their lowest byte): the first gap that
    fits, or with ``best_fit`` the smallest; above them all when none fits."""
    top = 0  # highest byte covered by the neighbours seen so far
    best = -1
    best_gap = np.iinfo(np.int64).max
    for t in range(m):
        k = sorted_idx[t]
        cand = (top + a - 1) & -a
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
        best = (top + a - 1) & -a
    return best


@njit(small=True, borrows=True)
def _rank(a: I64, n: int, value: int, right: bool) -> int:
    """Where ``value`` goes among the first ``n`` values of ``a`` (sorted), before any equal
    to it, or after them with ``right``: ``np.searchsorted`` without making a view."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < value or (right and a[mid] == value):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(small=True, borrows=True)
def _shift(a: I64, lo: int, hi: int, by: int) -> None:
    """Moves ``a[lo:hi]`` by ``by`` places (1 or -1), as a copy would."""
    if by > 0:
        for t in range(hi - 1, lo - 1, -1):
            a[t + 1] = a[t]
    else:
        for t in range(lo, hi):
            a[t - 1] = a[t]


@njit(small=True, borrows=True)
def _release(gap_lo: I64, gap_hi: I64, gaps: int, top: int, lo: int, hi: int) -> tuple[int, int]:
    """Gives the bytes ``[lo, hi)`` of a buffer no longer occupied back to the free gaps below
    ``top`` (the first ``gaps`` of ``gap_lo``/``gap_hi``, sorted, disjoint), merged with the
    gaps they touch; returns (gaps, top): a gap that reaches ``top`` folds back into the space
    above."""
    k = _rank(gap_lo, gaps, lo, False)
    if k > 0 and gap_hi[k - 1] == lo:
        k -= 1
        lo = gap_lo[k]
        if k + 1 < gaps and gap_lo[k + 1] == hi:
            hi = gap_hi[k + 1]
            _shift(gap_lo, k + 2, gaps, -1)
            _shift(gap_hi, k + 2, gaps, -1)
            gaps -= 1
        gap_hi[k] = hi
    elif k < gaps and gap_lo[k] == hi:
        gap_lo[k] = lo
    else:
        _shift(gap_lo, k, gaps, 1)
        _shift(gap_hi, k, gaps, 1)
        gap_lo[k] = lo
        gap_hi[k] = hi
        gaps += 1
    if gap_hi[gaps - 1] >= top:
        top = gap_lo[gaps - 1]
        gaps -= 1
    return gaps, top


@njit(small=True, borrows=True)
def _lowest_fit(
    b: int,
    gap_lo: I64,
    gap_hi: I64,
    gaps: int,
    top: int,
    pins: I64,
    start: I64,
    occupied_end: I64,
    size: I64,
    alignment: I64,
    pinned: I64,
) -> int:
    """The lowest offset (bytes) aligned for buffer ``b`` at which it fits in a free gap (or
    the space above ``top``) and clears the pinned buffers whose occupied interval meets its
    own."""
    s = size[b]
    a = alignment[b]
    s0 = start[b]
    e0 = occupied_end[b]
    k = 0
    while True:
        glo = gap_lo[k] if k < gaps else top
        ghi = gap_hi[k] if k < gaps else np.iinfo(np.int64).max
        cand = (glo + a - 1) & -a
        moved = True
        while moved:  # lift the candidate over the pinned buffers it meets
            moved = False
            for p in pins:
                if start[p] < e0 and s0 < occupied_end[p]:
                    plo = pinned[p]
                    phi = plo + size[p]
                    if plo < cand + s and cand < phi and plo < phi:
                        cand = (phi + a - 1) & -a
                        moved = True
        if cand + s <= ghi:
            return int(cand)
        k += 1


@njit(small=True, borrows=True)
def _carve(gap_lo: I64, gap_hi: I64, gaps: int, top: int, best: int, end: int) -> tuple[int, int]:
    """Takes the bytes ``[best, end)`` of a buffer just placed out of the free gaps below
    ``top`` (``gaps`` of them); returns (gaps, top): placed at or above ``top``, the buffer
    raises it to ``end``, the padding below it becoming a gap."""
    if best >= top:
        if best > top:
            gap_lo[gaps] = top
            gap_hi[gaps] = best
            gaps += 1
        return gaps, end
    k = _rank(gap_lo, gaps, best, True) - 1
    glo, ghi = gap_lo[k], gap_hi[k]
    if glo < best and end < ghi:
        _shift(gap_lo, k + 1, gaps, 1)
        _shift(gap_hi, k + 1, gaps, 1)
        gap_hi[k] = best
        gap_lo[k + 1] = end
        gap_hi[k + 1] = ghi
        gaps += 1
    elif glo < best:
        gap_hi[k] = best
    elif end < ghi:
        gap_lo[k] = end
    else:
        _shift(gap_lo, k + 1, gaps, -1)
        _shift(gap_hi, k + 1, gaps, -1)
        gaps -= 1
    return gaps, top


@njit(small=True)
def place_sweep(
    order: I64,
    start: I64,
    occupied_end: I64,
    size: I64,
    alignment: I64,
    pinned: I64,
) -> I64:
    """First fit in start order without neighbour lists: the same offsets as ``place`` with
    ``order_by_start`` and first fit, in memory that grows with the buffers, not the edges.

    ``order`` holds the free buffers by start (ties as ``order_by_start``). Sweeping it, a
    buffer's placed conflicts are exactly the free buffers still occupied at its start, plus
    the pinned ones whose occupied interval meets its own; the bytes below the highest
    occupied one are kept as a sorted list of free gaps (the complement of the occupied
    buffers), so each buffer takes the lowest aligned offset that fits a gap and avoids the
    pinned buffers it conflicts with. Work: gaps scanned per buffer, never its conflicts.
    """
    n = start.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    pins = np.flatnonzero(pinned >= 0)
    for p in pins:
        offset[p] = pinned[p]
    m = order.shape[0]
    releases = order[np.argsort(occupied_end[order], kind="mergesort")]
    gap_lo = np.empty(m + 2, dtype=np.int64)  # free gaps below ``top``, sorted, disjoint
    gap_hi = np.empty(m + 2, dtype=np.int64)
    gaps = 0
    top = 0  # bytes: the highest end of an occupied free buffer
    r = 0
    for i in range(m):
        b = order[i]
        while r < m and occupied_end[releases[r]] <= start[b]:
            c = releases[r]
            r += 1
            if size[c] > 0:
                gaps, top = _release(gap_lo, gap_hi, gaps, top, offset[c], offset[c] + size[c])
        best = _lowest_fit(
            b, gap_lo, gap_hi, gaps, top, pins, start, occupied_end, size, alignment, pinned
        )
        offset[b] = best
        if size[b] > 0:
            gaps, top = _carve(gap_lo, gap_hi, gaps, top, best, best + size[b])
    return offset
