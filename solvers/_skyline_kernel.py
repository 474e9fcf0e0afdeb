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

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.solvers._pace_kernel import halts
from planner.solvers._search_kernel import EXHAUSTED, FOUND, OUT_OF_NODES, grow_rows

I64 = npt.NDArray[np.int64]

WASTE = -1  # a child that leaves the lowest cell empty
# Which valley a node branches on (all are complete; they differ in what they find fast):
FEWEST = 0  # the one with the fewest children, then the lowest
LOWEST = 1  # the lowest, then the leftmost
LEFTMOST = 2  # the leftmost
NEVER = np.iinfo(np.int64).max // 4  # bytes: above any offset

# Columns of the search stack, one row per depth: the move that led there (a buffer or
# WASTE), its section and the height it replaced; where the node's children start in the
# children list, how many it has and the next to try; the section of its lowest cell and
# the height the waste child raises it to; its group's first section and one past its last.
MOVE, MOVE_SEC, MOVE_OLD, KID_BASE, KID_COUNT, KID_NEXT, KID_SEC, KID_RISE = range(8)
GROUP_LO, GROUP_HI = 8, 9
FRAME = 10
SEARCH = 2  # no status yet: the search goes on (none of FOUND, EXHAUSTED, OUT_OF_NODES)


class SkylineArrays(NamedTuple):
    """The instance, fixed during a search (request order).

    Buffer ``i`` is live in sections ``first[i] .. last[i]-1``; ``start_list`` (CSR by
    ``start_ptr``) lists the buffers whose first section is each section, by rank;
    ``twin_prev[c]`` is the interchangeable buffer to place before ``c`` (-1: none);
    ``span_of`` (CSR ``span_ptr``/``span_list``) groups buffers of the same lifetime."""

    size: I64
    alignment: I64
    first: I64
    last: I64
    start_ptr: I64
    start_list: I64
    twin_prev: I64
    rank: I64
    span_of: I64
    span_ptr: I64
    span_list: I64


class SkylineState(NamedTuple):
    """What a search changes as it moves, per buffer or per section (bytes)."""

    offset: I64  # per buffer: its offset, -1 while unplaced
    height: I64  # per section: bytes decided
    rem: I64  # per section: bytes of unplaced buffers live there
    slack: I64  # per section: bytes it may waste above its height
    reach: I64  # per section + 1: whether the valley's bottom row can be covered from there
    low: I64  # per section: the lowest offset an unplaced buffer live there takes
    sits: I64  # per buffer: the lowest offset it can take while unplaced


@njit
def _grow(a: I64, need: int) -> I64:
    """``a`` with room for at least ``need`` values, the first ``a.size`` kept."""
    if need <= a.shape[0]:
        return a
    b = np.empty(max(2 * a.shape[0], need), dtype=np.int64)
    b[: a.shape[0]] = a
    return b


@njit(borrows=True)
def _bottom_row(inst: SkylineArrays, st: SkylineState, a: int, b: int, h: int) -> int:
    """Whether the bottom row of the valley ``a .. b-1`` (sections, all at ``h`` bytes, both
    sides higher) can be covered: by unplaced buffers aligned at ``h`` whose lifetimes lie in
    it, side by side, and waste in sections with slack. ``st.reach[x]`` (x in a .. b) becomes
    1 where sections ``x .. b-1`` can be covered so; returns the steps taken."""
    reach = st.reach
    steps = 0
    reach[b] = 1
    for x in range(b - 1, a - 1, -1):
        reach[x] = 1 if st.slack[x] > 0 and reach[x + 1] == 1 else 0
        if reach[x] == 1:
            continue
        for k in range(inst.start_ptr[x], inst.start_ptr[x + 1]):
            c = inst.start_list[k]
            steps += 1
            aligned = (h & (inst.alignment[c] - 1)) == 0
            if st.offset[c] < 0 and inst.last[c] <= b and aligned and reach[inst.last[c]] == 1:
                reach[x] = 1
                break
    return steps


@njit(borrows=True)
def _stacked_later(inst: SkylineArrays, offset: I64, c: int, h: int) -> bool:
    """Whether a placed buffer with the same lifetime as ``c`` and a later rank ends at
    ``h`` and could swap places with ``c`` (both stay aligned): the two would form a block
    whose order nothing else sees, so only the order by rank is searched."""
    size, alignment = inst.size, inst.alignment
    span = inst.span_of[c]
    for k in range(inst.span_ptr[span], inst.span_ptr[span + 1]):
        p = inst.span_list[k]
        o = offset[p]
        if o < 0 or o + size[p] != h or inst.rank[p] < inst.rank[c]:
            continue
        if (o & (alignment[c] - 1)) == 0 and ((o + size[c]) & (alignment[p] - 1)) == 0:
            return True
    return False


@njit(borrows=True)
def _children(
    inst: SkylineArrays,
    st: SkylineState,
    a: int,
    b: int,
    h: int,
    capacity: int,
    kid: I64,
    base: int,
    write: bool,
) -> tuple[int, int]:
    """(children, waste height) of the first cell of the valley ``a .. b-1`` at ``h`` bytes,
    after ``_bottom_row`` filled ``st.reach``: the unplaced buffers starting there that fit
    the valley, sit at ``h`` and leave a row that can be completed (in rank order; written to
    ``kid`` from ``base`` if ``write``), then waste, if the cell may stay empty: the section
    rises to the lowest offset a buffer live there can still take."""
    offset, reach, rem, sits = st.offset, st.reach, st.rem, st.sits
    last = inst.last
    count = 0
    for k in range(inst.start_ptr[a], inst.start_ptr[a + 1]):
        c = inst.start_list[k]
        if offset[c] >= 0 or last[c] > b or sits[c] != h or reach[last[c]] == 0:
            continue
        twin = inst.twin_prev[c]
        if twin >= 0 and offset[twin] < 0:
            continue
        if _stacked_later(inst, offset, c, h):
            continue
        if write:
            kid[base + count] = c
        count += 1
    rise = NEVER
    # Every buffer live there sits at ``h`` or higher and the waste rises above ``h``: with
    # no byte of slack above the bytes still to place, the cell cannot stay empty.
    if reach[a + 1] == 1 and h + 1 + rem[a] <= capacity:
        for c in range(inst.size.shape[0]):
            if offset[c] >= 0 or inst.first[c] > a or last[c] <= a:
                continue
            o = sits[c]
            if o == h:
                o = (h + inst.alignment[c]) & -inst.alignment[c]
            rise = min(rise, o)
        if rise + rem[a] <= capacity:
            if write:
                kid[base + count] = WASTE
            count += 1
    return count, rise


@njit(borrows=True)
def _active_group(inst: SkylineArrays, offset: I64, by_first: I64) -> tuple[int, int]:
    """The leftmost run of sections the unplaced buffers' lifetimes chain together (first,
    one past the last): no other unplaced buffer is live there, so a node looks only at it."""
    lo = -1
    hi = -1
    for t in range(by_first.shape[0]):
        c = by_first[t]
        if offset[c] >= 0:
            continue
        if lo < 0:
            lo, hi = inst.first[c], inst.last[c]
        elif inst.first[c] < hi:
            hi = max(hi, inst.last[c])
        else:
            break
    return lo, hi


@njit(borrows=True)
def _seat(inst: SkylineArrays, st: SkylineState, lo: int, hi: int) -> int:
    """Where each unplaced buffer of the group sits at the lowest (``st.sits``: aligned above
    the highest section of its lifetime), and per section the lowest of those
    (``st.low``); returns the steps taken."""
    first, last, height, low = inst.first, inst.last, st.height, st.low
    work = 0
    for s in range(lo, hi):
        low[s] = NEVER
    for c in range(inst.size.shape[0]):
        if st.offset[c] >= 0 or first[c] < lo or first[c] >= hi:
            continue
        # Slices: the hottest loops, compiled to vector instructions.
        top = 0
        for h in height[first[c] : last[c]]:
            top = max(top, h)
        top = (top + inst.alignment[c] - 1) & -inst.alignment[c]
        st.sits[c] = top
        live = low[first[c] : last[c]]
        np.minimum(live, top, live)
        work += 2 * (last[c] - first[c])
    return work


@njit(borrows=True)
def _within_slack(st: SkylineState, lo: int, hi: int, capacity: int) -> bool:
    """Whether every section of the group can hold its unplaced bytes above the cells no
    unplaced buffer can fill (the dead-cell pruning); sets each section's slack."""
    for s in range(lo, hi):
        if st.rem[s] == 0:
            continue
        if st.low[s] + st.rem[s] > capacity:
            return False
        st.slack[s] = capacity - st.height[s] - st.rem[s]
    return True


@njit(borrows=True)
def _pick_valley(
    inst: SkylineArrays,
    st: SkylineState,
    lo: int,
    hi: int,
    valley: int,
    capacity: int,
    kid: I64,
    base: int,
) -> tuple[int, int, int]:
    """(first section, one past the last, steps taken) of the valley to branch on; -1 when
    some valley's bottom row cannot be covered or its first cell has no child (the node
    fails). Every valley's bottom row must be covered, and any valley can be branched on at
    its first cell: ``valley`` says which (``FEWEST``, ``LOWEST``, ``LEFTMOST``)."""
    rem, height = st.rem, st.height
    n = inst.size.shape[0]
    work = 0
    best = -1
    best_end = -1
    fewest = NEVER
    s = lo
    while s < hi:
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
            work += _bottom_row(inst, st, s, end, h)
            if st.reach[s] == 0:
                return -1, -1, work
            kids, _ = _children(inst, st, s, end, h, capacity, kid, base, False)
            work += n
            if kids == 0:
                return -1, -1, work
            if (
                best < 0
                or (valley == FEWEST and (kids < fewest or (kids == fewest and h < height[best])))
                or (valley == LOWEST and h < height[best])
            ):
                best, best_end, fewest = s, end, kids
        s = end
    return best, best_end, work


@njit
def _expand(
    inst: SkylineArrays,
    st: SkylineState,
    frames: npt.NDArray[np.int64],
    depth: int,
    kid: I64,
    by_first: I64,
    valley: int,
    capacity: int,
) -> tuple[int, I64]:
    """Writes the children of the node at ``depth`` (its row of ``frames``, and ``kid``);
    returns the steps taken and ``kid``, grown if it had to be."""
    n = inst.size.shape[0]
    lo, hi = _active_group(inst, st.offset, by_first)
    work = n
    frames[depth, GROUP_LO] = lo
    frames[depth, GROUP_HI] = hi
    work += _seat(inst, st, lo, hi)
    count = 0
    if _within_slack(st, lo, hi, capacity):
        base = frames[depth, KID_BASE]
        best, best_end, steps = _pick_valley(inst, st, lo, hi, valley, capacity, kid, base)
        work += steps
        if best >= 0:
            h = st.height[best]
            _bottom_row(inst, st, best, best_end, h)
            kid = _grow(kid, base + inst.start_ptr[best + 1] - inst.start_ptr[best] + 1)
            count, rise = _children(inst, st, best, best_end, h, capacity, kid, base, True)
            frames[depth, KID_SEC] = best
            frames[depth, KID_RISE] = rise
    frames[depth, KID_COUNT] = count
    frames[depth, KID_NEXT] = 0
    return work, kid


@njit(borrows=True)
def _backtrack(
    inst: SkylineArrays, st: SkylineState, frames: npt.NDArray[np.int64], depth: int
) -> tuple[int, int]:
    """(depth, buffers unplaced) after undoing the moves of the nodes with no child left:
    depth -1 when the search is exhausted. A node fails for what lies in its group, which
    only the nearest node whose group meets it can change: the nodes between worked on other
    sections."""
    unplaced = 0
    while frames[depth, KID_NEXT] == frames[depth, KID_COUNT]:
        lo = frames[depth, GROUP_LO]
        hi = frames[depth, GROUP_HI]
        target = depth - 1
        while target >= 0 and (frames[target, GROUP_HI] <= lo or hi <= frames[target, GROUP_LO]):
            target -= 1
        if target < 0:
            return -1, unplaced
        while depth > target:
            b = frames[depth, MOVE]
            s0 = frames[depth, MOVE_SEC]
            if b == WASTE:
                st.height[s0] = frames[depth, MOVE_OLD]
            else:
                for s in range(inst.first[b], inst.last[b]):
                    st.height[s] = frames[depth, MOVE_OLD]
                    st.rem[s] += inst.size[b]
                st.offset[b] = -1
                unplaced += 1
            depth -= 1
    return depth, unplaced


@njit
def _descend(
    inst: SkylineArrays, st: SkylineState, frames: npt.NDArray[np.int64], depth: int, kid: I64
) -> tuple[int, bool, npt.NDArray[np.int64]]:
    """Makes the next move of the node at ``depth``: (new depth, whether a buffer was
    placed, ``frames`` grown if it had to be)."""
    t = frames[depth, KID_BASE] + frames[depth, KID_NEXT]
    frames[depth, KID_NEXT] += 1
    b = kid[t]
    s0 = frames[depth, KID_SEC]
    h = st.height[s0]
    next_base = frames[depth, KID_BASE] + frames[depth, KID_COUNT]
    rise = frames[depth, KID_RISE]
    depth += 1
    frames = grow_rows(frames, depth + 2)
    frames[depth, MOVE] = b
    frames[depth, MOVE_SEC] = s0
    frames[depth, MOVE_OLD] = h
    frames[depth, KID_BASE] = next_base
    if b == WASTE:
        st.height[s0] = rise
        return depth, False, frames
    st.offset[b] = h
    for s in range(inst.first[b], inst.last[b]):
        st.height[s] = h + inst.size[b]
        st.rem[s] -= inst.size[b]
    return depth, True, frames


@njit(borrows=True)
def _start(inst: SkylineArrays, st: SkylineState, capacity: int) -> tuple[int, int]:
    """(status, or ``SEARCH`` to search on; buffers to place): buffers that occupy no byte,
    or are live nowhere, go at 0; a section whose live bytes exceed the capacity ends it."""
    free = 0
    for i in range(inst.size.shape[0]):
        if inst.size[i] == 0 or inst.last[i] <= inst.first[i]:
            st.offset[i] = 0
            continue
        free += 1
        for s in range(inst.first[i], inst.last[i]):
            st.rem[s] += inst.size[i]
    for s in range(st.rem.shape[0]):
        if st.rem[s] > capacity:
            return EXHAUSTED, free
    return (FOUND if free == 0 else SEARCH), free


@njit
def decide_skyline(
    inst: SkylineArrays,
    valley: int,
    discount: int,
    capacity: int,
    node_budget: int,
    cap: I64,
    efforts: I64,
) -> tuple[int, I64, int]:
    """(status, offsets in bytes, nodes used) for one capacity in bytes.

    ``valley`` picks the valley a node branches on (``FEWEST``, ``LOWEST``, ``LEFTMOST``).
    A move and each check cost steps, ``(buffers + sections + 1) * discount`` steps make a
    node, and the search stops after ``node_budget`` nodes, or after ``cap[0]``, which
    another thread may lower while this one runs; racing, it keeps pace with the others
    (``solvers._pace_kernel``; ``efforts`` is empty alone). As in the canonical kernel, a plan
    found in ``k`` nodes is found under any limit of ``k`` or more, whenever the limit is
    lowered, so racing members agree with members taking turns.
    """
    n = inst.size.shape[0]
    nsec = inst.start_ptr.shape[0] - 1
    z = np.zeros
    st = SkylineState(
        np.full(n, -1, dtype=np.int64),
        z(nsec, dtype=np.int64),
        z(nsec, dtype=np.int64),
        z(nsec, dtype=np.int64),
        z(nsec + 1, dtype=np.int64),
        z(nsec, dtype=np.int64),
        z(n, dtype=np.int64),
    )
    status, free = _start(inst, st, capacity)
    if status != SEARCH:
        return status, st.offset, 0
    frames = z((free + nsec + 16, FRAME), dtype=np.int64)
    kid = np.empty(4 * n + 16, dtype=np.int64)
    by_first = np.argsort(inst.first, kind="mergesort")
    unit = (n + nsec + 1) * discount  # steps charged as one node
    work = 0  # steps of checks not yet charged as nodes
    placed = 0
    depth = 0
    nodes = 0
    paced = 0  # nodes when it last kept pace with the others
    while True:
        steps, kid = _expand(inst, st, frames, depth, kid, by_first, valley, capacity)
        work += steps
        if work >= unit:
            nodes += work // unit
            work %= unit
        depth, unplaced = _backtrack(inst, st, frames, depth)
        if depth < 0:
            return EXHAUSTED, st.offset, nodes
        placed -= unplaced
        halt, paced = halts(nodes, node_budget, cap, efforts, paced)
        if halt:
            return OUT_OF_NODES, st.offset, nodes
        work += n + nsec + 1  # the move itself
        depth, put, frames = _descend(inst, st, frames, depth, kid)
        if put:
            placed += 1
            if placed == free:
                # The last move counts as a node, as in the canonical kernel: a plan found
                # in ``k`` nodes is found under any limit of ``k`` or more.
                return FOUND, st.offset, nodes + 1
