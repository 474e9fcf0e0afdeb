"""Brute force over the interleavings of a small partitioned request: every partition runs as
two threads, each stepping through the partition's operations in point order; a TMA write
runs as its own agent some time after its issue. Barriers block until every thread taking
part reaches them, an mbarrier wait until every arrive on it at an earlier point has been made
by every thread of its partition and every TMA write on it issued earlier (within the
buffer's lifetime) has landed. Every reachable state is visited, so "A's accesses all come
before B's" is decided over every schedule the syncs allow.

Supports thread accesses, TMA writes, block and named barriers, mbarrier arrives and waits:
the rules whose ordering the planner decides (proxy fences and wait_groups are checked by
the planted faults instead)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.models import PlanRequest

__all__ = ["THREADS", "ordered_pairs"]

THREADS = 2  # per partition: enough for two threads of one warp group to race


# (program counters, events done, (event, thread slot) halves made so far)
_State = tuple[tuple[int, ...], frozenset[int], frozenset[tuple[int, int]]]


@dataclass(frozen=True)
class _Op:
    point: int
    rank: int  # wait 0, barrier 2, arrive 3, access 4
    kind: str  # "wait" | "barrier" | "arrive" | "access" | "issue"
    key: object = None  # barrier: (point, members); mbarrier name; access: event id


def _program(
    req: PlanRequest,
) -> tuple[list[list[_Op]], dict[int, tuple[str, int, int]], dict[int, int]]:
    """Per thread its operations; per event id its (mbarrier, issue point, end) for TMA
    agents; per event id its buffer."""
    parts = {p.id: k for k, p in enumerate(req.partitions)}
    n = len(req.partitions)
    per_part: list[list[_Op]] = [[] for _ in range(n)]
    for point in sorted(set(req.barriers)):
        for q in range(n):
            per_part[q].append(_Op(point, 2, "barrier", (point, tuple(range(n)))))
    for s in req.syncs:
        if s.kind == "named_barrier":
            members = tuple(sorted(parts[x] for x in s.partitions or []))
            for q in members:
                per_part[q].append(_Op(s.at, 2, "barrier", (s.at, members)))
        elif s.kind == "mbarrier_wait":
            per_part[parts[s.partition or ""]].append(_Op(s.at, 0, "wait", s.mbarrier))
        elif s.kind == "mbarrier_arrive":
            per_part[parts[s.partition or ""]].append(_Op(s.at, 3, "arrive", s.mbarrier))
    agents: dict[int, tuple[str, int, int]] = {}
    owner: dict[int, int] = {}
    event = 0
    for i, b in enumerate(req.buffers):
        for a in b.accesses:
            q = parts[a.partition or ""]
            if a.agent == "tma" and a.op == "write":
                agents[event] = (a.mbarrier or "", a.at, b.end)
                per_part[q].append(_Op(a.at, 4, "issue", event))
            else:
                per_part[q].append(_Op(a.at, 4, "access", event))
            owner[event] = i
            event += 1
    threads: list[list[_Op]] = []
    for q in range(n):
        ops = sorted(per_part[q], key=lambda o: (o.point, o.rank))
        threads += [ops] * THREADS
    return threads, agents, owner


def ordered_pairs(req: PlanRequest) -> set[tuple[int, int]]:
    """Buffer pairs (earlier, later), their lifetimes disjoint in that order, such that in
    every reachable state where an access of the later one has happened, every access of the
    earlier one has too."""
    threads, agents, owner = _program(req)
    n_threads = len(threads)
    part_of = [t // THREADS for t in range(n_threads)]

    def arrived_all(m: str, before: int, pcs: tuple[int, ...]) -> bool:
        for t, ops in enumerate(threads):
            for k, o in enumerate(ops):
                if o.kind == "arrive" and o.key == m and o.point < before and pcs[t] <= k:
                    return False
        return True

    def landed_all(m: str, before: int, done: frozenset[int]) -> bool:
        return all(
            g in done
            for g, (name, issue, end) in agents.items()
            if name == m and issue < before <= end
        )

    start: _State = (tuple(0 for _ in threads), frozenset(), frozenset())
    seen = {start}
    todo = [start]
    unordered: set[tuple[int, int]] = set()
    n_buffers = len(req.buffers)
    events_of = [[e for e, i in owner.items() if i == b] for b in range(n_buffers)]
    issued_by = {
        g: next(
            t for t, ops in enumerate(threads) if any(o.kind == "issue" and o.key == g for o in ops)
        )
        for g in agents
    }
    while todo:
        pcs, done, halves = todo.pop()
        touched = {owner[e] for e in done} | {owner[e] for e, _ in halves}
        for a in range(n_buffers):
            if all(e in done for e in events_of[a]):
                continue
            for b in touched:
                if b != a:
                    unordered.add((a, b))
        nexts: list[_State] = []
        for g in agents:
            # Issued (its issuing thread has passed the issue), not landed: it may land now.
            t = issued_by[g]
            k = next(k for k, o in enumerate(threads[t]) if o.kind == "issue" and o.key == g)
            if pcs[t] > k and g not in done:
                nexts.append((pcs, done | {g}, halves))
        for t, ops in enumerate(threads):
            k = pcs[t]
            if k >= len(ops):
                continue
            o = ops[k]
            step = list(pcs)
            step[t] += 1
            moved = tuple(step)
            if o.kind == "barrier":
                members = o.key[1]  # type: ignore[index]
                if all(
                    threads[u].index(o) <= pcs[u] for u in range(n_threads) if part_of[u] in members
                ):
                    nexts.append((moved, done, halves))
            elif o.kind == "wait":
                m = str(o.key)
                if arrived_all(m, o.point, pcs) and landed_all(m, o.point, done):
                    nexts.append((moved, done, halves))
            elif o.kind in ("arrive", "issue"):
                nexts.append((moved, done, halves))
            else:
                e = int(o.key)  # type: ignore[call-overload]
                more = halves | {(e, t % THREADS)}
                finished = all((e, r) in more for r in range(THREADS))
                nexts.append((moved, done | {e} if finished else done, more))
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
    return out
