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

An mbarrier's operations are thread accesses of the partitions that run them: its init (any
partition's, at its start), the syncs naming it and the invals the plan adds or requires.
Another buffer takes its bytes only after one of its invals, inside its lifetime, that every
other operation on it is ordered before and that is itself ordered before every touch of the
later buffer (``missing_inval``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from planner.core.models import Buffer, Plan, PlanRequest

__all__ = ["check_cluster_rule", "check_partitions", "unwaited"]

_INF = 1 << 62
_MBARRIER_OP = -2  # access index of an mbarrier's operation: a thread access at its point
_MBARRIER_KINDS = ("mbarrier_wait", "expect_tx", "mbarrier_arrive", "mbarrier_inval")
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
                acc = list(map(min, acc, self.best[k]))
                suffix.append(acc)
            keys.append([key for key, _ in mine])
            suffixes.append(suffix[::-1])
        return keys, suffixes

    def observed(self, partition: int, key: tuple[int, int]) -> list[int]:
        """What an acquire of ``partition`` at ``key`` reaches, per partition (``_INF``:
        nothing): its own threads from there, and every release of the partition at or
        after it."""
        keys = self.keys_all[partition]
        k = bisect.bisect_left(keys, key)
        out = list(self.suffix_all[partition][k]) if k < len(keys) else [_INF] * self.n
        out[partition] = min(out[partition], key[0])
        return out

    def _successors(self, k: int, waits: dict[str | None, list[int]]) -> list[int]:
        """The waits an arrive or a TMA issue reaches directly (``waits``: the wait nodes
        per mbarrier, in node order)."""
        a = self.nodes[k]
        if a.kind not in ("arrive", "issue"):
            return []
        until = self.ends.get(k, _INF)
        return [j for j in waits.get(a.mbarrier, []) if a.point < self.nodes[j].point <= until]

    def _reach_all(self) -> list[list[int]]:
        """Per node, per partition, the earliest acquire reachable from it (itself included):
        nodes latest first (by key; at one key, later in the list first: block barriers,
        then the request's syncs in its order, then the plan's); an acquire reaches every
        release of its partitions after it. Two barriers at one point run in the listed
        order: a partition in both carries what it learns at the first into the second,
        never the other way round."""
        n = self.n
        nodes = self.nodes
        best = [[_INF] * n for _ in nodes]
        suffix = [[_INF] * n for _ in range(n)]  # per partition: min over its releases so far
        order = sorted(range(len(nodes)), key=lambda k: (nodes[k].key, k), reverse=True)
        waits: dict[str | None, list[int]] = {}
        for k, node in enumerate(nodes):
            if node.kind == "wait":
                waits.setdefault(node.mbarrier, []).append(k)
        succ = [self._successors(k, waits) for k in range(len(nodes))]
        for k in order:
            node = nodes[k]
            new = best[k]
            if node.kind in ("barrier", "wait"):
                for q in node.members:
                    new[q] = min(new[q], node.point)
                for q in node.members:
                    new = list(map(min, new, suffix[q]))
            for w in succ[k]:
                new = list(map(min, new, best[w]))
            best[k] = new
            if node.kind in ("barrier", "arrive", "issue"):
                for q in node.members:
                    suffix[q] = list(map(min, suffix[q], new))
        return best

    def acquired(self, partition: int, after: tuple[int, int]) -> list[int]:
        """Per partition, the earliest point of an acquire reached from the releases of
        ``partition`` later than ``after`` ((point, rank)); ``_INF``: none."""
        keys = self.keys[partition]
        k = bisect.bisect_right(keys, after)
        return self.suffix[partition][k] if k < len(keys) else [_INF] * self.n


class _Covers:
    """The syncs that complete asynchronous accesses, indexed once per check."""

    def __init__(self, request: PlanRequest) -> None:
        ids = {p.id: n for n, p in enumerate(request.partitions)}
        self.ids = ids
        self.waits: dict[str | None, list[tuple[int, int]]] = {}  # mbarrier -> (partition, at)
        self.groups: dict[tuple[str | None, str | None], list[tuple[int, int]]] = {}
        for s in request.syncs:
            if s.kind == "mbarrier_wait":
                self.waits.setdefault(s.mbarrier, []).append((ids[s.partition or ""], s.at))
            elif s.kind == "wait_group":
                self.groups.setdefault((s.partition, s.group), []).append((s.at, s.pending))
        for waits in self.groups.values():
            waits.sort(key=lambda w: w[0])  # stable: the request's order within a point
        issued: dict[tuple[str | None, str, str], set[int]] = {}
        for buf in request.buffers:
            for c in buf.accesses:
                issued.setdefault((c.partition, c.agent, c.op), set()).add(c.at)
        self.issued = {key: sorted(v) for key, v in issued.items()}

    def completions(self, b: Buffer, k: int) -> list[tuple[int, tuple[int, int]]]:
        """(partition, (point, rank)) after which the access ``k`` of ``b`` is done for that
        partition's releases."""
        a = b.accesses[k]
        me = self.ids[a.partition or ""]
        if a.agent == "threads":
            return [(me, (a.at, 9))]
        if a.agent == "tma" and a.op == "write":
            return [(q, (at, 0)) for q, at in self.waits.get(a.mbarrier, []) if a.at < at <= b.end]
        group = {"cp.async": "cp.async", "tma": "bulk", "mma": "wgmma"}[a.agent]
        issued = self.issued.get((a.partition, a.agent, a.op), [])
        for at, pending in self.groups.get((a.partition, group), []):
            if a.at < at <= b.end:
                newer = sum(1 for p in issued if a.at < p < at)
                if newer >= pending:
                    return [(me, (at, 0))]
        return []


def _mbarrier_ops(
    request: PlanRequest, plan: Plan, b: Buffer
) -> list[tuple[int, int, str, str, int]]:
    """The touches of mbarrier ``b``: its init by every partition at its start, each sync
    naming it (an inval with agent "inval") and each inval the plan adds or requires, by the
    partition that runs it."""
    ids = {p.id: n for n, p in enumerate(request.partitions)}
    out = [(q, b.start, "mbarrier", "write", _MBARRIER_OP) for q in range(len(ids))]
    for s in request.syncs:
        if s.mbarrier == b.id and s.kind in _MBARRIER_KINDS and s.partition in ids:
            agent = "inval" if s.kind == "mbarrier_inval" else "mbarrier"
            op = "read" if s.kind == "mbarrier_wait" else "write"
            out.append((ids[s.partition], s.at, agent, op, _MBARRIER_OP))
    for v in plan.invals:
        if v.mbarrier == b.id and v.origin != "existing" and v.partition in ids:
            out.append((ids[v.partition], v.at, "inval", "write", _MBARRIER_OP))
    return sorted(set(out))


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
    bytes taken with no inval ordered after its operations and before the later buffer),
    ``missing_barrier`` (an access of the earlier not ordered before one of the later),
    ``missing_fence`` (no proxy fence between a generic write and an async-proxy access); and
    ``missing_wait`` for every asynchronous access no sync completes."""
    from planner.validators.program import with_plan_syncs

    request = with_plan_syncs(request, plan)
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    graph = _Graph(request, barriers)
    fences: dict[int, list[int]] = {}
    ids = {p.id: n for n, p in enumerate(request.partitions)}
    for s in request.syncs:
        if s.kind == "fence_proxy_async" and s.partition in ids:
            fences.setdefault(ids[s.partition], []).append(s.at)
    out = [("missing_wait", why, [b]) for b, _, why in _unwaited(request)]
    reuses = _Reuses(request, graph, fences, plan)
    bufs = [b for b in request.buffers if b.id in where]
    spans = [where[b.id] for b in bufs]
    lives = [b.lifetimes for b in bufs]
    clear = _clear(reuses, bufs)
    for x, a in enumerate(bufs):
        lo_a, hi_a = spans[x]
        for y in range(x + 1, len(bufs)):
            lo_b, hi_b = spans[y]
            if not (lo_a < hi_b and lo_b < hi_a):
                continue
            b = bufs[y]
            if any(s < e2 and s2 < e for s, e in lives[x] for s2, e2 in lives[y]):
                out.append(("overlap", f"{a.id!r} and {b.id!r} are live together", [a.id, b.id]))
                continue
            first, then = (a, b) if a.end <= b.start else (b, a)
            if first.kind == "mbarrier" and not reuses.invalidated(first, then):
                out.append(
                    (
                        "missing_inval",
                        f"{then.id!r} takes bytes of mbarrier {first.id!r} with no "
                        "mbarrier_inval inside its lifetime ordered after its other operations "
                        f"and before {then.id!r}",
                        [first.id, then.id],
                    )
                )
                continue
            if not (clear[x][y] if first is a else clear[y][x]):
                out += _judge(reuses, first, then)
    return out


def unwaited(request: PlanRequest, plan: Plan) -> list[tuple[str, int, str]]:
    """(buffer, issue point, why) for each asynchronous access that no sync completes inside
    its buffer's lifetime, the plan's waits among the syncs: a wait_group of its group run by
    its own partition, or (a TMA write) an mbarrier_wait on its mbarrier."""
    from planner.validators.program import with_plan_syncs

    return _unwaited(with_plan_syncs(request, plan))


def _unwaited(request: PlanRequest) -> list[tuple[str, int, str]]:
    covers = _Covers(request)
    out: list[tuple[str, int, str]] = []
    for b in request.buffers:
        for k, a in enumerate(b.accesses):
            if a.agent != "threads" and not covers.completions(b, k):
                why = (
                    f"the {a.agent} {a.op} of {b.id!r} issued by {a.partition} at point {a.at} "
                    f"never completes: no wait_group of its partition (or, a TMA write, no "
                    f"mbarrier_wait on its mbarrier) covers it by the end {b.end} of its lifetime"
                )
                out.append((b.id, a.at, why))
    return out


def _clear(reuses: _Reuses, bufs: list[Buffer]) -> list[list[bool]]:
    """``[x][y]``: whether every touch of ``bufs[x]`` is ordered (and fenced where it must
    be) before every touch of ``bufs[y]``, for all pairs at once."""
    if not bufs:
        return []
    need, fence_need, anyone, proxy = [], [], [], []
    for b in bufs:
        latest, fenced = reuses.latest(b)
        first, first_proxy = reuses.firsts(b)
        need.append(latest)
        fence_need.append(fenced)
        anyone.append(first)
        proxy.append(first_proxy)
    a, f = np.asarray(need, dtype=np.int64), np.asarray(fence_need, dtype=np.int64)
    t, pt = np.asarray(anyone, dtype=np.int64), np.asarray(proxy, dtype=np.int64)
    ok = np.all(a[:, None, :] <= t[None, :, :], axis=2) & np.all(
        f[:, None, :] <= pt[None, :, :], axis=2
    )
    out: list[list[bool]] = ok.tolist()
    return out


_Done = list[tuple[int, tuple[int, int]]]


class _Reuses:
    """Per buffer, what its touches reach and where its touches begin, each taken once for
    every pair the buffer is in."""

    def __init__(
        self, request: PlanRequest, graph: _Graph, fences: dict[int, list[int]], plan: Plan
    ):
        self.request = request
        self.plan = plan
        self.covers = _Covers(request)
        self.graph = graph
        self.fences = fences
        self.n = len(request.partitions)
        self._touches: dict[str, list[tuple[int, int, str, str, int]]] = {}
        self._reached: dict[str, list[list[int]]] = {}  # per touch: per partition, earliest
        self._fenced: dict[str, list[list[int] | None]] = {}  # the same through a fence
        self._firsts: dict[str, tuple[list[int], list[int]]] = {}  # (any, async proxy)
        self._latest: dict[str, tuple[list[int], list[int]]] = {}  # (reached, fenced)

    def touches(self, b: Buffer) -> list[tuple[int, int, str, str, int]]:
        got = self._touches.get(b.id)
        if got is None:
            got = self._touches[b.id] = (
                _mbarrier_ops(self.request, self.plan, b)
                if b.kind == "mbarrier"
                else _touches(self.request, b)
            )
        return got

    def invalidated(self, m: Buffer, then: Buffer) -> bool:
        """Whether an inval of mbarrier ``m`` inside its lifetime follows every other
        operation on it and precedes every touch of ``then``."""
        ops = self.touches(m)
        others = [(q, at) for q, at, agent, _, _ in ops if agent != "inval"]
        later = [(r, at) for r, at, _, _, _ in self.touches(then)]
        for q, v, agent, _, _ in ops:
            if agent != "inval" or not m.start < v < m.end:
                continue
            if all(self.graph.acquired(p, (at, 9))[q] <= v for p, at in others) and all(
                self.graph.acquired(q, (v, 9))[r] <= at for r, at in later
            ):
                return True
        return False

    def firsts(self, b: Buffer) -> tuple[list[int], list[int]]:
        """Per partition, the earliest touch of ``b`` and its earliest async-proxy touch."""
        got = self._firsts.get(b.id)
        if got is None:
            anyone, proxy = [_INF] * self.n, [_INF] * self.n
            for r, r_at, agent, _, _ in self.touches(b):
                anyone[r] = min(anyone[r], r_at)
                if agent in ("tma", "mma"):
                    proxy[r] = min(proxy[r], r_at)
            got = self._firsts[b.id] = (anyone, proxy)
        return got

    def latest(self, b: Buffer) -> tuple[list[int], list[int]]:
        """Per partition, the latest of ``reached`` over the touches of ``b``, and of the
        fenced ones: what every later touch must come at or after."""
        got = self._latest.get(b.id)
        if got is None:
            reached, fenced = self.reached(b)
            need, fence_need = [0] * self.n, [0] * self.n
            for vec in reached:
                need = list(map(max, need, vec))
            for fvec in fenced:
                if fvec is not None:
                    fence_need = list(map(max, fence_need, fvec))
            got = self._latest[b.id] = (need, fence_need)
        return got

    def reached(self, b: Buffer) -> tuple[list[list[int]], list[list[int] | None]]:
        """Per touch of ``b``: per partition, the earliest point its completion is ordered
        before; and the same through a proxy fence of the completing partition (None: no
        generic write)."""
        got = self._reached.get(b.id)
        if got is not None:
            return got, self._fenced[b.id]
        reached: list[list[int]] = []
        fenced: list[list[int] | None] = []
        graph, fences = self.graph, self.fences
        for q, at, agent, op, k in self.touches(b):
            if k == _MBARRIER_OP:
                done = [(q, (at, 9))]
            elif k < 0:
                done = [(q, (b.end - 1, 9))]
            else:
                done = self.covers.completions(b, k)
            # A TMA write's mbarrier wait observes the bytes itself, for its own partition.
            look = graph.observed if agent == "tma" and op == "write" else graph.acquired
            vec = [_INF] * self.n
            for p, key in done:
                vec = list(map(min, vec, look(p, key)))
            reached.append(vec)
            if op != "write" or agent in ("tma", "mma") or k == _MBARRIER_OP:
                fenced.append(None)
                continue
            fvec = [_INF] * self.n
            for p, (point, rank) in done:
                after = [f for f in fences.get(p, []) if (f, 1) > (point, rank)]
                if after:
                    fence_reach = graph.acquired(p, (min(after), 1))
                    fvec = list(map(min, fvec, fence_reach))
            fenced.append(fvec)
        self._reached[b.id], self._fenced[b.id] = reached, fenced
        return reached, fenced


def _judge(reuses: _Reuses, first: Buffer, then: Buffer) -> list[tuple[str, str, list[str]]]:
    anyone, proxy = reuses.firsts(then)
    need, fence_need = reuses.latest(first)
    if all(v <= f for v, f in zip(need, anyone, strict=True)) and all(
        v <= f for v, f in zip(fence_need, proxy, strict=True)
    ):
        return []  # every touch ordered before every later touch: no touch to name
    names = [p.id for p in reuses.request.partitions]
    reached, fenced = reuses.reached(first)
    later = reuses.touches(then)
    for n, (q, at, agent, op, _) in enumerate(reuses.touches(first)):
        vec = reached[n]
        if any(v > f for v, f in zip(vec, anyone, strict=True)):
            r, r_at = next((r, r_at) for r, r_at, _, _, _ in later if vec[r] > r_at)
            return [
                (
                    "missing_barrier",
                    f"{then.id!r} ({names[r]}, point {r_at}) reuses bytes of {first.id!r} "
                    f"({agent} {op} by {names[q]} at point {at}) and no synchronisation "
                    "orders them",
                    [first.id, then.id],
                )
            ]
        fvec = fenced[n]
        if fvec is None or all(v <= f for v, f in zip(fvec, proxy, strict=True)):
            continue
        r, r_at, r_agent = next(
            (r, r_at, r_agent)
            for r, r_at, r_agent, _, _ in later
            if r_agent in ("tma", "mma") and fvec[r] > r_at
        )
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


def check_cluster_rule(request: PlanRequest, plan: Plan) -> list[tuple[str, str, list[str]]]:
    """``missing_cluster_barrier`` for each pair of different buffers on common bytes, one
    cluster-scoped, with no running cluster barrier after every access of the earlier is
    done (its covering sync, for an asynchronous one) and at or before the later's first
    touch (docs/design.md, Clusters): a peer CTA may be anywhere between two of them."""
    from planner.validators.clusters import running_cluster_barriers
    from planner.validators.program import with_plan_syncs

    request = with_plan_syncs(request, plan)
    points = running_cluster_barriers(request, plan)
    covers = _Covers(request)
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    bufs = [b for b in request.buffers if b.id in where and b.kind != "mbarrier"]

    def done(b: Buffer) -> int:
        """The first point a cluster barrier runs after every access of ``b`` is done."""
        latest = 0
        for _, at, _, _, k in _touches(request, b):
            ends = [(at, 9)] if k < 0 else [key for _, key in covers.completions(b, k)]
            if not ends:
                return _INF
            # After a thread's access at p: from p + 1; after a wait at w: w (waits first).
            latest = max(latest, min(p + 1 if rank == 9 else p for p, rank in ends))
        return latest

    out: list[tuple[str, str, list[str]]] = []
    for x, a in enumerate(bufs):
        for b in bufs[x + 1 :]:
            (lo_a, hi_a), (lo_b, hi_b) = where[a.id], where[b.id]
            if not (lo_a < hi_b and lo_b < hi_a) or "cluster" not in (a.scope, b.scope):
                continue
            if a.start < b.end and b.start < a.end:
                continue  # live together: an overlap, reported as such
            first, then = (a, b) if a.end <= b.start else (b, a)
            after = done(first)
            until = min(at for _, at, _, _, _ in _touches(request, then))
            k = bisect.bisect_left(points, after)
            if k < len(points) and points[k] <= until:
                continue
            out.append(
                (
                    "missing_cluster_barrier",
                    f"{then.id!r} (from point {until}) reuses bytes of {first.id!r} (done at "
                    f"point {after}) with no cluster barrier between them: a peer CTA touches "
                    "the bytes of a cluster-scoped buffer",
                    [first.id, then.id],
                )
            )
    return out
