"""Brute force over the interleavings of a small partitioned request: every partition runs as
two threads, each stepping through the partition's operations in point order; a TMA write
runs as its own agent some time after its issue. Barriers block until every thread taking
part reaches them, an mbarrier wait until every arrive on it at an earlier point has been made
by every thread of its partition and every TMA write on it issued earlier (within the
buffer's lifetime) has landed. Every reachable state is visited, so "A's accesses all come
before B's" is decided over every schedule the syncs allow.

A ``cp.async`` write, TMA read (a store's source) or ``mma`` read is issued by every thread of
its partition, each copy an agent of its own that lands some time after its thread issued it;
a ``wait_group`` blocks its thread until that thread's own copies of its group, issued at an
earlier point (the ``pending`` most recent issue points left out) and not past their buffer's
lifetime, have landed. Other threads learn of them only through a later sync.

A generic-proxy write (a thread write, or a ``cp.async`` write once its copy has landed) by a
thread becomes visible to the async proxy only once that same thread runs a
``fence_proxy_async`` of its partition at a later step of its program (a fence at a point
runs after the waits there and before the barriers, arrives and accesses). An async-proxy
access of ``B`` (a TMA write or read, an ``mma`` read) comes after ``A``'s accesses only if,
whenever it has been issued, every access of ``A`` is done and every generic write of ``A``
fenced by each of its threads; other pairs need their accesses done only.

Supports thread accesses, TMA writes, the accesses a wait_group completes, block and named
barriers, mbarrier arrives and waits, wait_groups and proxy fences: every rule by which the
planner and the validators order the buffers of a partitioned request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from planner.core.models import PlanRequest

__all__ = ["THREADS", "ordered_pairs", "unfinished"]

THREADS = 2  # per partition: enough for two threads of one warp group to race
_GROUP = {("cp.async", "write"): "cp.async", ("tma", "read"): "bulk", ("mma", "read"): "wgmma"}
_ASYNC_PROXY = ("tma", "mma")

# (event, thread slot): one thread's part of an access, or its copy
_Half = tuple[int, int]
# (program counters, events done, halves made or landed so far, generic-write halves fenced)
_State = tuple[tuple[int, ...], frozenset[int], frozenset[_Half], frozenset[_Half]]


@dataclass(frozen=True)
class _Op:
    point: int
    rank: int  # wait 0, fence 1, barrier 2, arrive 3, access 4
    # "wait" | "wait_group" | "fence" | "barrier" | "arrive" | "access" | "issue" | "copy"
    kind: str
    key: object = None  # barrier: (point, members); mbarrier name; access: event id;
    # wait_group: (group, pending)


@dataclass(frozen=True)
class _Copy:
    """An access a wait_group completes: each thread of its partition issues a copy."""

    group: str
    point: int
    end: int  # its buffer's end: a wait past it does not complete it
    partition: int


@dataclass
class _Program:
    """The threads' operations and what the exploration needs to know of each event."""

    threads: list[list[_Op]]
    agents: dict[int, tuple[str, int, int]]  # TMA write: (mbarrier, issue point, end)
    owner: dict[int, int]  # event -> its buffer
    copies: dict[int, _Copy]
    generic: set[int]  # generic-proxy writes: thread and cp.async writes
    proxied: set[int]  # async-proxy accesses: TMA writes and reads, mma reads


def _program(req: PlanRequest) -> _Program:
    """Per thread its operations, and per event what it is. The proxy fences are left out
    where no generic write meets an async-proxy access (they order nothing else)."""
    parts = {p.id: k for k, p in enumerate(req.partitions)}
    n = len(req.partitions)
    per_part: list[list[_Op]] = [[] for _ in range(n)]
    for point in sorted(set(req.barriers)):
        for q in range(n):
            per_part[q].append(_Op(point, 2, "barrier", (point, tuple(range(n)))))
    fences: list[tuple[int, int]] = []  # (partition, point)
    for s in req.syncs:
        if s.kind == "named_barrier":
            members = tuple(sorted(parts[x] for x in s.partitions or []))
            for q in members:
                per_part[q].append(_Op(s.at, 2, "barrier", (s.at, members)))
        elif s.kind == "mbarrier_wait":
            per_part[parts[s.partition or ""]].append(_Op(s.at, 0, "wait", s.mbarrier))
        elif s.kind == "mbarrier_arrive":
            per_part[parts[s.partition or ""]].append(_Op(s.at, 3, "arrive", s.mbarrier))
        elif s.kind == "wait_group" and s.partition in parts:
            key = (s.group, s.pending)
            per_part[parts[s.partition]].append(_Op(s.at, 0, "wait_group", key))
        elif s.kind == "fence_proxy_async" and s.partition in parts:
            fences.append((parts[s.partition], s.at))
    prog = _Program([], {}, {}, {}, set(), set())
    event = 0
    for i, b in enumerate(req.buffers):
        for a in b.accesses:
            q = parts[a.partition or ""]
            group = _GROUP.get((a.agent, a.op))
            if a.agent == "tma" and a.op == "write":
                prog.agents[event] = (a.mbarrier or "", a.at, b.end)
                per_part[q].append(_Op(a.at, 4, "issue", event))
            elif group is not None:
                prog.copies[event] = _Copy(group, a.at, b.end, q)
                per_part[q].append(_Op(a.at, 4, "copy", event))
            else:
                per_part[q].append(_Op(a.at, 4, "access", event))
            if a.agent in _ASYNC_PROXY:
                prog.proxied.add(event)
            elif a.op == "write":
                prog.generic.add(event)
            prog.owner[event] = i
            event += 1
    if prog.generic and prog.proxied:
        for q, at in fences:
            per_part[q].append(_Op(at, 1, "fence"))
    for q in range(n):
        ops = sorted(per_part[q], key=lambda o: (o.point, o.rank))
        prog.threads += [ops] * THREADS
    return prog


def ordered_pairs(req: PlanRequest) -> set[tuple[int, int]]:
    """Buffer pairs (earlier, later), their lifetimes disjoint in that order, such that in
    every reachable state where an access of the later one has happened, every access of the
    earlier one has too, and where an async-proxy access of the later one has been issued,
    every generic write of the earlier one has been fenced by its thread too."""
    return _explored(req)[0]


def unfinished(req: PlanRequest) -> set[int]:
    """Buffers with an access a wait_group completes that some thread of its partition may
    still have in flight once past the waits at its buffer's end (no wait of its own there
    guarantees it landed)."""
    return _explored(req)[1]


_EXPLORED: dict[str, tuple[set[tuple[int, int]], set[int]]] = {}


def _explored(req: PlanRequest) -> tuple[set[tuple[int, int]], set[int]]:
    """``_explore``'s result, kept for the last few requests: the tests ask both questions
    of one request."""
    key = req.model_dump_json()
    if key not in _EXPLORED:
        if len(_EXPLORED) >= 8:
            _EXPLORED.pop(next(iter(_EXPLORED)))
        _EXPLORED[key] = _explore(req)
    ordered, late = _EXPLORED[key]
    return set(ordered), set(late)


def _explore(req: PlanRequest) -> tuple[set[tuple[int, int]], set[int]]:
    prog = _program(req)
    threads, agents, owner, copies = prog.threads, prog.agents, prog.owner, prog.copies
    n_threads = len(threads)
    part_of = [t // THREADS for t in range(n_threads)]

    # (thread, index, mbarrier, point) of every arrive
    arrives = [
        (t, k, o.key, o.point)
        for t, ops in enumerate(threads)
        for k, o in enumerate(ops)
        if o.kind == "arrive"
    ]

    def arrived_all(m: str, before: int, pcs: tuple[int, ...]) -> bool:
        return not any(key == m and point < before and pcs[t] <= k for t, k, key, point in arrives)

    def landed_all(m: str, before: int, done: frozenset[int]) -> bool:
        return all(
            g in done
            for g, (name, issue, end) in agents.items()
            if name == m and issue < before <= end
        )

    def copies_needed(t: int, o: _Op) -> list[_Half]:
        """The copies thread ``t``'s wait_group ``o`` waits for: its own of the group issued
        before it, but the ``pending`` most recent issue points, within their lifetimes."""
        group, pending = cast("tuple[str, int]", o.key)
        mine = [
            (e, c)
            for e, c in copies.items()
            if c.partition == part_of[t] and c.group == group and c.point < o.point
        ]
        points = sorted({c.point for _, c in mine})
        return [
            (e, t % THREADS)
            for e, c in mine
            if sum(1 for p in points if p > c.point) >= pending and o.point <= c.end
        ]

    # per (thread, index) of a wait_group, the copies it waits for
    waited = {
        (t, k): copies_needed(t, o)
        for t, ops in enumerate(threads)
        for k, o in enumerate(ops)
        if o.kind == "wait_group"
    }

    def passed(t: int, pc: int, end: int) -> bool:
        """Whether thread ``t`` at ``pc`` is past its waits at ``end``."""
        ops = threads[t]
        return pc >= len(ops) or (ops[pc].point, ops[pc].rank) > (end, 0)

    def fenced_by(t: int, halves: frozenset[_Half]) -> set[_Half]:
        """The generic-write halves of thread ``t`` made or landed so far: a fence it runs
        now makes them visible to the async proxy."""
        slot = t % THREADS
        return {
            (e, r)
            for e, r in halves
            if r == slot and e in prog.generic and part_of[t] == part_of[first_thread[e]]
        }

    start: _State = (tuple(0 for _ in threads), frozenset(), frozenset(), frozenset())
    seen = {start}
    todo = [start]
    unordered: set[tuple[int, int]] = set()
    in_flight: set[int] = set()
    n_buffers = len(req.buffers)
    events_of = [[e for e, i in owner.items() if i == b] for b in range(n_buffers)]
    generic_of = [
        [(e, r) for e in events_of[b] if e in prog.generic for r in range(THREADS)]
        for b in range(n_buffers)
    ]
    first_thread = {
        e: next(t for t, ops in enumerate(threads) if any(o.key == e for o in ops if o.rank == 4))
        for e in owner
    }
    issued_by = {g: first_thread[g] for g in agents}
    # per TMA write, the index of its issue in its issuing thread's operations
    issue_index = {
        g: next(k for k, o in enumerate(threads[t]) if o.kind == "issue" and o.key == g)
        for g, t in issued_by.items()
    }
    # per (thread, index) of a barrier, where each thread taking part has it: (thread, index)
    meets = {
        (t, k): [
            (u, threads[u].index(o))
            for u in range(n_threads)
            if part_of[u] in o.key[1]  # type: ignore[index]
        ]
        for t, ops in enumerate(threads)
        for k, o in enumerate(ops)
        if o.kind == "barrier"
    }
    copy_at: dict[tuple[int, int], int] = {}  # (thread, copy event) -> its issue's index
    for t, ops in enumerate(threads):
        for k, o in enumerate(ops):
            if o.kind == "copy":
                copy_at[t, int(o.key)] = k  # type: ignore[call-overload]
    while todo:
        pcs, done, halves, fenced = todo.pop()
        touched = {owner[e] for e in done} | {owner[e] for e, _ in halves}
        for a in range(n_buffers):
            if all(e in done for e in events_of[a]):
                continue
            for b in touched:
                if b != a:
                    unordered.add((a, b))
        # An async-proxy access issued: it may land at once, so the fences must be in by now.
        proxied = {owner[e] for e in prog.proxied if e in done} | {
            owner[e] for e, _ in halves if e in prog.proxied
        }
        for a in range(n_buffers):
            if generic_of[a] and not fenced.issuperset(generic_of[a]):
                unordered.update((a, b) for b in proxied if b != a)
        nexts: list[_State] = []
        for g in agents:
            # Issued (its issuing thread has passed the issue), not landed: it may land now.
            if pcs[issued_by[g]] > issue_index[g] and g not in done:
                nexts.append((pcs, done | {g}, halves, fenced))
        for (t, e), k in copy_at.items():
            # A thread's copy, issued and not landed: it may land now.
            if pcs[t] > k and (e, t % THREADS) not in halves:
                more = halves | {(e, t % THREADS)}
                finished = all((e, r) in more for r in range(THREADS))
                nexts.append((pcs, done | {e} if finished else done, more, fenced))
                if passed(t, pcs[t], copies[e].end):
                    in_flight.add(owner[e])
        for t, ops in enumerate(threads):
            k = pcs[t]
            if k >= len(ops):
                continue
            o = ops[k]
            step = list(pcs)
            step[t] += 1
            moved = tuple(step)
            if o.kind == "barrier":
                if all(at <= pcs[u] for u, at in meets[t, k]):
                    nexts.append((moved, done, halves, fenced))
            elif o.kind == "wait":
                m = str(o.key)
                if arrived_all(m, o.point, pcs) and landed_all(m, o.point, done):
                    nexts.append((moved, done, halves, fenced))
            elif o.kind == "wait_group":
                if all(h in halves for h in waited[t, k]):
                    nexts.append((moved, done, halves, fenced))
            elif o.kind == "fence":
                nexts.append((moved, done, halves, fenced | fenced_by(t, halves)))
            elif o.kind in ("arrive", "issue", "copy"):
                nexts.append((moved, done, halves, fenced))
            else:
                e = int(o.key)  # type: ignore[call-overload]
                more = halves | {(e, t % THREADS)}
                finished = all((e, r) in more for r in range(THREADS))
                nexts.append((moved, done | {e} if finished else done, more, fenced))
        for nxt in nexts:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    out: set[tuple[int, int]] = set()
    bufs = req.buffers
    for a in range(n_buffers):
        for b in range(n_buffers):
            if a != b and bufs[a].end <= bufs[b].start and (a, b) not in unordered:
                out.add((a, b))
    return out, in_flight
