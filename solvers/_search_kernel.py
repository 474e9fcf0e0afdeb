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
from planner.solvers._pace_kernel import EVERY, keep_pace
from planner.solvers._stack_kernel import new_memo, stack_fits

I64 = npt.NDArray[np.int64]
Rows = npt.NDArray[np.int64]  # a table: one row per entry, a column per field

FOUND = 1  # offsets hold a plan within the capacity
EXHAUSTED = 0  # proved: no plan fits the capacity
OUT_OF_NODES = -1  # the node budget ran out first; nothing proved
STACK_STEPS = 2_000  # steps of one padding check; undecided, it does not prune
NEVER = np.iinfo(np.int64).max // 4  # bytes: above any offset

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
def _count_free(
    size: I64,
    pinned: I64,
    adj_ptr: I64,
    adj: I64,
    first: I64,
    last: I64,
    rem: I64,
    spanned: I64,
    unplaced_nbrs: I64,
) -> tuple[int, int]:
    """(free buffers, undo log rows a search can need); fills, before any placement, each
    section's unplaced bytes (``rem``), each boundary's buffers live on both sides
    (``spanned``) and each buffer's free neighbours (``unplaced_nbrs``)."""
    free = 0
    trail_len = 0
    for i in range(size.shape[0]):
        if pinned[i] >= 0:
            continue
        free += 1
        for s in range(first[i], last[i]):
            rem[s] += size[i]
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
def _groups(
    sc: int,
    offset: I64,
    lab: I64,
    rank: I64,
    first: I64,
    last: I64,
    by_first: I64,
    comp_of: I64,
    comp_min: I64,
) -> int:
    """Groups of the unplaced buffers of scope ``sc`` that share no section, earliest first:
    each buffer's group in ``comp_of``, each group's highest priority (lowest rank) in
    ``comp_min``."""
    groups = 0
    reach = -1
    for t in range(by_first.shape[0]):
        c = by_first[t]
        if offset[c] >= 0 or lab[c] != sc:
            continue
        if first[c] >= reach:
            comp_min[groups] = rank[c]
            groups += 1
        elif rank[c] < comp_min[groups - 1]:
            comp_min[groups - 1] = rank[c]
        comp_of[c] = groups - 1
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
def _candidates(
    sc: int,
    offset: I64,
    lab: I64,
    base: I64,
    size: I64,
    alignment: I64,
    pin_ptr: I64,
    pin_adj: I64,
    cand: I64,
    lifts: I64,
) -> int:
    """Gap dominance's ``gap`` (bytes) over the unplaced buffers of scope ``sc``; writes each
    one's candidate to ``cand`` and the lowest top a placement can lift it to, the floor
    aside, to ``lifts``."""
    gap = NEVER
    for c in range(offset.shape[0]):
        if offset[c] < 0 and lab[c] == sc:
            lifts[c] = _align_up(base[c], alignment[c]) + size[c]
            o = _candidate(c, base, size, alignment, offset, pin_ptr, pin_adj)
            cand[c] = o
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
    sc: int,
    lo: int,
    lo_rank: int,
    gap: int,
    capacity: int,
    offset: I64,
    lab: I64,
    by_rank: I64,
    twin_prev: I64,
    cand: I64,
    lifts: I64,
    adj_ptr: I64,
    adj: I64,
    size: I64,
    alignment: I64,
    first: I64,
    last: I64,
    section_floor: I64,
    scratch: Rows,
) -> int:
    """Children of the node on scope ``sc`` whose last placement is at ``lo`` bytes with rank
    ``lo_rank``, in rank order in ``scratch`` (two rows: buffers, candidates); -1 when a buffer
    cannot stand within ``capacity`` bytes, and the node fails. Writes each section's floor,
    the lowest bound of an unplaced buffer live there, to ``section_floor``."""
    for s in range(section_floor.shape[0]):
        section_floor[s] = NEVER
    count = 0
    for r in range(by_rank.shape[0]):
        c = by_rank[r]
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
            o = _lifted(c, lo, adj_ptr, adj, size, offset, lifts)
            if o == NEVER:
                return -1  # no neighbour is left to lift it
            o = _align_up(o, alignment[c])
        if o + size[c] > capacity:
            return -1
        # Unsigned indices: no negative-index wrap check in the hottest loop.
        u = np.uint64(first[c])
        while u < np.uint64(last[c]):
            if section_floor[u] > o:
                section_floor[u] = o
            u += np.uint64(1)
    return count


@njit(borrows=True)
def _padding_fits(
    s: int,
    level: int,
    slack: int,
    offset: I64,
    size: I64,
    alignment: I64,
    cls: I64,
    sec_period: I64,
    sec_free_ptr: I64,
    sec_free: I64,
    members: I64,
    memo: I64,
    stats: I64,
) -> tuple[bool, int]:
    """(whether the unplaced buffers of section ``s`` stack above ``level`` within ``slack``
    bytes of padding, the check's work to charge as nodes); ``stats`` counts the checks, their
    steps and those that pruned."""
    m = 0
    for k in range(sec_free_ptr[s], sec_free_ptr[s + 1]):
        c = sec_free[k]
        if offset[c] < 0:
            members[m] = c
            m += 1
    fits, steps = stack_fits(
        members, m, cls, size, alignment, sec_period[s], level, slack, STACK_STEPS, memo
    )
    stats[0] += 1
    stats[1] += steps
    stats[2] += 0 if fits else 1
    return fits, steps * (m + 8)  # a step scans the m buffers, reads the table


@njit(borrows=True)
def _split_fits(
    capacity: int,
    split_lo: int,
    split_floor: int,
    offset: I64,
    lab: I64,
    base: I64,
    alignment: I64,
    first: I64,
    last: I64,
    height: I64,
    rem: I64,
    sec_pin_ptr: I64,
    sec_pin: I64,
    size: I64,
    split_level: I64,
) -> bool:
    """At a node that splits in MiniMalloc's orders: whether every section still fits with
    the buffers of every new sub-problem (scopes from ``split_lo``) at or above the node's
    floor ``split_floor``, as MiniMalloc checks a placement before it decomposes."""
    never = np.iinfo(np.int64).max // 4
    nsec = height.shape[0]
    for s in range(nsec):
        split_level[s] = never
    for c in range(offset.shape[0]):
        if offset[c] < 0 and lab[c] >= split_lo:
            o = max(_align_up(base[c], alignment[c]), split_floor)
            for s in range(first[c], last[c]):
                split_level[s] = min(split_level[s], o)
    for s in range(nsec):
        if split_level[s] == never:
            continue
        level = max(split_level[s], height[s])
        if _section_need(s, level, rem, sec_pin_ptr, sec_pin, offset, size, capacity) > capacity:
            return False
    return True


@njit(borrows=True)
def _section_need(
    s: int,
    level: int,
    rem: I64,
    sec_pin_ptr: I64,
    sec_pin: I64,
    offset: I64,
    size: I64,
    capacity: int,
) -> int:
    """Bytes section ``s`` needs: its unplaced buffers stacked from ``level`` up, and the
    pinned buffers' bytes above ``level`` (within ``capacity``) they must clear."""
    need = level + rem[s]
    for k in range(sec_pin_ptr[s], sec_pin_ptr[s + 1]):
        p = sec_pin[k]
        covered = min(offset[p] + size[p], capacity) - max(offset[p], level)
        if covered > 0:
            need += covered
    return int(need)


@njit(borrows=True)
def _sections_fit(
    capacity: int,
    section_floor: I64,
    height: I64,
    rem: I64,
    offset: I64,
    size: I64,
    alignment: I64,
    sec_pin_ptr: I64,
    sec_pin: I64,
    sec_max_pad: I64,
    cls: I64,
    sec_period: I64,
    sec_free_ptr: I64,
    sec_free: I64,
    members: I64,
    memo: I64,
    stats: I64,
) -> tuple[bool, int]:
    """(whether every section's unplaced buffers stack up, disjoint, above its floor and the
    placed buffers there, clearing the pinned buffers, within ``capacity`` bytes, the padding
    checks' work): where alignment may matter (``sec_period`` not 0), with the padding their
    alignments force (``_padding_fits``)."""
    work = 0
    for s in range(section_floor.shape[0]):
        level = section_floor[s]
        if rem[s] == 0 or level == NEVER:
            continue  # empty, or another scope's section
        level = max(level, height[s])  # they conflict with the placed ones there
        need = _section_need(s, level, rem, sec_pin_ptr, sec_pin, offset, size, capacity)
        if need > capacity:
            return False, work
        if sec_period[s] == 0:
            continue
        slack = capacity - level - rem[s]
        if slack >= sec_max_pad[s]:
            continue  # no order can pad more than that
        fits, steps = _padding_fits(
            s,
            level,
            slack,
            offset,
            size,
            alignment,
            cls,
            sec_period,
            sec_free_ptr,
            sec_free,
            members,
            memo,
            stats,
        )
        work += steps
        if not fits:
            return False, work
    return True, work


@njit(borrows=True)
def _undo(
    b: int,
    size: I64,
    first: I64,
    last: I64,
    adj_ptr: I64,
    adj: I64,
    rem: I64,
    spanned: I64,
    unplaced_nbrs: I64,
    offset: I64,
) -> None:
    """Takes buffer ``b`` back off the arena: its sections' unplaced bytes, the boundaries it
    spans and its neighbours' unplaced neighbours count it again."""
    for s in range(first[b], last[b]):
        rem[s] += size[b]
    for s in range(first[b] + 1, last[b]):
        spanned[s] += 1
    for k in range(adj_ptr[b], adj_ptr[b + 1]):
        unplaced_nbrs[adj[k]] += 1
    offset[b] = -1


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
def _raise_bases(
    b: int,
    end: int,
    adj_ptr: I64,
    adj: I64,
    offset: I64,
    base: I64,
    unplaced_nbrs: I64,
    trail: Rows,
    top: int,
) -> int:
    """Lifts the base of each unplaced neighbour of buffer ``b``, just placed to end at
    ``end`` bytes, to it, logging each base it raises on ``trail`` (rows: buffer, old base)
    from row ``top``; returns the log's new top."""
    for k in range(adj_ptr[b], adj_ptr[b + 1]):
        c = adj[k]
        unplaced_nbrs[c] -= 1
        if offset[c] < 0 and end > base[c]:
            trail[top, 0] = c
            trail[top, 1] = base[c]
            top += 1
            base[c] = end
    return top


@njit(borrows=True)
def _fill_sections(
    b: int,
    end: int,
    size: I64,
    first: I64,
    last: I64,
    rem: I64,
    spanned: I64,
    height: I64,
    trail: Rows,
    top: int,
) -> int:
    """Takes buffer ``b``, just placed to end at ``end`` bytes, off its sections' unplaced
    bytes and the boundaries it spans, and raises their heights to ``end``, logging each
    height it raises on ``trail`` (rows: ``n`` + section, old height) from row ``top``;
    returns the log's new top."""
    n = size.shape[0]
    for s in range(first[b] + 1, last[b]):
        spanned[s] -= 1
    for s in range(first[b], last[b]):
        rem[s] -= size[b]
        if end > height[s]:
            trail[top, 0] = n + s
            trail[top, 1] = height[s]
            top += 1
            height[s] = end
    return top


@njit(borrows=True)
def _halt(nodes: int, node_budget: int, cap: I64, efforts: I64, paced: int) -> tuple[bool, int]:
    """(whether the search stops, nodes when it last kept pace): at ``node_budget`` nodes or
    ``cap[0]``, which another thread may lower; racing (``efforts`` not empty), every
    ``EVERY`` nodes it keeps pace with the others (``solvers._pace_kernel``)."""
    if nodes >= node_budget or nodes >= cap[0]:
        return True, paced
    if efforts.size > 0 and nodes >= paced + EVERY:
        return not keep_pace(efforts, cap, nodes), nodes
    return False, paced


@njit
def decide(
    inst: SearchArrays, capacity: int, node_budget: int, cap: I64, efforts: I64, stats: I64
) -> tuple[int, I64, int]:
    """(status, offsets in bytes, nodes used) for one capacity in bytes.

    A node is one placement; the search stops after ``node_budget`` of them, or after
    ``cap[0]``, which another thread may lower while this one runs; racing, it keeps pace
    with the others (``solvers._pace_kernel``: ``cap`` says where its effort goes in
    ``efforts``, which is empty when it runs alone). The padding checks' work counts as
    nodes too; ``stats`` adds up how many checks ran, their steps and how many pruned.

    Each sub-problem of a decomposition is ranked afresh (``_rerank``): by ``pre_rank``,
    then, where ``post_rank`` is not empty, by the fullest section's unplaced bytes now
    (largest first), then by ``post_rank``; it starts from the lowest floor. A sub-problem
    starts where the buffer just placed was the last unplaced one across a boundary
    ``x`` at which some buffer ends (``end_at[x]`` not 0), as MiniMalloc's sections
    end only there. With ``end_at`` empty (the portfolio's other orders), a node splits only
    where its buffers fall into several groups; the group holding the highest-priority buffer
    goes first and each starts from the node's floor.
    """
    size, alignment, pinned, by_rank, rank, twin_prev = inst[:6]
    adj_ptr, adj, pin_ptr, pin_adj, first, last = inst[6:12]
    sec_pin_ptr, sec_pin, sec_free_ptr, sec_free, cls, sec_period, sec_max_pad = inst[12:19]
    pre_rank, post_rank, end_at = inst[19:]
    n = size.shape[0]
    nsec = sec_pin_ptr.shape[0] - 1
    offset = pinned.copy()  # bytes; -1 while unplaced
    if _pins_overflow(size, pinned, capacity):
        return EXHAUSTED, offset, 0
    rank = rank.copy()  # decompositions rank their sub-problems afresh
    by_rank = by_rank.copy()
    rem = np.zeros(nsec, dtype=np.int64)  # bytes of unplaced free buffers live there
    # Per section boundary ``x``: the unplaced free buffers live on both sides of it.
    spanned = np.zeros(nsec + 1, dtype=np.int64)
    unplaced_nbrs = np.zeros(n, dtype=np.int64)  # unplaced free neighbours
    free, trail_len = _count_free(
        size, pinned, adj_ptr, adj, first, last, rem, spanned, unplaced_nbrs
    )
    if free == 0:
        return FOUND, offset, 0
    base = np.zeros(n, dtype=np.int64)  # max top of placed free neighbours, bytes
    height = np.zeros(nsec, dtype=np.int64)  # max top of placed free buffers live there
    section_floor = np.zeros(nsec, dtype=np.int64)  # bytes
    split_level = np.zeros(nsec, dtype=np.int64)  # bytes, at a node that splits
    lifts = np.zeros(n, dtype=np.int64)  # lowest top a placement can lift it to, bytes
    cand = np.zeros(n, dtype=np.int64)  # candidate of each unplaced buffer, bytes
    scratch = np.empty((2, n), dtype=np.int64)  # the node's children by rank, candidates
    members = np.zeros(n, dtype=np.int64)  # a sub-problem's or a padding check's buffers
    trail = np.empty((trail_len + 1, 2), dtype=np.int64)  # undo log of bases and heights
    frames = _new_frames(free)
    kid = np.empty((4 * n + 16, 2), dtype=np.int64)  # children of every open depth
    log = np.empty((4 * n + 16, 2), dtype=np.int64)  # rank log: buffer, old rank
    # Scopes: independent groups of unplaced buffers, solved one after the other. Scope 0
    # holds every free buffer; a split makes one child scope per group, chained by ``NEXT``;
    # a scope with no unplaced buffer left hands over to its next sibling, else to its parent.
    scopes = _new_scopes(free)
    lab = np.zeros(n, dtype=np.int64)  # scope of each free buffer
    by_first = np.argsort(first, kind="mergesort")
    comp_of = np.zeros(n, dtype=np.int64)  # group of each buffer of a splitting scope
    comp_min = np.zeros(n, dtype=np.int64)  # each group's highest priority
    published = end_at.size > 0  # MiniMalloc's decomposition, else the portfolio's
    memo = new_memo(sec_period.size > 0 and sec_period.max() > 0)  # empty: never checked
    node_work = n + nsec + 1  # what a node costs in the padding checks' units
    pad_work = 0  # padding checks' work not yet charged as nodes
    trail_top = 0
    rk_top = 0
    n_scopes = 1
    split_floor = 0  # floor of the node that split, before its sub-problems start, bytes
    depth = 0
    nodes = 0
    paced = 0  # nodes when it last kept pace with the others
    while True:
        # Expand the node at ``depth``: find its scope, split it, prune the node or list its
        # children.
        frames[depth, SPLIT_LO] = n_scopes
        frames[depth, SPLIT_HI] = n_scopes
        frames[depth, RK_MARK] = rk_top
        sc, lo, lo_rank = _scope(offset, lab, frames, scopes, depth)
        whole = depth > 0 and sc == frames[depth, ACTIVE]
        handed = depth > 0 and not whole  # a sibling sub-problem, ranked already
        # The parent's scope was one group: without the buffer placed since, it falls apart
        # only at a boundary that buffer alone spanned, so where there is none the scan is
        # skipped.
        whole = whole and _stays_whole(frames[depth, PLACED], first, last, spanned, end_at)
        groups = 1
        if not whole:
            groups = _groups(sc, offset, lab, rank, first, last, by_first, comp_of, comp_min)
        if groups > 1 or (published and groups == 1 and not whole and not handed):
            # Sub-problems (MiniMalloc's dynamic decomposition: also where the cut leaves one).
            comp_scope = _open_scopes(
                scopes, comp_min, groups, n_scopes, sc, depth, lo, lo_rank, published
            )
            _relabel(offset, lab, comp_of, comp_scope, sc)
            if post_rank.size > 0:
                for g_id in range(n_scopes, n_scopes + groups):
                    m = _gather(offset, lab, g_id, members)
                    log = grow_rows(log, rk_top + m)
                    rk_top = _rerank(
                        members[:m],
                        rank,
                        by_rank,
                        pre_rank,
                        post_rank,
                        first,
                        last,
                        rem,
                        log,
                        rk_top,
                    )
            sc = n_scopes
            split_floor = lo  # the floor of the node that splits
            lo = scopes[sc, SCOPE_FLOOR]
            lo_rank = scopes[sc, SCOPE_FLOOR_RANK]
            n_scopes += groups
            frames[depth, SPLIT_HI] = n_scopes
        frames[depth, ACTIVE] = sc
        gap = _candidates(sc, offset, lab, base, size, alignment, pin_ptr, pin_adj, cand, lifts)
        count = _bounds(
            sc,
            lo,
            lo_rank,
            gap,
            capacity,
            offset,
            lab,
            by_rank,
            twin_prev,
            cand,
            lifts,
            adj_ptr,
            adj,
            size,
            alignment,
            first,
            last,
            section_floor,
            scratch,
        )
        if (
            count >= 0
            and published
            and frames[depth, SPLIT_HI] > frames[depth, SPLIT_LO]
            and not _split_fits(
                capacity,
                frames[depth, SPLIT_LO],
                split_floor,
                offset,
                lab,
                base,
                alignment,
                first,
                last,
                height,
                rem,
                sec_pin_ptr,
                sec_pin,
                size,
                split_level,
            )
        ):
            count = -1
        if count >= 0:
            fits, work = _sections_fit(
                capacity,
                section_floor,
                height,
                rem,
                offset,
                size,
                alignment,
                sec_pin_ptr,
                sec_pin,
                sec_max_pad,
                cls,
                sec_period,
                sec_free_ptr,
                sec_free,
                members,
                memo,
                stats,
            )
            pad_work += work
            if not fits:
                count = 0
        else:
            count = 0
        if pad_work >= node_work:
            nodes += pad_work // node_work  # charged as the nodes that work is worth
            pad_work %= node_work
        start = frames[depth, KID_BASE]
        if start + count > kid.shape[0]:
            kid = grow_rows(kid, start + count)
        if count > 0:
            # Scanned in rank order, so a stable sort by candidate orders by (offset, rank).
            order = np.argsort(scratch[1, :count], kind="mergesort")
            for t in range(count):
                kid[start + t, 0] = scratch[0, order[t]]
                kid[start + t, 1] = scratch[1, order[t]]
        frames[depth, KID_COUNT] = count
        frames[depth, KID_NEXT] = 0
        # Backtrack past nodes with no child left. A node that fails fails the node that
        # split off its scope too, if it started here (backjumping).
        while frames[depth, KID_NEXT] == frames[depth, KID_COUNT]:
            if depth == 0:
                return EXHAUSTED, offset, nodes
            jumped = frames[depth, JUMP] >= 0
            target = frames[depth, JUMP] if jumped else depth - 1
            while depth > target:
                if frames[depth, SPLIT_HI] > frames[depth, SPLIT_LO]:
                    n_scopes = frames[depth, SPLIT_LO]
                    _merge_scopes(lab, scopes, n_scopes, frames[depth, SPLIT_HI])
                rk_top = _restore_ranks(log, rk_top, frames[depth, RK_MARK], rank, by_rank)
                b = frames[depth, PLACED]
                _undo(b, size, first, last, adj_ptr, adj, rem, spanned, unplaced_nbrs, offset)
                trail_top = _unwind(trail, trail_top, frames[depth, MARK], base, height)
                depth -= 1
            if jumped or frames[depth + 1, HATLESS] != 0:
                # MiniMalloc's hatless pruning: the buffer that failed had no unplaced
                # neighbour, so it sits where it is in every plan of this node, and every
                # later child would leave it waiting with nothing left to lift it.
                frames[depth, KID_NEXT] = frames[depth, KID_COUNT]
        halt, paced = _halt(nodes, node_budget, cap, efforts, paced)
        if halt:
            return OUT_OF_NODES, offset, nodes
        # Descend into the node's next child.
        nodes += 1
        t = frames[depth, KID_BASE] + frames[depth, KID_NEXT]
        frames[depth, KID_NEXT] += 1
        b = kid[t, 0]
        o = kid[t, 1]
        frames[depth + 1, MARK] = trail_top
        frames[depth + 1, HATLESS] = 1 if unplaced_nbrs[b] == 0 else 0
        offset[b] = o
        end = o + size[b]
        trail_top = _raise_bases(
            b, end, adj_ptr, adj, offset, base, unplaced_nbrs, trail, trail_top
        )
        trail_top = _fill_sections(
            b, end, size, first, last, rem, spanned, height, trail, trail_top
        )
        depth += 1
        frames[depth, PLACED] = b
        frames[depth, FLOOR] = o
        frames[depth, FLOOR_RANK] = rank[b]
        frames[depth, ACTIVE] = frames[depth - 1, ACTIVE]
        frames[depth, KID_BASE] = frames[depth - 1, KID_BASE] + frames[depth - 1, KID_COUNT]
        if depth == free:
            return FOUND, offset, nodes
