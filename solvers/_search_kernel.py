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
the section bound look only at the active scope.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.solvers._pace_kernel import EVERY, keep_pace
from planner.solvers._stack_kernel import new_memo, stack_fits

I64 = npt.NDArray[np.int64]

FOUND = 1  # offsets hold a plan within the capacity
EXHAUSTED = 0  # proved: no plan fits the capacity
OUT_OF_NODES = -1  # the node budget ran out first; nothing proved
STACK_STEPS = 2_000  # steps of one padding check; undecided, it does not prune


@njit
def _align_up(value: int, alignment: int) -> int:
    # A mask, not a division: every alignment is a power of two (an integer division costs
    # more than the rest of a candidate's work).
    return (value + alignment - 1) & -alignment


@njit
def _candidate(
    c: int,
    base: I64,
    size: I64,
    alignment: I64,
    offset: I64,
    pin_ptr: I64,
    pin_adj: I64,
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
    rk_at: I64,
    rk_old: I64,
    rk_top: int,
) -> int:
    """Rank ``members`` (one sub-problem) afresh among the ranks they hold: by ``pre_rank``,
    then by the unplaced bytes of their fullest section now (largest first), then by
    ``post_rank``; logs the old ranks on the undo log from ``rk_top``, returns its new top."""
    m = members.size
    if m == 0:
        return rk_top
    fullest = np.zeros(m, dtype=np.int64)
    slots = np.empty(m, dtype=np.int64)
    for t in range(m):
        c = members[t]
        slots[t] = rank[c]
        top = 0
        for s in range(first[c], last[c]):
            top = max(top, rem[s])
        fullest[t] = -top
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
        rk_at[rk_top] = c
        rk_old[rk_top] = rank[c]
        rk_top += 1
        rank[c] = slots[t]
        by_rank[slots[t]] = c
    return rk_top


@njit
def decide(
    size: I64,
    alignment: I64,
    pinned: I64,
    by_rank: I64,
    rank: I64,
    twin_prev: I64,
    adj_ptr: I64,
    adj: I64,
    pin_ptr: I64,
    pin_adj: I64,
    first: I64,
    last: I64,
    sec_pin_ptr: I64,
    sec_pin: I64,
    sec_free_ptr: I64,
    sec_free: I64,
    cls: I64,
    sec_period: I64,
    sec_max_pad: I64,
    pre_rank: I64,
    post_rank: I64,
    end_at: I64,
    capacity: int,
    node_budget: int,
    cap: I64,
    efforts: I64,
    stats: I64,
) -> tuple[int, I64, int]:
    """(status, offsets in bytes, nodes used) for one capacity in bytes.

    ``by_rank`` lists every buffer by branching priority and ``rank`` is its inverse;
    ``twin_prev[c]`` is the interchangeable buffer that must be placed before ``c`` (-1:
    none). ``adj`` (CSR) lists each buffer's conflicting buffers, smallest first,
    ``pin_adj`` the pinned ones among them. Buffer ``i`` is live in sections ``first[i] ..
    last[i]-1``; ``sec_pin`` (CSR) lists the pinned buffers live in each section;
    ``sec_free`` (CSR) the free ones, for the padding check where ``sec_period`` is not 0
    (see ``solvers.search._padding_lists``). A node is one placement; the search stops
    after ``node_budget`` of them, or after ``cap[0]``, which another thread may lower while
    this one runs; racing, it keeps pace with the others (``solvers._pace_kernel``: ``cap``
    says where its effort goes in ``efforts``, which is empty when it runs alone). The
    padding checks' work counts as nodes
    too; ``stats`` adds up how many checks ran, their steps and how many pruned.

    Each sub-problem of a decomposition is ranked afresh (``_rerank``): by ``pre_rank``,
    then, where ``post_rank`` is not empty, by the fullest section's unplaced bytes now
    (largest first), then by ``post_rank``; it starts from the lowest floor. A sub-problem
    starts where the buffer just placed was the last unplaced one across a boundary
    ``x`` at which some buffer ends (``end_at[x]`` not 0), as MiniMalloc's sections
    end only there. With ``end_at`` empty (the portfolio's other orders), a node splits only
    where its buffers fall into several groups; the group holding the highest-priority buffer
    goes first and each starts from the node's floor.
    """
    n = size.shape[0]
    nsec = sec_pin_ptr.shape[0] - 1
    offset = pinned.copy()  # bytes; -1 while unplaced
    rank = rank.copy()  # decompositions rank their sub-problems afresh
    by_rank = by_rank.copy()
    for p in range(n):
        if pinned[p] >= 0 and pinned[p] + size[p] > capacity:
            return EXHAUSTED, offset, 0
    free = 0
    base = np.zeros(n, dtype=np.int64)  # max top of placed free neighbours, bytes
    unplaced_nbrs = np.zeros(n, dtype=np.int64)  # unplaced free neighbours
    height = np.zeros(nsec, dtype=np.int64)  # max top of placed free buffers live there
    rem = np.zeros(nsec, dtype=np.int64)  # bytes of unplaced free buffers live there
    # Per section boundary ``x``: the unplaced free buffers live on both sides of it.
    spanned = np.zeros(nsec + 1, dtype=np.int64)
    trail_len = 0
    for i in range(n):
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
    if free == 0:
        return FOUND, offset, 0
    # Undo log: index (buffer, or n + section) and the old base / height.
    trail_at = np.empty(trail_len + 1, dtype=np.int64)
    trail_old = np.empty(trail_len + 1, dtype=np.int64)
    top_of_trail = 0
    # Per depth d (d placements made): the last placement and its children.
    placed = np.full(free + 1, -1, dtype=np.int64)
    floor = np.zeros(free + 1, dtype=np.int64)  # offset of the last placement, bytes
    floor_rank = np.full(free + 1, -1, dtype=np.int64)
    mark = np.zeros(free + 1, dtype=np.int64)  # trail length before the placement
    kid_base = np.zeros(free + 1, dtype=np.int64)
    kid_count = np.zeros(free + 1, dtype=np.int64)
    kid_next = np.zeros(free + 1, dtype=np.int64)
    kid = np.empty(4 * n + 16, dtype=np.int64)  # children of every open depth, grown on need
    kid_at = np.empty(4 * n + 16, dtype=np.int64)  # their candidates, bytes
    scratch = np.empty(n, dtype=np.int64)
    scratch_at = np.empty(n, dtype=np.int64)
    section_floor = np.zeros(nsec, dtype=np.int64)  # bytes
    lifts = np.zeros(n, dtype=np.int64)  # lowest top each unplaced buffer can have, bytes
    cand = np.zeros(n, dtype=np.int64)  # candidate of each unplaced buffer, bytes
    never = np.iinfo(np.int64).max // 4
    # Scopes: independent groups of unplaced buffers, solved one after the other. Scope 0
    # holds every free buffer; a split makes one child scope per group, chained by ``sc_next``;
    # a scope with no unplaced buffer left hands over to its next sibling, else to its parent.
    by_first = np.argsort(first, kind="mergesort")
    max_scopes = 2 * free + 2
    lab = np.zeros(n, dtype=np.int64)  # scope of each free buffer
    sc_parent = np.full(max_scopes, -1, dtype=np.int64)
    sc_next = np.full(max_scopes, -1, dtype=np.int64)
    sc_split = np.zeros(max_scopes, dtype=np.int64)  # depth of the node that split it off
    sc_floor = np.zeros(max_scopes, dtype=np.int64)  # that node's floor, bytes
    sc_floor_rank = np.full(max_scopes, -1, dtype=np.int64)
    n_scopes = 1
    active = np.zeros(free + 1, dtype=np.int64)  # scope each depth's node works on
    jump = np.full(free + 1, -1, dtype=np.int64)  # failing node d fails node jump[d] too
    split_lo = np.zeros(free + 1, dtype=np.int64)  # scopes made at depth d: lo .. hi-1
    split_hi = np.zeros(free + 1, dtype=np.int64)
    comp_of = np.zeros(n, dtype=np.int64)
    comp_scope = np.zeros(n, dtype=np.int64)
    comp_min = np.zeros(n, dtype=np.int64)  # each group's highest priority (``end_at`` empty)
    published = end_at.size > 0  # MiniMalloc's decomposition, else the portfolio's
    hatless = np.zeros(free + 1, dtype=np.bool_)  # depth d's buffer had no unplaced neighbour
    # Undo log of the ranks each decomposition set: buffer, old rank; per depth its start.
    rk_at = np.empty(4 * n + 16, dtype=np.int64)
    rk_old = np.empty(4 * n + 16, dtype=np.int64)
    rk_mark = np.zeros(free + 1, dtype=np.int64)
    rk_top = 0
    members = np.zeros(n, dtype=np.int64)  # the padding check's buffers
    memo = new_memo(sec_period.size > 0 and sec_period.max() > 0)  # empty: never checked
    pad_work = 0  # steps of padding checks, weighted, not yet charged as nodes
    node_work = n + nsec + 1  # what a node costs in the same units

    depth = 0
    nodes = 0
    paced = 0  # nodes when it last kept pace with the others
    while True:
        # Expand the node at ``depth``: find its scope, prune it or list its children.
        count = 0
        lo = floor[depth]
        lo_rank = floor_rank[depth]
        sc = active[depth]
        same_scope = sc
        jump[depth] = -1
        split_lo[depth] = n_scopes
        split_hi[depth] = n_scopes
        rk_mark[depth] = rk_top
        while True:  # a finished scope hands over to its next sibling or its parent
            busy = False
            for c in range(n):
                if offset[c] < 0 and lab[c] == sc:
                    busy = True
                    break
            if busy:
                break
            if sc_next[sc] >= 0:
                sc = sc_next[sc]
                jump[depth] = sc_split[sc]
                lo = sc_floor[sc]
                lo_rank = sc_floor_rank[sc]
            else:
                sc = sc_parent[sc]
        # Split the scope into groups that share no section. The parent's scope was one
        # group: without the buffer placed since, it falls apart only at a boundary that
        # buffer alone spanned, so where there is none the scan is skipped.
        groups = 0
        handed = depth > 0 and sc != same_scope  # a sibling sub-problem, ranked already
        whole = depth > 0 and sc == same_scope
        if whole:
            b = placed[depth]
            for x in range(first[b] + 1, last[b]):
                if spanned[x] == 0 and (not published or end_at[x] != 0):
                    whole = False
                    break
        if whole:
            groups = 1
        else:
            reach = -1
            for t in range(n):
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
        if groups > 1 or (published and groups == 1 and not whole and not handed):
            # Sub-problems, earliest first in time, each ranked afresh from the lowest floor
            # (MiniMalloc's dynamic decomposition): also where the cut leaves one. Without
            # ``end_at``: the group holding the highest-priority buffer first, each from the
            # node's floor.
            order = np.argsort(comp_min[:groups], kind="mergesort")
            for t in range(groups):
                g_id = n_scopes + t
                comp_scope[t if published else order[t]] = g_id
                sc_parent[g_id] = sc
                sc_next[g_id] = g_id + 1 if t + 1 < groups else -1
                sc_split[g_id] = depth
                sc_floor[g_id] = 0 if published else lo
                sc_floor_rank[g_id] = -1 if published else lo_rank
            for c in range(n):
                if offset[c] < 0 and lab[c] == sc:
                    lab[c] = comp_scope[comp_of[c]]
            if post_rank.size > 0:
                for t in range(groups):
                    m = 0
                    for c in range(n):
                        if offset[c] < 0 and lab[c] == n_scopes + t:
                            members[m] = c
                            m += 1
                    needed = rk_top + m
                    if needed > rk_at.shape[0]:
                        grown = max(2 * rk_at.shape[0], needed)
                        rk_at2 = np.empty(grown, dtype=np.int64)
                        rk_at2[:rk_top] = rk_at[:rk_top]
                        rk_old2 = np.empty(grown, dtype=np.int64)
                        rk_old2[:rk_top] = rk_old[:rk_top]
                        rk_at = rk_at2
                        rk_old = rk_old2
                    rk_top = _rerank(
                        members[:m],
                        rank,
                        by_rank,
                        pre_rank,
                        post_rank,
                        first,
                        last,
                        rem,
                        rk_at,
                        rk_old,
                        rk_top,
                    )
            sc = n_scopes
            lo = sc_floor[sc]
            lo_rank = sc_floor_rank[sc]
            n_scopes += groups
            split_hi[depth] = n_scopes
        active[depth] = sc
        ok = True
        for s in range(nsec):
            section_floor[s] = never
        # Gap dominance: a later placement at or above ``gap`` leaves some unplaced buffer
        # a free gap below where it ends up, so no fixpoint plan places anything there.
        gap = never
        for c in range(n):
            if offset[c] < 0 and lab[c] == sc:
                lifts[c] = max(_align_up(base[c], alignment[c]), lo) + size[c]
                o = _candidate(c, base, size, alignment, offset, pin_ptr, pin_adj)
                cand[c] = o
                if size[c] > 0 and o + size[c] < gap:
                    gap = o + size[c]
        for r in range(n):
            c = by_rank[r]
            if offset[c] >= 0 or lab[c] != sc:
                continue
            o = cand[c]
            if o > lo or (o == lo and r > lo_rank):
                # At or above ``gap`` a child is dominated; it still bounds the sections.
                if o < gap and (twin_prev[c] < 0 or offset[twin_prev[c]] >= 0):
                    scratch[count] = c
                    scratch_at[count] = o
                    count += 1
            else:
                # Waiting: it will sit on a neighbour placed later, at or above the floor.
                # Neighbours come smallest first and each lifts to at least ``lo`` + its
                # size, so once that reaches ``o`` no later one lifts lower.
                o = never
                for k in range(adj_ptr[c], adj_ptr[c + 1]):
                    e = adj[k]
                    if lo + size[e] >= o:
                        break
                    if offset[e] < 0 and lifts[e] < o:
                        o = lifts[e]
                if o == never:
                    ok = False  # no neighbour is left to lift it
                    break
                o = _align_up(o, alignment[c])
            if o + size[c] > capacity:
                ok = False
                break
            # Each section's floor: the lowest of these bounds among the buffers live there
            # (unsigned indices: no negative-index wrap check in the hottest loop).
            u = np.uint64(first[c])
            while u < np.uint64(last[c]):
                if section_floor[u] > o:
                    section_floor[u] = o
                u += np.uint64(1)
        if ok:
            # Sections: the unplaced buffers live there stack up, disjoint, above the floor,
            # and clear the pinned buffers.
            for s in range(nsec):
                level = section_floor[s]
                if rem[s] == 0 or level == never:
                    continue  # empty, or another scope's section
                level = max(level, height[s])  # they conflict with the placed ones there
                need = level + rem[s]
                for k in range(sec_pin_ptr[s], sec_pin_ptr[s + 1]):
                    p = sec_pin[k]
                    covered = min(offset[p] + size[p], capacity) - max(offset[p], level)
                    if covered > 0:
                        need += covered
                if need > capacity:
                    ok = False
                    break
                period = sec_period[s]
                if period == 0:
                    continue
                # Padding: above the level they stack only as tightly as their alignments
                # allow; the check's own work is charged as nodes.
                slack = capacity - level - rem[s]
                if slack >= sec_max_pad[s]:
                    continue  # no order can pad more than that
                m = 0
                for k in range(sec_free_ptr[s], sec_free_ptr[s + 1]):
                    c = sec_free[k]
                    if offset[c] < 0:
                        members[m] = c
                        m += 1
                fits, steps = stack_fits(
                    members, m, cls, size, alignment, period, level, slack, STACK_STEPS, memo
                )
                pad_work += steps * (m + 8)  # a step scans the m buffers, reads the table
                stats[0] += 1
                stats[1] += steps
                stats[2] += 0 if fits else 1
                if not fits:
                    ok = False
                    break
        if pad_work >= node_work:
            nodes += pad_work // node_work  # charged as the nodes that work is worth
            pad_work %= node_work
        if not ok:
            count = 0
        start = kid_base[depth]
        if start + count > kid.shape[0]:
            grown = max(2 * kid.shape[0], start + count)
            kid2 = np.empty(grown, dtype=np.int64)
            kid2[:start] = kid[:start]
            kid_at2 = np.empty(grown, dtype=np.int64)
            kid_at2[:start] = kid_at[:start]
            kid = kid2
            kid_at = kid_at2
        if count > 0:
            # Scanned in rank order, so a stable sort by candidate orders by (offset, rank).
            order = np.argsort(scratch_at[:count], kind="mergesort")
            for t in range(count):
                kid[start + t] = scratch[order[t]]
                kid_at[start + t] = scratch_at[order[t]]
        kid_count[depth] = count
        kid_next[depth] = 0
        # Descend into the next child, backtracking past nodes with none left.
        while kid_next[depth] == kid_count[depth]:
            if depth == 0:
                return EXHAUSTED, offset, nodes
            # The node fails; so does the node that split off its scope, if it started here.
            jumped = jump[depth] >= 0
            target = jump[depth] if jumped else depth - 1
            while depth > target:
                if split_hi[depth] > split_lo[depth]:
                    for c in range(n):
                        if split_lo[depth] <= lab[c] < split_hi[depth]:
                            lab[c] = sc_parent[lab[c]]
                    n_scopes = split_lo[depth]
                while rk_top > rk_mark[depth]:
                    rk_top -= 1
                    c = rk_at[rk_top]
                    rank[c] = rk_old[rk_top]
                    by_rank[rank[c]] = c
                b = placed[depth]
                for s in range(first[b], last[b]):
                    rem[s] += size[b]
                for s in range(first[b] + 1, last[b]):
                    spanned[s] += 1
                for k in range(adj_ptr[b], adj_ptr[b + 1]):
                    unplaced_nbrs[adj[k]] += 1
                while top_of_trail > mark[depth]:
                    top_of_trail -= 1
                    at = trail_at[top_of_trail]
                    if at < n:
                        base[at] = trail_old[top_of_trail]
                    else:
                        height[at - n] = trail_old[top_of_trail]
                offset[b] = -1
                depth -= 1
            if jumped or hatless[depth + 1]:
                # MiniMalloc's hatless pruning: the buffer that failed had no unplaced
                # neighbour, so it sits where it is in every plan of this node, and every
                # later child would leave it waiting with nothing left to lift it.
                kid_next[depth] = kid_count[depth]
        if nodes >= node_budget or nodes >= cap[0]:
            return OUT_OF_NODES, offset, nodes
        if efforts.size > 0 and nodes >= paced + EVERY:
            paced = nodes
            if not keep_pace(efforts, cap, nodes):
                return OUT_OF_NODES, offset, nodes
        nodes += 1
        t = kid_base[depth] + kid_next[depth]
        kid_next[depth] += 1
        b = kid[t]
        o = kid_at[t]
        top = o + size[b]
        mark[depth + 1] = top_of_trail
        offset[b] = o
        hatless[depth + 1] = unplaced_nbrs[b] == 0
        for k in range(adj_ptr[b], adj_ptr[b + 1]):
            c = adj[k]
            unplaced_nbrs[c] -= 1
            if offset[c] < 0 and top > base[c]:
                trail_at[top_of_trail] = c
                trail_old[top_of_trail] = base[c]
                top_of_trail += 1
                base[c] = top
        for s in range(first[b] + 1, last[b]):
            spanned[s] -= 1
        for s in range(first[b], last[b]):
            rem[s] -= size[b]
            if top > height[s]:
                trail_at[top_of_trail] = n + s
                trail_old[top_of_trail] = height[s]
                top_of_trail += 1
                height[s] = top
        depth += 1
        placed[depth] = b
        floor[depth] = o
        floor_rank[depth] = rank[b]
        active[depth] = active[depth - 1]
        kid_base[depth] = kid_base[depth - 1] + kid_count[depth - 1]
        if depth == free:
            return FOUND, offset, nodes
