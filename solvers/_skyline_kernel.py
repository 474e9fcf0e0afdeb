"""Skyline decision kernel for the exact search (compiled with numba): the perfect-packing
search of rectangle packing, with lifetimes fixed.

Decides whether every free buffer fits below ``capacity`` bytes. The state is a *skyline*:
per section (between consecutive distinct time points) the height in bytes below which
everything is decided, each byte either under a placed buffer or *waste*. The search looks
at the lowest cell of the skyline, leftmost among the lowest sections that unplaced buffers
are live in: the buffer covering it must sit exactly there and be live from exactly that
section on (the section before is decided at that height), within the run of sections at
that height (the *valley*). So the children are the unplaced buffers that start at that
section, end within the valley and are aligned at that height, in rank order, and last the
cell is waste: that section rises to the lowest offset any unplaced buffer live there could
still take. This is complete: any plan within the capacity agrees with one path.

**Pruning** (each a proof, so an exhausted search proves infeasibility):

- waste: a section's height plus the bytes of the unplaced buffers live there must stay
  within the capacity (placing a buffer keeps that sum, waste raises it);
- dead cells: an unplaced buffer sits no lower than the highest section of its lifetime
  (aligned), so a section where every unplaced buffer live there sits higher than its
  height wastes at least the difference, which must fit the same sum;
- dominance: interchangeable buffers (same interval, size, alignment) go in rank order.

Where the capacity equals the peak of live bytes (a tiling), no byte may be wasted, so the
first pruning fails every waste child and the dead-cell one every node that leaves a cell
no buffer can fill: such instances are decided in few nodes. Pinned buffers are not
supported (the caller uses the canonical kernel for them). Every alignment is a power of two,
so aligning is a mask, never a division.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.solvers._pace_kernel import EVERY, keep_pace
from planner.solvers._search_kernel import EXHAUSTED, FOUND, OUT_OF_NODES

I64 = npt.NDArray[np.int64]

WASTE = -1  # a child that leaves the lowest cell empty
# Which valley a node branches on (all are complete; they differ in what they find fast):
FEWEST = 0  # the one with the fewest children, then the lowest
LOWEST = 1  # the lowest, then the leftmost
LEFTMOST = 2  # the leftmost


@njit
def _grow(a: I64, need: int) -> I64:
    """``a`` with room for at least ``need`` values, the first ``a.size`` kept."""
    if need <= a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], need), dtype=np.int64)
    b[: a.shape[0]] = a
    return b


@njit
def _bottom_row(
    a: int,
    b: int,
    h: int,
    size: I64,
    alignment: I64,
    last: I64,
    start_ptr: I64,
    start_list: I64,
    offset: I64,
    slack: I64,
    reach: I64,
) -> int:
    """Whether the bottom row of the valley ``a .. b-1`` (sections, all at ``h`` bytes, both
    sides higher) can be covered: by unplaced buffers aligned at ``h`` whose lifetimes lie in
    it, side by side, and waste in sections with slack. ``reach[x]`` (x in a .. b) becomes 1
    where sections ``x .. b-1`` can be covered so; returns the steps taken."""
    steps = 0
    reach[b] = 1
    for x in range(b - 1, a - 1, -1):
        reach[x] = 1 if slack[x] > 0 and reach[x + 1] == 1 else 0
        if reach[x] == 1:
            continue
        for k in range(start_ptr[x], start_ptr[x + 1]):
            c = start_list[k]
            steps += 1
            aligned = (h & (alignment[c] - 1)) == 0
            if offset[c] < 0 and last[c] <= b and aligned and reach[last[c]] == 1:
                reach[x] = 1
                break
    return steps


@njit
def _stacked_later(
    c: int,
    h: int,
    size: I64,
    alignment: I64,
    rank: I64,
    span_of: I64,
    span_ptr: I64,
    span_list: I64,
    offset: I64,
) -> bool:
    """Whether a placed buffer with the same lifetime as ``c`` and a later rank ends at
    ``h`` and could swap places with ``c`` (both stay aligned): the two would form a block
    whose order nothing else sees, so only the order by rank is searched."""
    k0 = span_ptr[span_of[c]]
    for k in range(k0, span_ptr[span_of[c] + 1]):
        p = span_list[k]
        o = offset[p]
        if o < 0 or o + size[p] != h or rank[p] < rank[c]:
            continue
        if (o & (alignment[c] - 1)) == 0 and ((o + size[c]) & (alignment[p] - 1)) == 0:
            return True
    return False


@njit
def _children(
    a: int,
    b: int,
    h: int,
    size: I64,
    alignment: I64,
    first: I64,
    last: I64,
    start_ptr: I64,
    start_list: I64,
    twin_prev: I64,
    rank: I64,
    span_of: I64,
    span_ptr: I64,
    span_list: I64,
    offset: I64,
    sits: I64,
    rem: I64,
    reach: I64,
    capacity: int,
    kid: I64,
    base: int,
    write: bool,
) -> tuple[int, int]:
    """(children, waste height) of the first cell of the valley ``a .. b-1`` at ``h`` bytes,
    after ``_bottom_row`` filled ``reach``: the unplaced buffers starting there that fit the
    valley, sit at ``h`` and leave a row that can be completed (in rank order; written to
    ``kid`` from ``base`` if ``write``), then waste, if the cell may stay empty: the section
    rises to the lowest offset a buffer live there can still take."""
    count = 0
    for k in range(start_ptr[a], start_ptr[a + 1]):
        c = start_list[k]
        if offset[c] >= 0 or last[c] > b or sits[c] != h or reach[last[c]] == 0:
            continue
        if twin_prev[c] >= 0 and offset[twin_prev[c]] < 0:
            continue
        if _stacked_later(c, h, size, alignment, rank, span_of, span_ptr, span_list, offset):
            continue
        if write:
            kid[base + count] = c
        count += 1
    rise = np.iinfo(np.int64).max // 4
    # Every buffer live there sits at ``h`` or higher and the waste rises above ``h``: with
    # no byte of slack above the bytes still to place, the cell cannot stay empty.
    if reach[a + 1] == 1 and h + 1 + rem[a] <= capacity:
        for c in range(size.shape[0]):
            if offset[c] >= 0 or first[c] > a or last[c] <= a:
                continue
            o = sits[c]
            if o == h:
                o = (h + alignment[c]) & -alignment[c]
            rise = min(rise, o)
        if rise + rem[a] <= capacity:
            if write:
                kid[base + count] = WASTE
            count += 1
    return count, rise


@njit
def decide_skyline(
    size: I64,
    alignment: I64,
    first: I64,
    last: I64,
    start_ptr: I64,
    start_list: I64,
    twin_prev: I64,
    rank: I64,
    span_of: I64,
    span_ptr: I64,
    span_list: I64,
    valley: int,
    discount: int,
    capacity: int,
    node_budget: int,
    cap: I64,
    efforts: I64,
) -> tuple[int, I64, int]:
    """(status, offsets in bytes, nodes used) for one capacity in bytes.

    Buffer ``i`` is live in sections ``first[i] .. last[i]-1``; ``start_list`` (CSR by
    ``start_ptr``) lists the buffers whose first section is each section, by rank;
    ``twin_prev[c]`` is the interchangeable buffer to place before ``c`` (-1: none);
    ``span_of`` (CSR ``span_ptr``/``span_list``) groups buffers of the same lifetime;
    ``valley`` picks the valley a node branches on (``FEWEST``, ``LOWEST``, ``LEFTMOST``).
    A move and each check cost steps, ``(buffers + sections + 1) * discount`` steps make a
    node, and the search stops after ``node_budget`` nodes, or after ``cap[0]``, which
    another thread may lower while this one runs; racing, it keeps pace with the others
    (``solvers._pace_kernel``; ``efforts`` is empty alone). As in the canonical kernel, a plan found
    in ``k`` nodes is found under any limit of ``k`` or more, whenever the limit is lowered,
    so racing members agree with members taking turns.
    """
    n = size.shape[0]
    nsec = start_ptr.shape[0] - 1
    never = np.iinfo(np.int64).max // 4
    offset = np.full(n, -1, dtype=np.int64)
    height = np.zeros(nsec, dtype=np.int64)  # bytes decided per section
    rem = np.zeros(nsec, dtype=np.int64)  # bytes of unplaced buffers live per section
    free = 0
    for i in range(n):
        if size[i] == 0 or last[i] <= first[i]:
            offset[i] = 0  # occupies no byte, or is live nowhere
            continue
        free += 1
        for s in range(first[i], last[i]):
            rem[s] += size[i]
    for s in range(nsec):
        if rem[s] > capacity:
            return EXHAUSTED, offset, 0
    if free == 0:
        return FOUND, offset, 0
    slack = np.zeros(nsec, dtype=np.int64)  # bytes each section may waste above its height
    reach = np.zeros(nsec + 1, dtype=np.int64)
    low = np.zeros(nsec, dtype=np.int64)  # lowest offset an unplaced buffer live there takes
    sits = np.zeros(n, dtype=np.int64)  # lowest offset of each unplaced buffer, bytes
    # Per depth: the move that led there (buffer or WASTE), its section, the old height.
    room = free + nsec + 16
    move = np.zeros(room, dtype=np.int64)
    move_sec = np.zeros(room, dtype=np.int64)
    move_old = np.zeros(room, dtype=np.int64)
    kid_base = np.zeros(room, dtype=np.int64)
    kid_count = np.zeros(room, dtype=np.int64)
    kid_next = np.zeros(room, dtype=np.int64)
    kid_sec = np.zeros(room, dtype=np.int64)  # the lowest cell's section, per depth
    kid_rise = np.zeros(room, dtype=np.int64)  # where the waste child raises it, bytes
    group_lo = np.zeros(room, dtype=np.int64)  # the node's group: its first section
    group_hi = np.zeros(room, dtype=np.int64)  # and one past its last
    kid = np.empty(4 * n + 16, dtype=np.int64)
    by_first = np.argsort(first, kind="mergesort")
    unit = (n + nsec + 1) * discount  # steps charged as one node
    work = 0  # steps of dead-cell checks not yet charged as nodes
    placed = 0
    depth = 0
    nodes = 0
    paced = 0  # nodes when it last kept pace with the others
    while True:
        # Expand the node at ``depth``.
        count = 0
        ok = True
        # The active group: the leftmost run of sections the unplaced buffers' lifetimes
        # chain together. No other unplaced buffer is live there, so the node looks only
        # at it (``group_lo`` .. ``group_hi``-1).
        lo = -1
        hi = -1
        for t in range(n):
            c = by_first[t]
            if offset[c] >= 0:
                continue
            if lo < 0:
                lo, hi = first[c], last[c]
            elif first[c] < hi:
                hi = max(hi, last[c])
            else:
                break
        work += n
        group_lo[depth] = lo
        group_hi[depth] = hi
        for s in range(lo, hi):
            low[s] = never
        for c in range(n):
            if offset[c] >= 0 or first[c] < lo or first[c] >= hi:
                continue
            # Unsigned indices: no negative-index wrap check in the hottest loops.
            top = 0
            u = np.uint64(first[c])
            while u < np.uint64(last[c]):
                top = max(top, height[u])
                u += np.uint64(1)
            top = (top + alignment[c] - 1) & -alignment[c]
            sits[c] = top
            u = np.uint64(first[c])
            while u < np.uint64(last[c]):
                if low[u] > top:
                    low[u] = top
                u += np.uint64(1)
            work += 2 * (last[c] - first[c])
        for s in range(lo, hi):
            if rem[s] == 0:
                continue
            if low[s] + rem[s] > capacity:
                ok = False  # cells no unplaced buffer can fill, more than the slack
                break
            slack[s] = capacity - height[s] - rem[s]
        # Every valley's bottom row must be covered, and any valley can be branched on at
        # its first cell: the one with the fewest children is (lowest, then leftmost).
        best = -1
        best_end = -1
        fewest = never
        s = lo
        while s < hi and ok:
            if rem[s] == 0:
                s += 1
                continue
            h = height[s]
            end = s + 1
            while end < hi and rem[end] > 0 and height[end] == h:
                end += 1
            left = s == lo or rem[s - 1] == 0 or height[s - 1] > h
            right = end == hi or rem[end] == 0 or height[end] > h
            if left and right:
                work += _bottom_row(
                    s, end, h, size, alignment, last, start_ptr, start_list, offset, slack, reach
                )
                if reach[s] == 0:
                    ok = False
                    break
                kids, rise = _children(
                    s,
                    end,
                    h,
                    size,
                    alignment,
                    first,
                    last,
                    start_ptr,
                    start_list,
                    twin_prev,
                    rank,
                    span_of,
                    span_ptr,
                    span_list,
                    offset,
                    sits,
                    rem,
                    reach,
                    capacity,
                    kid,
                    kid_base[depth],
                    False,
                )
                work += n
                if kids == 0:
                    ok = False
                    break
                if (
                    best < 0
                    or (
                        valley == FEWEST
                        and (kids < fewest or (kids == fewest and h < height[best]))
                    )
                    or (valley == LOWEST and h < height[best])
                ):
                    best, best_end, fewest = s, end, kids
            s = end
        if ok:
            h = height[best]
            _bottom_row(
                best,
                best_end,
                h,
                size,
                alignment,
                last,
                start_ptr,
                start_list,
                offset,
                slack,
                reach,
            )
            kid = _grow(kid, kid_base[depth] + start_ptr[best + 1] - start_ptr[best] + 1)
            count, rise = _children(
                best,
                best_end,
                h,
                size,
                alignment,
                first,
                last,
                start_ptr,
                start_list,
                twin_prev,
                rank,
                span_of,
                span_ptr,
                span_list,
                offset,
                sits,
                rem,
                reach,
                capacity,
                kid,
                kid_base[depth],
                True,
            )
            kid_sec[depth] = best
            kid_rise[depth] = rise
        kid_count[depth] = count
        kid_next[depth] = 0
        if work >= unit:
            nodes += work // unit
            work %= unit
        # Descend into the next child, undoing the moves of nodes with none left.
        while kid_next[depth] == kid_count[depth]:
            # The node fails for what lies in its group, which only the nearest node whose
            # group meets it can change: the nodes between worked on other sections.
            lo = group_lo[depth]
            hi = group_hi[depth]
            target = depth - 1
            while target >= 0 and (group_hi[target] <= lo or hi <= group_lo[target]):
                target -= 1
            if target < 0:
                return EXHAUSTED, offset, nodes
            while depth > target:
                b = move[depth]
                s0 = move_sec[depth]
                if b == WASTE:
                    height[s0] = move_old[depth]
                else:
                    for s in range(first[b], last[b]):
                        height[s] = move_old[depth]
                        rem[s] += size[b]
                    offset[b] = -1
                    placed -= 1
                depth -= 1
        if nodes >= node_budget or nodes >= cap[0]:
            return OUT_OF_NODES, offset, nodes
        if efforts.size > 0 and nodes >= paced + EVERY:
            paced = nodes
            if not keep_pace(efforts, cap, nodes):
                return OUT_OF_NODES, offset, nodes
        work += n + nsec + 1  # the move itself
        t = kid_base[depth] + kid_next[depth]
        kid_next[depth] += 1
        b = kid[t]
        s0 = kid_sec[depth]
        h = height[s0]
        next_base = kid_base[depth] + kid_count[depth]
        depth += 1
        if depth + 1 >= move.shape[0]:
            need = depth + 2
            move = _grow(move, need)
            move_sec = _grow(move_sec, need)
            move_old = _grow(move_old, need)
            kid_base = _grow(kid_base, need)
            kid_count = _grow(kid_count, need)
            kid_next = _grow(kid_next, need)
            kid_sec = _grow(kid_sec, need)
            kid_rise = _grow(kid_rise, need)
            group_lo = _grow(group_lo, need)
            group_hi = _grow(group_hi, need)
        move[depth] = b
        move_sec[depth] = s0
        move_old[depth] = h
        kid_base[depth] = next_base
        if b == WASTE:
            height[s0] = kid_rise[depth - 1]
        else:
            offset[b] = h
            for s in range(first[b], last[b]):
                height[s] = h + size[b]
                rem[s] -= size[b]
            placed += 1
            if placed == free:
                # The last move counts as a node, as in the canonical kernel: a plan found
                # in ``k`` nodes is found under any limit of ``k`` or more.
                return FOUND, offset, nodes + 1
