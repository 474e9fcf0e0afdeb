"""Branch-and-bound decision kernel for the exact search (compiled with numba).

Decides whether every free buffer fits below ``capacity`` bytes, after the published ideas of
MiniMalloc (Moffitt, ASPLOS 2023); no code was taken from it.

**Canonical placements.** Repeatedly moving a free buffer to the lowest feasible offset given
all the others ends (offsets only fall) no higher than where it began. In that fixpoint,
sorted by (offset, rank), each free buffer sits at its *candidate*: the lowest aligned offset
at or above the tops of the earlier free buffers it conflicts with that clears every pinned
buffer it conflicts with. So the search places buffers in non-decreasing (offset, rank), each
at its candidate, and branches on which buffer comes next. Only buffers whose candidate comes
after the last placement, (candidate, rank) > (floor, last rank), are children; the others
*wait* until a buffer placed under them lifts them. Children are tried by (candidate, rank),
so the first dive is a lowest-offset greedy. Branching only on the buffers at the minimum
candidate would not be complete: sometimes the optimum leaves that offset empty.

**Pruning** (each a proof, so an exhausted search proves infeasibility):

- a buffer whose candidate + size > capacity fails the node (candidates only rise);
- a waiting buffer with no unplaced free neighbour can never be lifted: the node fails;
- sections: between consecutive distinct time points, the unplaced free buffers live there
  lie disjoint above max(floor, height of the placed ones there), and clear the pinned ones:
  that level + their sizes + the pinned bytes above it must stay <= capacity;
- padding: above that level the unplaced buffers of a section stack only as tightly as their
  alignments allow. Where the section's slack is below the most padding they could need, a
  small search (``solvers._stack_kernel``) checks that some order pads no more than the
  slack; its steps are charged as nodes, so the budget still bounds the time. Without it, a
  capacity at the clique bound (where alignment, not size, sets the optimum) is decided only
  after every order of the crowded section's buffers fails at its top;
- dominance: interchangeable buffers (same interval, size, alignment) go in rank order;
- gap dominance (MiniMalloc's): let ``gap`` be the lowest candidate + size of any unplaced
  buffer ``d``. A child at or above ``gap`` is skipped: every later placement lies at or
  above it, so ``d`` would end above a free gap it could drop into, and a fixpoint plan
  (which the search reaches another way, never higher) has no such gap.

**Doomed children.** Most nodes of a hard decision fail at once, on the section bound, and
expanding one costs a pass over every unplaced buffer. Bounds only rise below a node, so the
node already knows a lower bound on each section's level in a child's node: its own floor
there, the child's offset and, where the child lives, its top. A child whose node would fail
on that alone is passed over for the one node its expansion would have cost, at a cost in
its own sections (``_doomed``); the search and its node count stay exactly as they were.

**Decomposition in time.** When the unplaced buffers of a node split into groups that share no
time point (once every buffer spanning a cut is placed), the groups are independent: the
placed buffers fix everything each group sees, and merging the groups' own canonical
sequences by (offset, rank) gives one of the whole. So the node solves them one after the
other, each in its own *scope* from the node's floor, and when a later group fails, no
choice made for an earlier group can help: the search backjumps to the node that split and
fails it, instead of retrying the earlier group's alternatives. Gap dominance, waiting and
the section bound look only at the active scope, except at the node that splits in
MiniMalloc's orders: as MiniMalloc checks a placement before it decomposes, the section
bound there covers every new sub-problem, each of its buffers at or above that node's floor.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.solvers._pace_kernel import halts
from planner.solvers._stack_kernel import new_memo, stack_fits

I64 = npt.NDArray[np.int64]
Rows = npt.NDArray[np.int64]  # a table: one row per entry, a column per field

FOUND = 1  # offsets hold a plan within the capacity
EXHAUSTED = 0  # proved: no plan fits the capacity
OUT_OF_NODES = -1  # the node budget ran out first; nothing proved
STACK_STEPS = 2_000  # steps of one padding check; undecided, it does not prune
NEVER = np.iinfo(np.int64).max // 4  # bytes: above any offset
STATS = 4  # values ``decide`` counts in ``stats`` (see ``SearchState.stats``)

# Columns of the search stack, one row per depth d (d placements made): the buffer placed
# last, its offset (the node's floor, bytes) and rank; the undo log's length before it; where
# the node's children start in the children table, how many it has and the next to try; the
# scope it works on; the depth its failure fails too (-1: only its parent); the scopes it
# split off (first, one past the last); the rank log's length before it; whether the buffer
# placed last had no unplaced neighbour (1).
PLACED, FLOOR, FLOOR_RANK, MARK, KID_BASE, KID_COUNT, KID_NEXT = range(7)
ACTIVE, JUMP, SPLIT_LO, SPLIT_HI, RK_MARK, HATLESS = range(7, 13)
FRAME = 13
# Columns of the scope table, one row per scope: its parent, its next sibling (-1: none), the
# depth of the node that split it off, the floor its buffers start from (bytes) and its rank.
PARENT, NEXT, SPLIT, SCOPE_FLOOR, SCOPE_FLOOR_RANK = range(5)
SCOPE = 5


class SearchArrays(NamedTuple):
    """The instance, fixed during a search (request order); ``decide`` reads its arrays out
    once and hands each step the ones it uses.

    ``by_rank`` lists every buffer by branching priority and ``rank`` is its inverse;
    ``twin_prev[c]`` is the interchangeable buffer that must be placed before ``c`` (-1:
    none). ``adj`` (CSR) lists each buffer's conflicting buffers, smallest first,
    ``pin_adj`` the pinned ones among them. Buffer ``i`` is live in sections ``first[i] ..
    last[i]-1``; ``sec_pin`` (CSR) lists the pinned buffers live in each section;
    ``sec_free`` (CSR) the free ones, for the padding check where ``sec_period`` is not 0
    (see ``solvers.search._padding_lists``). A sub-problem is ranked by ``pre_rank``, then
    the fullest section, then ``post_rank`` (empty: it keeps its ranking); ``end_at[x]`` is
    not 0 where some buffer ends at section boundary ``x`` (empty: not MiniMalloc's order)."""

    size: I64  # bytes
    alignment: I64  # bytes, a power of two
    pinned: I64  # offset in bytes, -1: free
    by_rank: I64
    rank: I64
    twin_prev: I64
    adj_ptr: I64
    adj: I64
    pin_ptr: I64
    pin_adj: I64
    first: I64
    last: I64
    sec_pin_ptr: I64
    sec_pin: I64
    sec_free_ptr: I64
    sec_free: I64
    cls: I64
    sec_period: I64
    sec_max_pad: I64
    pre_rank: I64  # a sub-problem's ranking: the keys before "T"
    post_rank: I64  # the keys after "T", then the ties; empty: the order has no "T"
    end_at: I64  # per section boundary: 1 where some buffer ends; empty: not MiniMalloc's order


class SearchState(NamedTuple):
    """What one decision changes as it searches (made by ``_new_state``), per buffer, per
    section, per depth (``frames``) and per scope (``scopes``); the steps take it whole. The
    children table and the rank log grow, so ``decide`` holds them apart."""

    offset: I64  # per buffer: bytes; -1 while unplaced
    rank: I64  # per buffer: its priority now (sub-problems are ranked afresh)
    by_rank: I64  # the buffers by priority now
    lab: I64  # per buffer: its scope
    base: I64  # per buffer: max top of its placed free neighbours, bytes
    unplaced_nbrs: I64  # per buffer: its unplaced free neighbours
    lifts: I64  # per buffer: lowest top a placement can lift it to, bytes
    cand: I64  # per buffer: its candidate while unplaced, bytes
    comp_of: I64  # per buffer: its group in a splitting scope
    members: I64  # a sub-problem's or a padding check's buffers
    comp_min: I64  # per group of a splitting scope: its highest priority
    by_first: I64  # the buffers by first section
    rem: I64  # per section: bytes of unplaced free buffers live there
    height: I64  # per section: max top of placed free buffers live there, bytes
    section_floor: I64  # per section: lowest bound of an unplaced buffer live there, bytes
    split_level: I64  # per section, at a node that splits: bytes
    spanned: I64  # per section boundary: the unplaced free buffers live on both sides
    scratch: Rows  # the node's children by rank, their candidates, whether each fails at once
    trail: Rows  # undo log of bases and heights
    frames: Rows  # the search stack: a row per depth
    scopes: Rows  # the scope table: a row per scope
    memo: I64  # the padding checks' table (empty: never checked)
    stats: I64  # padding checks, their steps, the nodes they pruned, doomed children passed over


@njit(borrows=True)
def _align_up(value: int, alignment: int) -> int:
    # A mask, not a division: every alignment is a power of two (an integer division costs
    # more than the rest of a candidate's work).
    return (value + alignment - 1) & -alignment


@njit
def grow_rows(a: Rows, need: int) -> Rows:
    """``a`` with room for at least ``need`` rows (twice its rows at least), the rows kept
    and the new ones 0."""
    if need <= a.shape[0]:
        return a
    b = np.zeros((max(2 * a.shape[0], need), a.shape[1]), dtype=np.int64)
    b[: a.shape[0]] = a
    return b


@njit(borrows=True)
def _candidate(
    c: int, base: I64, size: I64, alignment: I64, offset: I64, pin_ptr: I64, pin_adj: I64
) -> int:
    """Lowest aligned offset >= ``base[c]`` clearing the pinned buffers ``c`` conflicts with."""
    o = _align_up(base[c], alignment[c])
    moved = True
    while moved:
        moved = False
        for k in range(pin_ptr[c], pin_ptr[c + 1]):
            p = pin_adj[k]
            if offset[p] < o + size[c] and o < offset[p] + size[p]:
                o = _align_up(offset[p] + size[p], alignment[c])
                moved = True
    return o


@njit(borrows=True)
def _pins_overflow(size: I64, pinned: I64, capacity: int) -> bool:
    """Whether a pinned buffer ends above ``capacity`` bytes."""
    n: int = size.shape[0]
    p = 0
    while p < n and (pinned[p] < 0 or pinned[p] + size[p] <= capacity):
        p += 1
    return p < n


@njit(borrows=True)
def _count_free(inst: SearchArrays, rem: I64, spanned: I64, unplaced_nbrs: I64) -> tuple[int, int]:
    """(free buffers, undo log rows a search can need); fills, before any placement, each
    section's unplaced bytes (``rem``), each boundary's buffers live on both sides
    (``spanned``) and each buffer's free neighbours (``unplaced_nbrs``)."""
    pinned, first, last, adj_ptr, adj = inst.pinned, inst.first, inst.last, inst.adj_ptr, inst.adj
    free = 0
    trail_len = 0
    for i in range(inst.size.shape[0]):
        if pinned[i] >= 0:
            continue
        free += 1
        for s in range(first[i], last[i]):
            rem[s] += inst.size[i]
        for s in range(first[i] + 1, last[i]):
            spanned[s] += 1
        trail_len += last[i] - first[i]
        for k in range(adj_ptr[i], adj_ptr[i + 1]):
            if pinned[adj[k]] < 0:
                unplaced_nbrs[i] += 1
                trail_len += 1
    return free, trail_len


@njit
def _new_frames(free: int) -> Rows:
    """The search stack: a row per depth, nothing placed."""
    frames = np.zeros((free + 1, FRAME), dtype=np.int64)
    frames[:, PLACED] = -1
    frames[:, FLOOR_RANK] = -1
    frames[:, JUMP] = -1
    return frames


@njit
def _new_scopes(free: int) -> Rows:
    """The scope table: room for every scope a search can open; scope 0 holds every free
    buffer."""
    scopes = np.zeros((2 * free + 2, SCOPE), dtype=np.int64)
    scopes[:, PARENT] = -1
    scopes[:, NEXT] = -1
    scopes[:, SCOPE_FLOOR_RANK] = -1
    return scopes


@njit(inline=True)
def _new_state(inst: SearchArrays, stats: I64) -> tuple[SearchState, int]:
    """(the state of a search from no placement, free buffers to place)."""
    n = inst.size.shape[0]
    nsec = inst.sec_pin_ptr.shape[0] - 1
    rem = np.zeros(nsec, dtype=np.int64)
    spanned = np.zeros(nsec + 1, dtype=np.int64)
    unplaced_nbrs = np.zeros(n, dtype=np.int64)
    free, trail_len = _count_free(inst, rem, spanned, unplaced_nbrs)
    z = np.zeros
    checked = inst.sec_period.size > 0 and inst.sec_period.max() > 0
    st = SearchState(
        inst.pinned.copy(),
        inst.rank.copy(),
        inst.by_rank.copy(),
        z(n, dtype=np.int64),
        z(n, dtype=np.int64),
        unplaced_nbrs,
        z(n, dtype=np.int64),
        z(n, dtype=np.int64),
        z(n, dtype=np.int64),
        z(n, dtype=np.int64),
        z(n, dtype=np.int64),
        np.argsort(inst.first, kind="mergesort"),
        rem,
        z(nsec, dtype=np.int64),
        z(nsec, dtype=np.int64),
        z(nsec, dtype=np.int64),
        spanned,
        np.empty((3, n), dtype=np.int64),
        np.empty((trail_len + 1, 2), dtype=np.int64),
        _new_frames(free),
        _new_scopes(free),
        new_memo(checked),
        stats,
    )
    return st, free


@njit(borrows=True)
def _busy(offset: I64, lab: I64, scope: int) -> bool:
    """Whether ``scope`` has an unplaced buffer left."""
    n: int = offset.shape[0]
    c = 0
    while c < n and (offset[c] >= 0 or lab[c] != scope):
        c += 1
    return c < n


@njit(borrows=True)
def _scope(offset: I64, lab: I64, frames: Rows, scopes: Rows, depth: int) -> tuple[int, int, int]:
    """(scope, floor, floor rank) the node at ``depth`` goes on with: a finished scope hands
    over to its next sibling (whose failure then fails the node that split it off:
    ``JUMP``) or to its parent."""
    sc = frames[depth, ACTIVE]
    lo = frames[depth, FLOOR]
    lo_rank = frames[depth, FLOOR_RANK]
    frames[depth, JUMP] = -1
    while not _busy(offset, lab, sc):
        if scopes[sc, NEXT] >= 0:
            sc = scopes[sc, NEXT]
            frames[depth, JUMP] = scopes[sc, SPLIT]
            lo = scopes[sc, SCOPE_FLOOR]
            lo_rank = scopes[sc, SCOPE_FLOOR_RANK]
        else:
            sc = scopes[sc, PARENT]
    return sc, lo, lo_rank


@njit(borrows=True)
def _stays_whole(b: int, first: I64, last: I64, spanned: I64, end_at: I64) -> bool:
    """Whether a scope that was one group stays one without buffer ``b``, placed since: it
    falls apart only at a boundary ``b`` alone spanned (with ``end_at``, MiniMalloc's
    decomposition, one where some buffer ends)."""
    published = end_at.size > 0
    for x in range(first[b] + 1, last[b]):
        if spanned[x] == 0 and (not published or end_at[x] != 0):
            return False
    return True


@njit(borrows=True)
def _groups(inst: SearchArrays, st: SearchState, sc: int) -> int:
    """Groups of the unplaced buffers of scope ``sc`` that share no section, earliest first:
    each buffer's group in ``st.comp_of``, each group's highest priority (lowest rank) in
    ``st.comp_min``."""
    offset, lab, rank, first, last = st.offset, st.lab, st.rank, inst.first, inst.last
    comp_min = st.comp_min
    groups = 0
    reach = -1
    for t in range(st.by_first.shape[0]):
        c = st.by_first[t]
        if offset[c] >= 0 or lab[c] != sc:
            continue
        if first[c] >= reach:
            comp_min[groups] = rank[c]
            groups += 1
        elif rank[c] < comp_min[groups - 1]:
            comp_min[groups - 1] = rank[c]
        st.comp_of[c] = groups - 1
        reach = max(reach, last[c])
    return groups


@njit
def _open_scopes(
    scopes: Rows,
    comp_min: I64,
    groups: int,
    lo_scope: int,
    sc: int,
    depth: int,
    lo: int,
    lo_rank: int,
    published: bool,
) -> I64:
    """Scopes ``lo_scope ..`` for the ``groups`` groups of ``sc``, split at ``depth``; returns
    each group's scope. MiniMalloc's decomposition (``published``) takes them earliest first
    in time, each from the lowest floor; else the group holding the highest-priority buffer
    goes first and each starts from the node's floor ``lo`` (rank ``lo_rank``)."""
    order = np.arange(groups) if published else np.argsort(comp_min[:groups], kind="mergesort")
    comp_scope = np.empty(groups, dtype=np.int64)
    for t in range(groups):
        g_id = lo_scope + t
        comp_scope[order[t]] = g_id
        scopes[g_id, PARENT] = sc
        scopes[g_id, NEXT] = g_id + 1 if t + 1 < groups else -1
        scopes[g_id, SPLIT] = depth
        scopes[g_id, SCOPE_FLOOR] = 0 if published else lo
        scopes[g_id, SCOPE_FLOOR_RANK] = -1 if published else lo_rank
    return comp_scope


@njit(borrows=True)
def _relabel(offset: I64, lab: I64, comp_of: I64, comp_scope: I64, sc: int) -> None:
    """Moves each unplaced buffer of scope ``sc`` to its group's scope."""
    for c in range(offset.shape[0]):
        if offset[c] < 0 and lab[c] == sc:
            lab[c] = comp_scope[comp_of[c]]


@njit(borrows=True)
def _gather(offset: I64, lab: I64, scope: int, members: I64) -> int:
    """Writes the unplaced buffers of ``scope`` to ``members``; returns how many."""
    m = 0
    for c in range(offset.shape[0]):
        if offset[c] < 0 and lab[c] == scope:
            members[m] = c
            m += 1
    return m


@njit
def _rerank(
    members: I64,
    rank: I64,
    by_rank: I64,
    pre_rank: I64,
    post_rank: I64,
    first: I64,
    last: I64,
    rem: I64,
    log: Rows,
    top: int,
) -> int:
    """Ranks ``members`` (one sub-problem) afresh among the ranks they hold: by ``pre_rank``,
    then by the unplaced bytes of their fullest section now (largest first), then by
    ``post_rank``; logs the old ranks on the rank log ``log`` (rows: buffer, old rank) from
    row ``top``, returns its new top."""
    m = members.size
    if m == 0:
        return top
    fullest = np.zeros(m, dtype=np.int64)
    slots = np.empty(m, dtype=np.int64)
    for t in range(m):
        c = members[t]
        slots[t] = rank[c]
        most = 0
        for s in range(first[c], last[c]):
            most = max(most, rem[s])
        fullest[t] = -most
    key = np.empty(m, dtype=np.int64)
    for t in range(m):
        key[t] = post_rank[members[t]]
    order = np.argsort(key, kind="mergesort")
    for t in range(m):
        key[t] = fullest[order[t]]
    order = order[np.argsort(key, kind="mergesort")]
    for t in range(m):
        key[t] = pre_rank[members[order[t]]]
    order = order[np.argsort(key, kind="mergesort")]
    slots.sort()
    for t in range(m):
        c = members[order[t]]
        log[top, 0] = c
        log[top, 1] = rank[c]
        top += 1
        rank[c] = slots[t]
        by_rank[slots[t]] = c
    return top


@njit(borrows=True)
def _candidates(inst: SearchArrays, st: SearchState, sc: int) -> int:
    """Gap dominance's ``gap`` (bytes) over the unplaced buffers of scope ``sc``; writes each
    one's candidate to ``st.cand`` and the lowest top a placement can lift it to, the floor
    aside, to ``st.lifts``."""
    offset, lab, base, size, alignment = st.offset, st.lab, st.base, inst.size, inst.alignment
    gap = NEVER
    for c in range(offset.shape[0]):
        if offset[c] < 0 and lab[c] == sc:
            st.lifts[c] = _align_up(base[c], alignment[c]) + size[c]
            o = _candidate(c, base, size, alignment, offset, inst.pin_ptr, inst.pin_adj)
            st.cand[c] = o
            if size[c] > 0 and o + size[c] < gap:
                gap = o + size[c]
    return gap


@njit(borrows=True)
def _lifted(c: int, lo: int, adj_ptr: I64, adj: I64, size: I64, offset: I64, lifts: I64) -> int:
    """Lowest top (bytes) a neighbour placed later, at or above the floor ``lo``, can lift
    waiting buffer ``c`` to; ``NEVER`` when none is left. Neighbours come smallest first and
    each lifts to at least ``lo`` + its size, so once that reaches the best so far no later
    one lifts lower."""
    o = NEVER
    for k in range(adj_ptr[c], adj_ptr[c + 1]):
        e = adj[k]
        lowest = lo + size[e]
        if lowest >= o:
            break
        if offset[e] < 0:
            lift = max(lifts[e], lowest)
            if lift < o:
                o = lift
    return o


@njit(borrows=True)
def _bounds(
    inst: SearchArrays, st: SearchState, sc: int, lo: int, lo_rank: int, gap: int, capacity: int
) -> int:
    """Children of the node on scope ``sc`` whose last placement is at ``lo`` bytes with rank
    ``lo_rank``, in rank order in ``st.scratch`` (two rows: buffers, candidates); -1 when a
    buffer cannot stand within ``capacity`` bytes, and the node fails. Writes each section's
    floor, the lowest bound of an unplaced buffer live there, to ``st.section_floor``."""
    offset, lab, cand, scratch, section_floor = (
        st.offset,
        st.lab,
        st.cand,
        st.scratch,
        st.section_floor,
    )
    size, first, last, twin_prev = inst.size, inst.first, inst.last, inst.twin_prev
    for s in range(section_floor.shape[0]):
        section_floor[s] = NEVER
    count = 0
    for r in range(st.by_rank.shape[0]):
        c = st.by_rank[r]
        if offset[c] >= 0 or lab[c] != sc:
            continue
        o = cand[c]
        if o > lo or (o == lo and r > lo_rank):
            # At or above ``gap`` a child is dominated (gap dominance); it still bounds the
            # sections.
            if o < gap and (twin_prev[c] < 0 or offset[twin_prev[c]] >= 0):
                scratch[0, count] = c
                scratch[1, count] = o
                count += 1
        else:
            # Waiting: it will sit on a neighbour placed later, at or above the floor.
            o = _lifted(c, lo, inst.adj_ptr, inst.adj, size, offset, st.lifts)
            if o == NEVER:
                return -1  # no neighbour is left to lift it
            o = _align_up(o, inst.alignment[c])
        if o + size[c] > capacity:
            return -1
        # A slice and ``np.minimum``: the hottest loop, compiled to vector instructions.
        live = section_floor[first[c] : last[c]]
        np.minimum(live, o, live)
    return count


@njit(borrows=True)
def _padding_fits(
    inst: SearchArrays, st: SearchState, s: int, level: int, slack: int
) -> tuple[bool, int]:
    """(whether the unplaced buffers of section ``s`` stack above ``level`` within ``slack``
    bytes of padding, the check's work to charge as nodes); ``st.stats`` counts the checks,
    their steps and those that pruned."""
    members = st.members
    m = 0
    for k in range(inst.sec_free_ptr[s], inst.sec_free_ptr[s + 1]):
        c = inst.sec_free[k]
        if st.offset[c] < 0:
            members[m] = c
            m += 1
    period = inst.sec_period[s]
    fits, steps = stack_fits(
        members, m, inst.cls, inst.size, inst.alignment, period, level, slack, STACK_STEPS, st.memo
    )
    st.stats[0] += 1
    st.stats[1] += steps
    st.stats[2] += 0 if fits else 1
    return fits, steps * (m + 8)  # a step scans the m buffers, reads the table


@njit(borrows=True)
def _split_fits(
    inst: SearchArrays, st: SearchState, split_lo: int, split_floor: int, capacity: int
) -> bool:
    """At a node that splits in MiniMalloc's orders: whether every section still fits with
    the buffers of every new sub-problem (scopes from ``split_lo``) at or above the node's
    floor ``split_floor``, as MiniMalloc checks a placement before it decomposes."""
    offset, split_level, height = st.offset, st.split_level, st.height
    nsec = height.shape[0]
    for s in range(nsec):
        split_level[s] = NEVER
    for c in range(offset.shape[0]):
        if offset[c] < 0 and st.lab[c] >= split_lo:
            o = max(_align_up(st.base[c], inst.alignment[c]), split_floor)
            for s in range(inst.first[c], inst.last[c]):
                split_level[s] = min(split_level[s], o)
    for s in range(nsec):
        if split_level[s] == NEVER:
            continue
        level = max(split_level[s], height[s])
        if _section_need(inst, st, s, level, capacity) > capacity:
            return False
    return True


@njit(borrows=True)
def _section_need(inst: SearchArrays, st: SearchState, s: int, level: int, capacity: int) -> int:
    """Bytes section ``s`` needs: its unplaced buffers stacked from ``level`` up, and the
    pinned buffers' bytes above ``level`` (within ``capacity``) they must clear."""
    offset, size = st.offset, inst.size
    need = level + st.rem[s]
    for k in range(inst.sec_pin_ptr[s], inst.sec_pin_ptr[s + 1]):
        p = inst.sec_pin[k]
        covered = min(offset[p] + size[p], capacity) - max(offset[p], level)
        if covered > 0:
            need += covered
    return int(need)


@njit(borrows=True)
def _first_over(section_floor: I64, height: I64, rem: I64, capacity: int) -> int:
    """The first section whose unplaced bytes do not stack within ``capacity`` bytes from its
    level (its floor, or the placed buffers' height there if higher), with no pinned buffer
    to clear; the number of sections where none."""
    sections: int = section_floor.shape[0]
    first = sections
    for s in range(sections):
        level = max(section_floor[s], height[s])
        over = (level + rem[s] > capacity) & (rem[s] != 0) & (section_floor[s] != NEVER)
        first = min(first, s if over else sections)
    return first


@njit(borrows=True)
def _sections_fit(inst: SearchArrays, st: SearchState, capacity: int) -> tuple[bool, int]:
    """(whether every section's unplaced buffers stack up, disjoint, above its floor and the
    placed buffers there, clearing the pinned buffers, within ``capacity`` bytes, the padding
    checks' work): where alignment may matter (``sec_period`` not 0), with the padding their
    alignments force (``_padding_fits``)."""
    rem = st.rem
    work = 0
    # Without pinned buffers a section needs its level and its unplaced bytes: one pass
    # finds the first that overflows (vector instructions, no early exit), then the loop
    # visits only the sections before it that alignment may pad, in the same order.
    sections = st.section_floor.shape[0]
    pinless = inst.sec_pin.size == 0
    over = _first_over(st.section_floor, st.height, rem, capacity) if pinless else sections
    for s in range(over):
        if pinless and inst.sec_period[s] == 0:
            continue
        level = st.section_floor[s]
        if rem[s] == 0 or level == NEVER:
            continue  # empty, or another scope's section
        level = max(level, st.height[s])  # they conflict with the placed ones there
        if _section_need(inst, st, s, level, capacity) > capacity:
            return False, work
        if inst.sec_period[s] == 0:
            continue
        slack = capacity - level - rem[s]
        if slack >= inst.sec_max_pad[s]:
            continue  # no order can pad more than that
        fits, steps = _padding_fits(inst, st, s, level, slack)
        work += steps
        if not fits:
            return False, work
    return over == sections, work


@njit(borrows=True)
def _unplace(
    inst: SearchArrays, st: SearchState, log: Rows, depth: int, trail_top: int, log_top: int
) -> None:
    """Undoes the node at ``depth``, the undo log ``trail_top`` rows long and the rank log
    ``log_top``: the scopes it split off go back to their parent, the ranks it logged on
    ``log`` and the bases and heights it logged on the undo log come back (both logs are then
    as long as its ``RK_MARK`` and ``MARK`` say), and its buffer leaves the arena (its
    sections' unplaced bytes, the boundaries it spans and its neighbours' unplaced
    neighbours count it again)."""
    frames = st.frames
    if frames[depth, SPLIT_HI] > frames[depth, SPLIT_LO]:
        _merge_scopes(st.lab, st.scopes, frames[depth, SPLIT_LO], frames[depth, SPLIT_HI])
    _restore_ranks(log, log_top, frames[depth, RK_MARK], st.rank, st.by_rank)
    b = frames[depth, PLACED]
    for s in range(inst.first[b], inst.last[b]):
        st.rem[s] += inst.size[b]
    for s in range(inst.first[b] + 1, inst.last[b]):
        st.spanned[s] += 1
    for k in range(inst.adj_ptr[b], inst.adj_ptr[b + 1]):
        st.unplaced_nbrs[inst.adj[k]] += 1
    st.offset[b] = -1
    _unwind(st.trail, trail_top, frames[depth, MARK], st.base, st.height)


@njit(borrows=True)
def _unwind(trail: Rows, top: int, mark: int, base: I64, height: I64) -> int:
    """Restores the bases (rows naming a buffer) and section heights (rows naming ``n`` + a
    section) logged on ``trail`` from row ``mark`` up to ``top``; returns ``mark``."""
    n = base.shape[0]
    while top > mark:
        top -= 1
        at = trail[top, 0]
        if at < n:
            base[at] = trail[top, 1]
        else:
            height[at - n] = trail[top, 1]
    return top


@njit(borrows=True)
def _restore_ranks(log: Rows, top: int, mark: int, rank: I64, by_rank: I64) -> int:
    """Restores the ranks logged on ``log`` from row ``mark`` up to ``top``; returns ``mark``."""
    while top > mark:
        top -= 1
        c = log[top, 0]
        rank[c] = log[top, 1]
        by_rank[rank[c]] = c
    return top


@njit(borrows=True)
def _merge_scopes(lab: I64, scopes: Rows, lo_scope: int, hi_scope: int) -> None:
    """Moves the buffers of scopes ``lo_scope .. hi_scope-1`` back to their parent scope."""
    for c in range(lab.shape[0]):
        if lo_scope <= lab[c] < hi_scope:
            lab[c] = scopes[lab[c], PARENT]


@njit(borrows=True)
def _raise_bases(inst: SearchArrays, st: SearchState, b: int, end: int, top: int) -> int:
    """Lifts the base of each unplaced neighbour of buffer ``b``, just placed to end at
    ``end`` bytes, to it, logging each base it raises on the undo log (rows: buffer, old
    base) from row ``top``; returns the log's new top."""
    offset, base, trail = st.offset, st.base, st.trail
    for k in range(inst.adj_ptr[b], inst.adj_ptr[b + 1]):
        c = inst.adj[k]
        st.unplaced_nbrs[c] -= 1
        if offset[c] < 0 and end > base[c]:
            trail[top, 0] = c
            trail[top, 1] = base[c]
            top += 1
            base[c] = end
    return top


@njit(borrows=True)
def _fill_sections(inst: SearchArrays, st: SearchState, b: int, end: int, top: int) -> int:
    """Takes buffer ``b``, just placed to end at ``end`` bytes, off its sections' unplaced
    bytes and the boundaries it spans, and raises their heights to ``end``, logging each
    height it raises on the undo log (rows: ``n`` + section, old height) from row ``top``;
    returns the log's new top."""
    n = inst.size.shape[0]
    height, trail = st.height, st.trail
    for s in range(inst.first[b] + 1, inst.last[b]):
        st.spanned[s] -= 1
    for s in range(inst.first[b], inst.last[b]):
        st.rem[s] -= inst.size[b]
        if end > height[s]:
            trail[top, 0] = n + s
            trail[top, 1] = height[s]
            top += 1
            height[s] = end
    return top


@njit(borrows=True)
def _enter(
    inst: SearchArrays, st: SearchState, depth: int, opened: int, log_top: int
) -> tuple[int, int, int, int]:
    """(scope, floor, floor rank, groups) the node at ``depth`` goes on with (``_scope``),
    ``opened`` scopes opened and the rank log ``log_top`` rows long;
    ``groups`` > 0 where that scope splits into as many sub-problems (``_split``), else 0.
    A scope splits where its unplaced buffers fall into groups that share no section; in
    MiniMalloc's decomposition also into one, where the buffer just placed was the last
    across a cut."""
    frames = st.frames
    frames[depth, SPLIT_LO] = opened
    frames[depth, SPLIT_HI] = opened
    frames[depth, RK_MARK] = log_top
    sc, lo, lo_rank = _scope(st.offset, st.lab, frames, st.scopes, depth)
    # The parent's scope was one group: without the buffer placed since, it falls apart
    # only at a boundary that buffer alone spanned, so where there is none the scan is
    # skipped.
    if (
        depth > 0
        and sc == frames[depth, ACTIVE]
        and _stays_whole(frames[depth, PLACED], inst.first, inst.last, st.spanned, inst.end_at)
    ):
        return sc, lo, lo_rank, 0
    groups = _groups(inst, st, sc)
    handed = depth > 0 and sc != frames[depth, ACTIVE]  # a sibling sub-problem, ranked already
    if groups > 1 or (inst.end_at.size > 0 and groups == 1 and not handed):
        return sc, lo, lo_rank, groups
    return sc, lo, lo_rank, 0


@njit(inline=True)
def _split(
    inst: SearchArrays,
    st: SearchState,
    depth: int,
    sc: int,
    lo: int,
    lo_rank: int,
    groups: int,
    log: Rows,
    log_top: int,
) -> tuple[int, int, int, Rows, int]:
    """Splits scope ``sc`` of the node at ``depth`` (its floor ``lo`` bytes, rank ``lo_rank``)
    into a scope per group (``_open_scopes``), each ranked afresh where the order says so
    (``_rerank``, the old ranks logged on ``log`` from row ``log_top``); returns the first
    sub-problem's (scope, floor, floor rank), the rank log, grown if it had to be, and its
    length."""
    opened = st.frames[depth, SPLIT_LO]
    published = inst.end_at.size > 0
    comp_scope = _open_scopes(
        st.scopes, st.comp_min, groups, opened, sc, depth, lo, lo_rank, published
    )
    _relabel(st.offset, st.lab, st.comp_of, comp_scope, sc)
    if inst.post_rank.size > 0:
        for g_id in range(opened, opened + groups):
            m = _gather(st.offset, st.lab, g_id, st.members)
            log = grow_rows(log, log_top + m)
            log_top = _rerank(
                st.members[:m],
                st.rank,
                st.by_rank,
                inst.pre_rank,
                inst.post_rank,
                inst.first,
                inst.last,
                st.rem,
                log,
                log_top,
            )
    st.frames[depth, SPLIT_HI] = opened + groups
    return opened, st.scopes[opened, SCOPE_FLOOR], st.scopes[opened, SCOPE_FLOOR_RANK], log, log_top


@njit(borrows=True)
def _expand(
    inst: SearchArrays,
    st: SearchState,
    depth: int,
    sc: int,
    lo: int,
    lo_rank: int,
    split_floor: int,
    capacity: int,
    plain: bool,
) -> tuple[int, int]:
    """(children, the padding checks' work) of the node at ``depth`` on scope ``sc``, its
    last placement at ``lo`` bytes with rank ``lo_rank``: the children are in ``st.scratch``
    by rank (``_bounds``); none where a bound prunes the node: a buffer that cannot stand, at
    a node that split in MiniMalloc's orders a section its sub-problems overfill from the
    node's floor ``split_floor`` (``_split_fits``), or any section (``_sections_fit``)."""
    gap = _candidates(inst, st, sc)
    count = _bounds(inst, st, sc, lo, lo_rank, gap, capacity)
    if count < 0:
        return 0, 0
    split_lo = st.frames[depth, SPLIT_LO]
    if (
        inst.end_at.size > 0
        and st.frames[depth, SPLIT_HI] > split_lo
        and not _split_fits(inst, st, split_lo, split_floor, capacity)
    ):
        return 0, 0
    fits, work = _sections_fit(inst, st, capacity)
    if not fits:
        return 0, work
    _flag_doomed(inst, st, count, capacity, plain)
    return count, work


@njit(borrows=True)
def _flag_doomed(
    inst: SearchArrays, st: SearchState, count: int, capacity: int, plain: bool
) -> None:
    """Marks in ``st.scratch``'s third row each of the node's ``count`` children whose own
    node would fail its section bound at once (``_doomed``), so the search skips it for the
    one node it would cost, not expanding it. Only where that bound is all a child's node
    checks that could differ (``plain``: no pinned buffer, no padding check, which charges
    work)."""
    scratch = st.scratch
    for t in range(count):
        scratch[2, t] = 0
    if not plain:
        return
    sf, rem = st.section_floor, st.rem
    most = 0  # the most unplaced bytes of a section of the scope
    for s in range(sf.shape[0]):
        most = max(most, rem[s] if sf[s] != NEVER else 0)
    for t in range(count):
        scratch[2, t] = _doomed(inst, st, scratch[0, t], scratch[1, t], most, capacity)


@njit(borrows=True)
def _doomed(inst: SearchArrays, st: SearchState, b: int, o: int, most: int, capacity: int) -> int:
    """1 where placing child ``b`` at ``o`` bytes makes a node whose section bound fails, as
    ``_sections_fit`` would find it there, else 0 (also where that node might split: its
    scope, and so the sections it checks, would change). Bounds only rise below a node (its
    buffers' candidates and lifts rise, its floor is ``o``), so each section's level there is
    at least its floor here, ``o`` and, where ``b`` lives, ``b``'s top; its unplaced bytes
    lose ``b``'s. Sections ``b`` does not live in fit unless ``o`` + their bytes overflow
    (the node here fits), so they are scanned only when ``o`` + ``most`` (their largest)
    does."""
    first, last, size = inst.first, inst.last, inst.size
    sf, rem, height, spanned, end_at = st.section_floor, st.rem, st.height, st.spanned, inst.end_at
    published = end_at.size > 0
    for x in range(first[b] + 1, last[b]):
        if spanned[x] == 1 and (not published or end_at[x] != 0):
            return 0  # only ``b`` spans this boundary: the node below may split
    top = o + size[b]
    for s in range(first[b], last[b]):
        left = rem[s] - size[b]
        if left > 0 and max(sf[s], height[s], top) + left > capacity:
            return 1
    if o + most <= capacity:
        return 0
    before = _overflows(sf, rem, height, o, 0, first[b], capacity)
    return 1 if before or _overflows(sf, rem, height, o, last[b], sf.shape[0], capacity) else 0


@njit(borrows=True)
def _overflows(sf: I64, rem: I64, height: I64, o: int, lo: int, hi: int, capacity: int) -> bool:
    """Whether a section ``lo .. hi-1`` of the scope overflows from a level at least its
    floor, its placed buffers' height and ``o``."""
    for s in range(lo, hi):
        if sf[s] != NEVER and rem[s] > 0 and max(sf[s], height[s], o) + rem[s] > capacity:
            return True
    return False


@njit(inline=True)
def _list_children(scratch: Rows, frames: Rows, depth: int, count: int, kid: Rows) -> Rows:
    """Lists the ``count`` children of the node at ``depth`` (``scratch``, by rank) in the
    children table ``kid`` by (candidate, rank); returns the table, grown if it had to be."""
    start = frames[depth, KID_BASE]
    if start + count > kid.shape[0]:
        kid = grow_rows(kid, start + count)
    if count > 0:
        # Scanned in rank order, so a stable sort by candidate orders by (offset, rank).
        order = np.argsort(scratch[1, :count], kind="mergesort")
        for t in range(count):
            kid[start + t, 0] = scratch[0, order[t]]
            kid[start + t, 1] = scratch[1, order[t]]
            kid[start + t, 2] = scratch[2, order[t]]
    frames[depth, KID_COUNT] = count
    frames[depth, KID_NEXT] = 0
    return kid


@njit(borrows=True)
def _backtrack(
    inst: SearchArrays, st: SearchState, log: Rows, depth: int, trail_top: int, log_top: int
) -> tuple[int, int, int, int]:
    """(depth, undo log rows, rank log rows, scopes opened) to go on from once the nodes from
    ``depth`` down with no child left are undone (``_unplace``; the undo log was ``trail_top``
    rows long, the rank log ``log_top``); depth -1 when none is left: the search is
    exhausted. A node that fails fails the node that split off its scope too, if its scope
    started there (backjumping)."""
    frames = st.frames
    opened = frames[depth, SPLIT_HI]
    while frames[depth, KID_NEXT] == frames[depth, KID_COUNT]:
        if depth == 0:
            return -1, trail_top, log_top, opened
        jumped = frames[depth, JUMP] >= 0
        target = frames[depth, JUMP] if jumped else depth - 1
        while depth > target:
            _unplace(inst, st, log, depth, trail_top, log_top)
            trail_top = frames[depth, MARK]
            log_top = frames[depth, RK_MARK]
            opened = frames[depth, SPLIT_LO]
            depth -= 1
        if jumped or frames[depth + 1, HATLESS] != 0:
            # MiniMalloc's hatless pruning: the buffer that failed had no unplaced
            # neighbour, so it sits where it is in every plan of this node, and every
            # later child would leave it waiting with nothing left to lift it.
            frames[depth, KID_NEXT] = frames[depth, KID_COUNT]
    return depth, trail_top, log_top, opened


@njit(borrows=True)
def _skip_doomed(frames: Rows, kid: Rows, depth: int, unplaced_nbrs: I64, stats: I64) -> bool:
    """Whether the next child of the node at ``depth`` is doomed (``_doomed``): then it is
    passed over as its node would have failed, for the node it costs (counted in
    ``stats[3]``), and where it has no unplaced neighbour the node's later children go with
    it (``_backtrack``'s hatless pruning)."""
    t = frames[depth, KID_BASE] + frames[depth, KID_NEXT]
    if kid[t, 2] == 0:
        return False
    stats[3] += 1
    frames[depth, KID_NEXT] += 1
    if unplaced_nbrs[kid[t, 0]] == 0:
        frames[depth, KID_NEXT] = frames[depth, KID_COUNT]
    return True


@njit(borrows=True)
def _descend(
    inst: SearchArrays, st: SearchState, kid: Rows, depth: int, trail_top: int
) -> tuple[int, int]:
    """Places the next child of the node at ``depth`` (from the children table ``kid``) at
    its candidate, its neighbours' bases and its sections' heights raised (``_raise_bases``,
    ``_fill_sections``, logged on the undo log from row ``trail_top``); returns the new
    node's depth and the undo log's length."""
    frames = st.frames
    t = frames[depth, KID_BASE] + frames[depth, KID_NEXT]
    frames[depth, KID_NEXT] += 1
    b = kid[t, 0]
    o = kid[t, 1]
    frames[depth + 1, MARK] = trail_top
    frames[depth + 1, HATLESS] = 1 if st.unplaced_nbrs[b] == 0 else 0
    st.offset[b] = o
    end = o + inst.size[b]
    trail_top = _raise_bases(inst, st, b, end, trail_top)
    trail_top = _fill_sections(inst, st, b, end, trail_top)
    depth += 1
    frames[depth, PLACED] = b
    frames[depth, FLOOR] = o
    frames[depth, FLOOR_RANK] = st.rank[b]
    frames[depth, ACTIVE] = frames[depth - 1, ACTIVE]
    frames[depth, KID_BASE] = frames[depth - 1, KID_BASE] + frames[depth - 1, KID_COUNT]
    return depth, trail_top


@njit
def decide(
    inst: SearchArrays, capacity: int, node_budget: int, cap: I64, efforts: I64, stats: I64
) -> tuple[int, I64, int]:
    """(status, offsets in bytes, nodes used) for one capacity in bytes.

    A node is one placement; the search stops after ``node_budget`` of them, or after
    ``cap[0]``, which another thread may lower while this one runs; racing, it keeps pace
    with the others (``solvers._pace_kernel``: ``cap`` says where its effort goes in
    ``efforts``, which is empty when it runs alone). The padding checks' work counts as
    nodes too; ``stats`` adds up how many checks ran, their steps and how many pruned, then
    how many doomed children were passed over (``_doomed``), each for the node it costs.

    Each sub-problem of a decomposition is ranked afresh (``_rerank``): by ``pre_rank``,
    then, where ``post_rank`` is not empty, by the fullest section's unplaced bytes now
    (largest first), then by ``post_rank``; it starts from the lowest floor. A sub-problem
    starts where the buffer just placed was the last unplaced one across a boundary
    ``x`` at which some buffer ends (``end_at[x]`` not 0), as MiniMalloc's sections
    end only there. With ``end_at`` empty (the portfolio's other orders), a node splits only
    where its buffers fall into several groups; the group holding the highest-priority buffer
    goes first and each starts from the node's floor.
    """
    if _pins_overflow(inst.size, inst.pinned, capacity):
        return EXHAUSTED, inst.pinned.copy(), 0
    st, free = _new_state(inst, stats)
    if free == 0:
        return FOUND, st.offset, 0
    n = inst.size.shape[0]
    # Whether a child's node checks nothing its parent cannot foresee but the section bound.
    plain = inst.sec_pin.size == 0 and (inst.sec_period.size == 0 or inst.sec_period.max() == 0)
    kid = np.empty((4 * n + 16, 3), dtype=np.int64)  # children of every open depth
    log = np.empty((4 * n + 16, 2), dtype=np.int64)  # rank log: buffer, old rank
    node_work = n + st.rem.shape[0] + 1  # what a node costs in the padding checks' units
    pad_work = 0  # padding checks' work not yet charged as nodes
    trail_top = 0  # rows of the undo log
    log_top = 0  # rows of the rank log
    opened = 1  # scopes opened: scope 0 holds every free buffer
    depth = 0
    nodes = 0
    paced = 0  # nodes when it last kept pace with the others
    while True:
        sc, lo, lo_rank, groups = _enter(inst, st, depth, opened, log_top)
        split_floor = lo  # the node's floor, before its sub-problems start from their own
        if groups > 0:
            sc, lo, lo_rank, log, log_top = _split(
                inst, st, depth, sc, lo, lo_rank, groups, log, log_top
            )
            opened += groups
        st.frames[depth, ACTIVE] = sc
        count, work = _expand(inst, st, depth, sc, lo, lo_rank, split_floor, capacity, plain)
        pad_work += work
        if pad_work >= node_work:
            nodes += pad_work // node_work  # charged as the nodes that work is worth
            pad_work %= node_work
        kid = _list_children(st.scratch, st.frames, depth, count, kid)
        while True:
            depth, trail_top, log_top, opened = _backtrack(inst, st, log, depth, trail_top, log_top)
            if depth < 0:
                return EXHAUSTED, st.offset, nodes
            halt, paced = halts(nodes, node_budget, cap, efforts, paced)
            if halt:
                return OUT_OF_NODES, st.offset, nodes
            nodes += 1
            if not _skip_doomed(st.frames, kid, depth, st.unplaced_nbrs, stats):
                break
        depth, trail_top = _descend(inst, st, kid, depth, trail_top)
        if depth == free:
            return FOUND, st.offset, nodes
