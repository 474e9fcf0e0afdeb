"""The static check of a plan for a request with partitions (docs/design.md, Warp-specialised
partitions), written apart from the planner's order (``planner.core.partitions``) so that
each can catch the other's mistakes.

The synchronisation is an explicit graph. Nodes are sync operations: a block barrier (every
partition), a named barrier (its partitions), an ``mbarrier_arrive`` and a wait. A *release* (a
barrier, an arrive) publishes what its partition's threads did before it; an *acquire* (a
barrier, a wait) makes it visible to its partition's threads after it. Edges: an arrive to each
later wait on its mbarrier; an acquire to each release of the same partition at or after it; a
TMA write's issue to each wait on its mbarrier that observes it (it is reached only from an
acquire: the copy carries what its issuing thread saw, not what the partition's other threads
did since). An access at ``p`` by ``P`` happens before an access at ``q`` by ``R`` when a
release of ``P`` after ``p`` reaches an acquire of ``R`` at or before ``q``. A dynamic
search, one per starting release.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.core.models import Buffer, Plan, PlanRequest

__all__ = ["check_partitions"]

_INF = 1 << 62
_RANK = {"wait": 0, "fence": 1, "barrier": 2, "arrive": 3, "issue": 4}


@dataclass(frozen=True)
class _Node:
    kind: str  # "wait" | "fence" | "barrier" | "arrive" | "issue" (a TMA write's)
    point: int
    members: frozenset[int]
    mbarrier: str | None = None

    @property
    def key(self) -> tuple[int, int]:
        return self.point, _RANK[self.kind]


class _Graph:
    def __init__(self, request: PlanRequest, barriers: list[int]) -> None:
        ids = {p.id: k for k, p in enumerate(request.partitions)}
        everyone = frozenset(range(len(request.partitions)))
        self.ends: dict[int, int] = {}  # issue node -> its buffer's end
        nodes = [_Node("barrier", b, everyone) for b in sorted(set(barriers))]
        for s in request.syncs:
            if s.kind == "named_barrier":
                nodes.append(_Node("barrier", s.at, frozenset(ids[n] for n in s.partitions or [])))
            elif s.kind == "mbarrier_arrive":
                nodes.append(_Node("arrive", s.at, frozenset({ids[s.partition or ""]}), s.mbarrier))
            elif s.kind == "mbarrier_wait":
                nodes.append(_Node("wait", s.at, frozenset({ids[s.partition or ""]}), s.mbarrier))
        for buf in request.buffers:
            for acc in buf.accesses:
                if acc.agent == "tma" and acc.op == "write":
                    who = frozenset({ids[acc.partition or ""]})
                    issue = _Node("issue", acc.at, who, acc.mbarrier)
                    nodes.append(issue)
                    self.ends[len(nodes) - 1] = buf.end
        self.nodes = nodes
        self.n = len(request.partitions)
        self.best = self._reach_all()
        # Per partition: its releases (barriers, arrives) by key, and the suffix minima of
        # what they reach, for the queries.
        self.keys, self.suffix = self._suffixes(("barrier", "arrive"))
        # What an acquire reaches: the releases after it, a TMA issue's carry included.
        self.keys_all, self.suffix_all = self._suffixes(("barrier", "arrive", "issue"))

    def _suffixes(
        self, kinds: tuple[str, ...]
    ) -> tuple[list[list[tuple[int, int]]], list[list[list[int]]]]:
        keys: list[list[tuple[int, int]]] = []
        suffixes: list[list[list[int]]] = []
        for q in range(self.n):
            mine = sorted(
                (n.key, k) for k, n in enumerate(self.nodes) if n.kind in kinds and q in n.members
            )
            acc = [_INF] * self.n
            suffix: list[list[int]] = []
            for _, k in reversed(mine):
                acc = [min(x, y) for x, y in zip(acc, self.best[k], strict=True)]
                suffix.append(acc)
            keys.append([key for key, _ in mine])
            suffixes.append(suffix[::-1])
        return keys, suffixes

    def observed(self, partition: int, key: tuple[int, int]) -> dict[int, int]:
        """What an acquire of ``partition`` at ``key`` reaches: its own threads from there,
        and every release of the partition at or after it."""
        keys = self.keys_all[partition]
        k = bisect.bisect_left(keys, key)
        out = {partition: key[0]}
        if k < len(keys):
            for q, p in enumerate(self.suffix_all[partition][k]):
                if p < out.get(q, _INF):
                    out[q] = p
        return out

    def _successors(self, k: int) -> list[int]:
        """The waits an arrive or a TMA issue reaches directly."""
        a = self.nodes[k]
        if a.kind not in ("arrive", "issue"):
            return []
        until = self.ends.get(k, _INF)
        return [
            j
            for j, w in enumerate(self.nodes)
            if w.kind == "wait" and w.mbarrier == a.mbarrier and a.point < w.point <= until
        ]

    def _reach_all(self) -> list[list[int]]:
        """Per node, per partition, the earliest acquire reachable from it (itself included):
        nodes by key, latest first; an acquire reaches every release of its partitions at or
        after it (the same key included: rounds until nothing changes there)."""
        n = self.n
        nodes = self.nodes
        best = [[_INF] * n for _ in nodes]
        suffix = [[_INF] * n for _ in range(n)]  # per partition: min over its releases so far
        order = sorted(range(len(nodes)), key=lambda k: nodes[k].key, reverse=True)
        succ = [self._successors(k) for k in range(len(nodes))]
        i = 0
        while i < len(order):
            j = i
            while j < len(order) and nodes[order[j]].key == nodes[order[i]].key:
                j += 1
            group = order[i:j]
            changed = True
            while changed:
                changed = False
                for k in group:
                    node = nodes[k]
                    new = list(best[k])
                    if node.kind in ("barrier", "wait"):
                        for q in node.members:
                            new[q] = min(new[q], node.point)
                        for q in node.members:
                            new = [min(x, y) for x, y in zip(new, suffix[q], strict=True)]
                    for w in succ[k]:
                        new = [min(x, y) for x, y in zip(new, best[w], strict=True)]
                    if new != best[k]:
                        best[k] = new
                        changed = True
                for k in group:
                    node = nodes[k]
                    if node.kind in ("barrier", "arrive", "issue"):
                        for q in node.members:
                            merged = [min(x, y) for x, y in zip(suffix[q], best[k], strict=True)]
                            if merged != suffix[q]:
                                suffix[q] = merged
                                changed = True
            i = j
        return best

    def acquired(self, partition: int, after: tuple[int, int]) -> dict[int, int]:
        """Per partition, the earliest point of an acquire reached from the releases of
        ``partition`` later than ``after`` ((point, rank))."""
        keys = self.keys[partition]
        k = bisect.bisect_right(keys, after)
        if k >= len(keys):
            return {}
        return {q: p for q, p in enumerate(self.suffix[partition][k]) if p < _INF}


def _completions(request: PlanRequest, b: Buffer, k: int) -> list[tuple[int, tuple[int, int]]]:
    """(partition, (point, rank)) after which the access ``k`` of ``b`` is done for that
    partition's releases."""
    ids = {p.id: n for n, p in enumerate(request.partitions)}
    a = b.accesses[k]
    me = ids[a.partition or ""]
    if a.agent == "threads":
        return [(me, (a.at, 9))]
    if a.agent == "tma" and a.op == "write":
        return [
            (ids[s.partition or ""], (s.at, 0))
            for s in request.syncs
            if s.kind == "mbarrier_wait" and s.mbarrier == a.mbarrier and a.at < s.at <= b.end
        ]
    group = {"cp.async": "cp.async", "tma": "bulk", "mma": "wgmma"}[a.agent]
    issued = sorted(
        {
            c.at
            for buf in request.buffers
            for c in buf.accesses
            if c.partition == a.partition and c.agent == a.agent and c.op == a.op
        }
    )
    for s in sorted(request.syncs, key=lambda s: s.at):
        mine = s.kind == "wait_group" and s.group == group and s.partition == a.partition
        if mine and a.at < s.at <= b.end:
            newer = sum(1 for p in issued if a.at < p < s.at)
            if newer >= s.pending:
                return [(me, (s.at, 0))]
    return []


def _touches(request: PlanRequest, b: Buffer) -> list[tuple[int, int, str, str, int]]:
    """(partition, point, agent, op, access index) of each access; a buffer without accesses
    is touched by every partition at its start and its last point."""
    ids = {p.id: n for n, p in enumerate(request.partitions)}
    if not b.accesses:
        out = []
        for q in range(len(request.partitions)):
            out += [(q, b.start, "threads", "write", -1), (q, b.end - 1, "threads", "read", -1)]
        return out
    return [(ids[a.partition or ""], a.at, a.agent, a.op, k) for k, a in enumerate(b.accesses)]


def check_partitions(
    request: PlanRequest, plan: Plan, barriers: list[int]
) -> list[tuple[str, str, list[str]]]:
    """(code, message, buffers) for every pair of buffers the plan puts on common bytes with
    nothing ordering them: ``overlap`` (live together), ``missing_inval`` (an mbarrier's
    bytes), ``missing_barrier`` (an access of the earlier not ordered before one of the
    later), ``missing_fence`` (no proxy fence between a generic write and an async-proxy
    access)."""
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    graph = _Graph(request, barriers)
    fences: dict[int, list[int]] = {}
    ids = {p.id: n for n, p in enumerate(request.partitions)}
    for s in request.syncs:
        if s.kind == "fence_proxy_async" and s.partition in ids:
            fences.setdefault(ids[s.partition], []).append(s.at)
    out: list[tuple[str, str, list[str]]] = []
    memo: dict[tuple[str, int], _Done] = {}  # (buffer, access) -> where it is done
    touches: dict[str, list[tuple[int, int, str, str, int]]] = {}  # buffer -> its touches
    seen: dict[tuple[str, int], list[dict[int, int]]] = {}  # (buffer, touch) -> reached
    bufs = [b for b in request.buffers if b.id in where]
    for x, a in enumerate(bufs):
        for b in bufs[x + 1 :]:
            (lo_a, hi_a), (lo_b, hi_b) = where[a.id], where[b.id]
            if not (lo_a < hi_b and lo_b < hi_a):
                continue
            if a.kind == "mbarrier" or b.kind == "mbarrier":
                out.append(
                    (
                        "missing_inval",
                        f"{a.id!r} and {b.id!r} share bytes; an mbarrier of a partitioned "
                        "request keeps its bytes",
                        [a.id, b.id],
                    )
                )
                continue
            if any(s < e2 and s2 < e for s, e in a.lifetimes for s2, e2 in b.lifetimes):
                out.append(("overlap", f"{a.id!r} and {b.id!r} are live together", [a.id, b.id]))
                continue
            first, then = (a, b) if a.end <= b.start else (b, a)
            out += _judge(request, graph, fences, first, then, memo, touches, seen)
    return out


_Done = list[tuple[int, tuple[int, int]]]


def _judge(
    request: PlanRequest,
    graph: _Graph,
    fences: dict[int, list[int]],
    first: Buffer,
    then: Buffer,
    memo: dict[tuple[str, int], _Done],
    touches: dict[str, list[tuple[int, int, str, str, int]]],
    seen: dict[tuple[str, int], list[dict[int, int]]],
) -> list[tuple[str, str, list[str]]]:
    names = [p.id for p in request.partitions]
    later = touches.get(then.id)
    if later is None:
        later = touches[then.id] = _touches(request, then)
    mine = touches.get(first.id)
    if mine is None:
        mine = touches[first.id] = _touches(request, first)
    for n, (q, at, agent, op, k) in enumerate(mine):
        if k < 0:
            done: _Done = [(q, (first.end - 1, 9))]
        else:
            cached = memo.get((first.id, k))
            if cached is None:
                cached = memo[first.id, k] = _completions(request, first, k)
            done = cached
        reached = seen.get((first.id, n))
        if reached is None:
            # A TMA write's mbarrier wait observes the bytes itself, for its own partition.
            look = graph.observed if agent == "tma" and op == "write" else graph.acquired
            reached = seen[first.id, n] = [look(p, key) for p, key in done]
        for r, r_at, _, _, _ in later:
            if not any(got.get(r, _INF) <= r_at for got in reached):
                return [
                    (
                        "missing_barrier",
                        f"{then.id!r} ({names[r]}, point {r_at}) reuses bytes of {first.id!r} "
                        f"({agent} {op} by {names[q]} at point {at}) and no synchronisation "
                        "orders them",
                        [first.id, then.id],
                    )
                ]
        if op != "write" or agent in ("tma", "mma"):
            continue
        for r, r_at, r_agent, _, _ in later:
            if r_agent not in ("tma", "mma"):
                continue
            ok = False
            for p, (point, rank) in done:
                after = [f for f in fences.get(p, []) if (f, 1) > (point, rank)]
                if after and graph.acquired(p, (min(after), 1)).get(r, 1 << 62) <= r_at:
                    ok = True
            if not ok:
                return [
                    (
                        "missing_fence",
                        f"{then.id!r} reaches through the async proxy ({r_agent} by {names[r]} "
                        f"at point {r_at}) bytes {first.id!r} wrote through the generic proxy at "
                        f"point {at}, with no fence_proxy_async by {names[q]} ordered between",
                        [first.id, then.id],
                    )
                ]
    return []
