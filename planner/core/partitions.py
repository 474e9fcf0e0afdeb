"""The happens-before order of a request with partitions, and the buffer pairs it keeps
apart (docs/design.md, Warp-specialised partitions).

Events are (partition, point). A partition's syncs at a point run before its accesses there
(waits, then fences, then barriers and arrives). What orders the accesses of one partition
at ``p`` before those of another (or of other threads of the same one) at ``q``:

- a block barrier at ``b``, ``p < b <= q`` (every partition takes part);
- a named barrier at ``b``, ``p < b <= q``, both partitions taking part;
- an ``mbarrier_arrive`` on ``m`` at ``a > p`` by the first partition, and an
  ``mbarrier_wait`` on ``m`` at ``w``, ``a < w <= q``, by the second (a wait observes every
  arrive at an earlier point: the point axis gives the phases' order);
- a TMA write issued at ``i`` by a partition that had acquired the work by ``i``, completing
  on ``m``, and a wait on ``m`` at ``w``, ``i < w <= q`` (the copy is issued after what its
  thread saw, and lands before the wait returns);

and chains of them. Program order alone orders nothing between two threads, inside one
partition or across two.

An access's completion is where it is known done: a thread access at ``p`` by ``P`` is done
for ``P``'s syncs from ``p + 1``; an asynchronous one when its covering sync returns: a
``wait_group`` of its group by the issuing partition, or (a TMA write) any ``mbarrier_wait``
on its mbarrier after the issue, by whichever partition waits. Buffer ``A`` may hand its
bytes to ``B`` when their lifetimes are disjoint and every access of ``A`` is done and
ordered before every access (or issue) of ``B``; a generic-proxy write of ``A`` before an
async-proxy access of ``B`` also needs a ``fence_proxy_async`` by the writing partition after
the write, ordered the same way.

An mbarrier's operations (its init, taken as every partition's at its start; the syncs naming
it; its invals) are its touches, each a thread access by its partition at its point. Its
bytes go to another buffer only after an ``mbarrier_inval`` by a partition ``P`` at ``v``
inside its lifetime with every other touch ordered before ``v``: the request's, else (sync
"insert" or "none") one at the earliest such point of any partition (``mbarrier_invals``);
without one it keeps its bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from planner.core.models import Buffer, PlanRequest
from planner.core.models.sync import ASYNC_PROXY_AGENTS, MBARRIER_KINDS

__all__ = [
    "INF",
    "Invals",
    "Order",
    "PairOrder",
    "Summary",
    "mbarrier_invals",
    "pair_orders",
    "summary",
    "weight_clique",
]

INF = 1 << 62
_GROUP = {("cp.async", "write"): "cp.async", ("tma", "read"): "bulk", ("mma", "read"): "wgmma"}

Source = tuple[tuple[int, int], ...]  # any one of (partition, point from which it is done)
Target = tuple[int, int]  # (partition, point)
# A sync event: (point, rank, partition, mbarrier, members; for an issue, (its buffer's end,))
Event = tuple[int, int, int, str, tuple[int, ...]]
EventGroup = tuple[int, int, list[Event]]  # (point, rank, the events there)
Origin = Literal["existing", "inserted", "required"]
Invals = dict[int, tuple[int, int, Origin]]  # mbarrier buffer index -> (partition, point, origin)


@dataclass
class Order:
    """Happens-before on (partition, point) events of one partitioned request."""

    n: int  # partitions
    blocks: list[int]  # block barrier points, sorted
    named: list[tuple[int, frozenset[int]]]  # (point, partitions taking part)
    arrives: dict[str, list[tuple[int, int]]]  # mbarrier -> (point, partition)
    waits: dict[str, list[tuple[int, int]]]  # mbarrier -> (point, partition), sorted
    # mbarrier -> (issue point, partition, end): a TMA write completing on it carries what its
    # issuing partition had acquired by the issue to the waits that observe it
    issues: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    _memo: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    _releases: list[list[int]] | None = None  # per partition: its releasing sync points
    _events: list[Event] | None = None
    _groups: list[EventGroup] | None = None
    _group_keys: list[tuple[int, int]] | None = None

    def _sweep(self) -> list[Event]:
        """The sync events by (point, rank): (point, rank, partition, mbarrier, members; for
        an issue, (its buffer's end,))."""
        if self._events is None:
            ev: list[Event] = []
            everyone = tuple(range(self.n))
            ev += [(b, 2, -1, "", everyone) for b in self.blocks]
            ev += [(at, 2, -1, "", tuple(sorted(members))) for at, members in self.named]
            for m, pairs in self.waits.items():
                ev += [(at, 0, q, m, ()) for at, q in pairs]
            for m, pairs in self.arrives.items():
                ev += [(at, 3, q, m, ()) for at, q in pairs]
            for m, issued in self.issues.items():
                ev += [(at, 4, q, m, (end,)) for at, q, end in issued]
            # By point and rank only: at one point the block barriers come first, then the
            # named barriers in the order the request lists them (their program order).
            self._events = sorted(ev, key=lambda e: (e[0], e[1]))
        return self._events

    def _grouped(self) -> tuple[list[tuple[int, int]], list[EventGroup]]:
        """The sync events grouped by (point, rank), and the groups' keys (for bisection)."""
        if self._groups is None or self._group_keys is None:
            groups: list[EventGroup] = []
            for e in self._sweep():
                if groups and groups[-1][0] == e[0] and groups[-1][1] == e[1]:
                    groups[-1][2].append(e)
                else:
                    groups.append((e[0], e[1], [e]))
            self._groups = groups
            self._group_keys = [(point, rank) for point, rank, _ in groups]
        return self._group_keys, self._groups

    def _next_release(self, partition: int, avail: int) -> int:
        """The point of the partition's first block barrier, named barrier or arrive at or
        after ``avail`` (INF: none)."""
        if self._releases is None:
            pts: list[set[int]] = [set(self.blocks) for _ in range(self.n)]
            for at, members in self.named:
                for q in members:
                    pts[q].add(at)
            for arrives in self.arrives.values():
                for at, q in arrives:
                    pts[q].add(at)
            self._releases = [sorted(x) for x in pts]
        points = self._releases[partition]
        k = bisect.bisect_left(points, avail)
        return points[k] if k < len(points) else INF

    def reach(self, partition: int, avail: int, seen: bool = False) -> list[int]:
        """Per partition, the first point from which its accesses are ordered after the work
        ``partition`` finished before its syncs at ``avail`` (INF: never); ``seen``: its
        threads themselves observed the work there (an mbarrier wait on a TMA write)."""
        if not seen:
            # Only the partition's first releasing sync at or after ``avail`` matters.
            avail = self._next_release(partition, avail)
        key = (partition, avail if not seen else -1 - avail)
        got = self._memo.get(key)
        if got is not None:
            return got
        ordered = [INF] * self.n
        syncs_from = [INF] * self.n  # a partition's syncs at or after it follow the work
        syncs_from[partition] = avail
        if seen:
            ordered[partition] = avail
        # Every edge lands at a point no earlier than its cause: one sweep in point order
        # (waits, barriers, arrives, issues at each point) reaches the fixed point. Barriers
        # at one point run once each, in order: a partition in two of them learns from the
        # first only what it carries into the second, never the other way round.
        keys, groups = self._grouped()
        armed: dict[str, int] = {}  # mbarrier -> earliest arrive that carries the work
        carried: dict[str, list[tuple[int, int]]] = {}  # mbarrier -> (issue, end) that carry
        for point, rank, group in groups[bisect.bisect_left(keys, (avail, -1)) :]:
            if rank == 0:  # waits
                for _, _, q, m, _ in group:
                    hit = armed.get(m, INF) < point or any(
                        i < point <= end for i, end in carried.get(m, [])
                    )
                    if hit:
                        ordered[q] = min(ordered[q], point)
                        syncs_from[q] = min(syncs_from[q], point)
            elif rank == 2:  # block and named barriers: their members
                for _, _, _, _, members in group:
                    if any(syncs_from[q] <= point for q in members):
                        for q in members:
                            ordered[q] = min(ordered[q], point)
                            syncs_from[q] = min(syncs_from[q], point)
            elif rank == 3:  # arrives
                for _, _, q, m, _ in group:
                    if syncs_from[q] <= point and m not in armed:
                        armed[m] = point
            else:  # TMA issues
                for _, _, q, m, members in group:
                    if ordered[q] <= point:
                        carried.setdefault(m, []).append((point, members[0]))
            if INF not in ordered:
                break  # every partition ordered: later events land later, and lower nothing
        self._memo[key] = ordered
        return ordered


def cluster_points(req: PlanRequest) -> list[int]:
    """The request's cluster barrier points; none without a cluster (taken as absent)."""
    if req.cluster is None:
        return []
    return sorted({s.at for s in req.syncs if s.kind == "cluster_barrier"})


def order_of(req: PlanRequest, extra_blocks: Sequence[int] = ()) -> Order:
    """The request's sync edges (and block barriers at ``extra_blocks``)."""
    index = {p.id: k for k, p in enumerate(req.partitions)}
    named: list[tuple[int, frozenset[int]]] = []
    arrives: dict[str, list[tuple[int, int]]] = {}
    waits: dict[str, list[tuple[int, int]]] = {}
    for s in req.syncs:
        if s.kind == "named_barrier":
            named.append((s.at, frozenset(index[n] for n in s.partitions or [])))
        elif s.kind == "mbarrier_arrive" and s.mbarrier and s.partition:
            arrives.setdefault(s.mbarrier, []).append((s.at, index[s.partition]))
        elif s.kind == "mbarrier_wait" and s.mbarrier and s.partition:
            waits.setdefault(s.mbarrier, []).append((s.at, index[s.partition]))
    issues: dict[str, list[tuple[int, int, int]]] = {}
    for b in req.buffers:
        for a in b.accesses:
            if a.agent == "tma" and a.op == "write" and a.mbarrier and a.partition:
                issues.setdefault(a.mbarrier, []).append((a.at, index[a.partition], b.end))
    return Order(
        issues=issues,
        n=len(req.partitions),
        # A cluster barrier orders the CTA's own threads too (counted only with a cluster).
        blocks=sorted({*req.barriers, *extra_blocks, *cluster_points(req)}),
        named=sorted(named, key=lambda x: x[0]),  # at one point, in the request's order
        arrives=arrives,
        waits={m: sorted(w) for m, w in waits.items()},
    )


def mbarrier_touches(req: PlanRequest, i: int) -> tuple[list[Target], list[Target]]:
    """(partition, point) of mbarrier buffer ``i``'s touches other than its invals (its init
    by every partition at its start, each wait, arrive and expect_tx), and of the request's
    invals on it."""
    b = req.buffers[i]
    index = {p.id: k for k, p in enumerate(req.partitions)}
    others: list[Target] = [(q, b.start) for q in range(len(req.partitions))]
    invals: list[Target] = []
    for s in req.syncs:
        if s.mbarrier == b.id and s.kind in MBARRIER_KINDS and s.partition in index:
            (invals if s.kind == "mbarrier_inval" else others).append((index[s.partition], s.at))
    return others, invals


def mbarrier_invals(req: PlanRequest, order: Order | None = None) -> Invals:
    """Per mbarrier buffer, the inval its bytes wait for: the request's earliest (by point,
    then partition) inside its lifetime with every other touch ordered before it; else, under
    sync "insert" ("inserted") or "none" ("required"), one by the partition whose earliest
    such point is the earliest (then the first in request order). An mbarrier left out keeps
    its bytes (``order``: the request's, built when None and needed)."""
    out: Invals = {}
    policy = req.options.sync
    n = len(req.partitions)
    for i, b in enumerate(req.buffers):
        if b.kind != "mbarrier":
            continue
        if order is None:
            order = order_of(req)
        others, given = mbarrier_touches(req, i)
        # Per partition, the first point from which its accesses follow every other touch.
        after = [0] * n
        for q, at in others:
            after = list(map(max, after, order.reach(q, at + 1)))
        mine = sorted((at, q) for q, at in given if b.start < at < b.end and after[q] <= at)
        if mine:
            out[i] = (mine[0][1], mine[0][0], "existing")
            continue
        if policy == "existing":
            continue
        at, q = min((at, q) for q, at in enumerate(after))
        if at < b.end:
            out[i] = (q, at, "inserted" if policy == "insert" else "required")
    return out


@dataclass(frozen=True)
class Events:
    """What one buffer's accesses need ordered: their completions and their first touches."""

    done: list[Source]  # each must be ordered before every target of a later buffer
    seen: list[Source]  # per ``done``: the waits that observed it (TMA writes), else ()
    targets: list[Target]
    generic: list[Source]  # completions of generic-proxy writes (fence after them)
    proxy: list[Target]  # issues of async-proxy accesses


def events(
    req: PlanRequest, i: int, covers: Covers | None = None, inval: Target | None = None
) -> Events:
    """The events of buffer ``i`` (docs/design.md, Warp-specialised partitions); for an
    mbarrier, its touches with ``inval`` (partition, point), the one its bytes wait for."""
    b = req.buffers[i]
    covers = Covers(req) if covers is None else covers
    index = {p.id: k for k, p in enumerate(req.partitions)}
    everyone = range(len(req.partitions))
    if b.kind == "mbarrier":
        others, given = mbarrier_touches(req, i)
        touched = sorted({*others, *given, *([] if inval is None else [inval])})
        return Events(
            done=[((q, at + 1),) for q, at in touched],
            seen=[() for _ in touched],
            targets=touched,
            generic=[],
            proxy=[],
        )
    if not b.accesses:
        # No accesses given: any partition may touch it at any point of its lifetime.
        return Events(
            done=[((q, b.end),) for q in everyone],
            seen=[() for _ in everyone],
            targets=[(q, b.start) for q in everyone],
            generic=[((q, b.end),) for q in everyone],
            proxy=[],
        )
    done: list[Source] = []
    seen: list[Source] = []
    targets: list[Target] = []
    generic: list[Source] = []
    proxy: list[Target] = []
    for a in b.accesses:
        q = index[a.partition or ""]
        targets.append((q, a.at))
        if a.agent == "threads":
            finished: Source = ((q, a.at + 1),)
        else:
            finished = covers.completion(b, a.agent, a.op, a.at, q, a.mbarrier)
        done.append(finished)
        # An mbarrier wait observes the complete-tx itself: its threads see the bytes.
        seen.append(finished if a.agent == "tma" and a.op == "write" else ())
        if a.op == "write" and a.agent not in ASYNC_PROXY_AGENTS:
            generic.append(finished)
        if a.agent in ASYNC_PROXY_AGENTS:
            proxy.append((q, a.at))
    return Events(done=done, seen=seen, targets=targets, generic=generic, proxy=proxy)


class Covers:
    """The syncs that complete a request's asynchronous accesses, indexed once."""

    def __init__(self, req: PlanRequest) -> None:
        index = {p.id: k for k, p in enumerate(req.partitions)}
        self.waits: dict[str | None, list[tuple[int, int]]] = {}  # mbarrier -> (partition, at)
        # (partition, group) -> (at, pending), by point (the request's order within one)
        self.groups: dict[tuple[int, str | None], list[tuple[int, int]]] = {}
        for s in req.syncs:
            if s.kind == "mbarrier_wait" and s.partition in index:
                self.waits.setdefault(s.mbarrier, []).append((index[s.partition], s.at))
            elif s.kind == "wait_group" and s.partition in index:
                self.groups.setdefault((index[s.partition], s.group), []).append((s.at, s.pending))
        for waits in self.groups.values():
            waits.sort(key=lambda w: w[0])
        commits: dict[tuple[int, str], set[int]] = {}  # (partition, group) -> issue points
        for c in req.buffers:
            for a in c.accesses:
                group = _GROUP.get((a.agent, a.op))
                if group is not None and a.partition in index:
                    commits.setdefault((index[a.partition], group), set()).add(a.at)
        self.commits = {key: sorted(v) for key, v in commits.items()}

    def completion(self, b: Buffer, agent: str, op: str, at: int, q: int, m: str | None) -> Source:
        """Where an asynchronous access is done: (partition, point) of each sync that returns
        only once it is; empty when none does within the buffer's lifetime."""
        if agent == "tma" and op == "write":
            return tuple((p, w) for p, w in self.waits.get(m, []) if at < w <= b.end)
        group = _GROUP.get((agent, op))
        if group is None:
            return ()
        commits = self.commits.get((q, group), [])
        for w, pending in self.groups.get((q, group), []):
            if not at < w <= b.end:
                continue
            later = bisect.bisect_left(commits, w) - bisect.bisect_right(commits, at)
            if later >= pending:
                return ((q, w),)
        return ()


def fences_of(req: PlanRequest) -> dict[int, list[int]]:
    """Per partition, the points of its proxy fences, sorted."""
    index = {p.id: k for k, p in enumerate(req.partitions)}
    out: dict[int, list[int]] = {}
    for s in req.syncs:
        if s.kind == "fence_proxy_async" and s.partition in index:
            out.setdefault(index[s.partition], []).append(s.at)
    return {q: sorted(v) for q, v in out.items()}


@dataclass(frozen=True)
class Summary:
    """One buffer's events as per-partition points (INF: none, or never)."""

    ready: list[int]  # from here on, every access of the buffer is done and ordered
    fenced: list[int] | None  # from here on, its generic writes are fenced too (None: none)
    first: list[int]  # its first access (or issue)
    proxy_first: list[int]  # its first async-proxy issue
    lo: int | None  # the earliest point a new block barrier orders its work (None: never)
    fence_lo: int | None  # the same, its generic writes fenced (None: never, or none)
    hi: int  # its first access, any partition


def summary(order: Order, fences: dict[int, list[int]], ev: Events) -> Summary:
    """``ev`` summarised per partition (docs/design.md, Warp-specialised partitions)."""
    n = order.n
    ready = [0] * n
    lo: int | None = 0
    for src, seen in zip(ev.done, ev.seen, strict=True):
        if not src:
            ready, lo = [INF] * n, None
            break
        reaches = [order.reach(p, avail, (p, avail) in seen) for p, avail in src]
        # Per partition: the earliest of the sources, then the latest over the accesses.
        ready = list(map(max, ready, reaches[0] if len(reaches) == 1 else map(min, *reaches)))
        if lo is not None:
            lo = max(lo, min(avail for _, avail in src))
    fenced: list[int] | None = None
    fence_lo: int | None = None
    if ev.generic:
        fenced, fence_lo = [0] * n, 0
        for src in ev.generic:
            firsts: list[tuple[int, int]] = []
            for p, avail in src:
                pts = fences.get(p, [])
                k = bisect.bisect_left(pts, avail)
                if k < len(pts):
                    firsts.append((p, pts[k]))
            if not firsts:
                fenced, fence_lo = [INF] * n, None
                break
            reaches = [order.reach(p, f) for p, f in firsts]
            fenced = list(map(max, fenced, reaches[0] if len(reaches) == 1 else map(min, *reaches)))
            if fence_lo is not None:
                fence_lo = max(fence_lo, min(f for _, f in firsts))
    first = [INF] * n
    for q, at in ev.targets:
        first[q] = min(first[q], at)
    proxy_first = [INF] * n
    for q, at in ev.proxy:
        proxy_first[q] = min(proxy_first[q], at)
    hi = min((at for _, at in ev.targets), default=INF)
    return Summary(ready, fenced, first, proxy_first, lo, fence_lo, hi)


def ordered(x: Summary, y: Summary) -> bool:
    """Whether every access of ``x``'s buffer is done and ordered before every access of
    ``y``'s (with a proxy fence where a generic write meets an async-proxy access)."""
    if any(r > f for r, f in zip(x.ready, y.first, strict=True)):
        return False
    return x.fenced is None or all(r <= f for r, f in zip(x.fenced, y.proxy_first, strict=True))


def barrier_window(x: Summary, y: Summary, fence_new: bool = False) -> tuple[int, int] | None:
    """The points ``[lo, hi]`` where one new block barrier orders ``x``'s buffer before
    ``y``'s (with the request's own fences; ``fence_new``: with a new fence right after each
    generic write instead), or None."""
    if x.lo is None:
        return None
    lo = x.lo
    if x.fenced is not None and min(y.proxy_first) < INF and not fence_new:
        if x.fence_lo is None:
            return None
        lo = max(lo, x.fence_lo)
    lo = max(lo, 1)
    return (lo, y.hi) if lo <= y.hi else None


class PairOrder(NamedTuple):
    """How a pair of buffers (i < j) may share bytes (a tuple: one per pair, built cheaply)."""

    i: int
    j: int
    overlap: bool  # lifetimes intersect: never
    ordered: tuple[int, int] | None  # (earlier, later) ordered by the request's syncs (and
    # the ``fences``, when it lists any)
    window: tuple[int, int, int, int] | None  # (earlier, later, lo, hi): a new block barrier
    # at any point in [lo, hi] would order them (with the ``fences``)
    # (partition, point) of each proxy fence to add with the order: right after a generic
    # write, before the partition's releases there (only with ``allow_new``)
    fences: tuple[tuple[int, int], ...] = ()
    # (partitions, lo): a named barrier of just these partitions at any point in [lo, hi] of
    # the window orders them too (None: every partition takes part, a block barrier)
    named: tuple[tuple[int, ...], int] | None = None
    # One of the pair cluster-scoped (a peer CTA touches it) and no cluster barrier of the
    # request between them: a new one at any point in [lo, hi] orders them (with the
    # ``fences``), every partition of every CTA taking part; the pair needs nothing else.
    cluster: tuple[int, int] | None = None
    # One of the pair cluster-scoped: [lo, hi], where a cluster barrier (the request's or a
    # new one) runs after every access of the earlier is done and no later than the later's
    # first access (None: no pair with a cluster-scoped buffer, or no such point)
    span: tuple[int, int] | None = None


def pair_orders(req: PlanRequest, allow_new: bool, invals: Invals | None = None) -> list[PairOrder]:
    """Every pair's verdict; ``allow_new``: look for what new syncs would order it too (a
    block barrier, or a named barrier of the partitions involved, with the proxy fences
    missing); ``invals``: the mbarriers' (``mbarrier_invals``, found when None)."""
    order = order_of(req)
    if invals is None:
        invals = mbarrier_invals(req, order)
    fences = fences_of(req)
    covers = Covers(req)
    evs = [
        events(req, i, covers, invals[i][:2] if i in invals else None)
        for i in range(len(req.buffers))
    ]
    sums = [summary(order, fences, ev) for ev in evs]
    n = len(req.buffers)
    start, end, overlap = _kept_apart(req, invals)
    ready_m, orders_m = _ordered_matrix(sums)
    ready, orders = ready_m.tolist(), orders_m.tolist()
    ends = end.tolist()
    starts = start.tolist()
    parts = len(req.partitions)
    scoped = [b.scope == "cluster" for b in req.buffers] if req.cluster is not None else [False] * n
    own = cluster_points(req)

    def other(i: int, j: int, x: int, y: int) -> PairOrder:
        """The verdict of a pair neither live together nor plainly ordered."""
        if scoped[i] or scoped[j]:
            verdict = _cluster_pair(i, j, x, y, sums, evs, own, (orders, ready), allow_new)
            if verdict is not None:
                return verdict
        if orders[x][y]:
            return PairOrder(i, j, False, (x, y), None)
        if not allow_new:
            return PairOrder(i, j, False, None, None)
        if ready[x][y]:
            # Ordered but for the proxy fence: the missing fences alone order it.
            missing = _missing_fences(order, fences, evs[x], sums[y])
            return PairOrder(i, j, False, (x, y), None, missing)
        w = barrier_window(sums[x], sums[y])
        added: tuple[tuple[int, int], ...] = ()
        if w is None:
            w = barrier_window(sums[x], sums[y], fence_new=True)
            added = _fence_points(evs[x]) if w is not None else ()
        if w is None:
            return PairOrder(i, j, False, None, None)
        named = _named_window(evs[x], evs[y], w, parts)
        return PairOrder(i, j, False, None, (x, y, *w), added, named)

    # Every pair (i < j) in order, sorted out at once: 0 live together, 1 ordered by the
    # request's syncs (no cluster-scoped buffer), 2 the rest (``other``).
    iu, ju = np.triu_indices(n, 1)
    first = end[iu] <= start[ju]
    xs, ys = np.where(first, iu, ju), np.where(first, ju, iu)
    sc = np.asarray(scoped, dtype=bool)
    kind = np.where(overlap[iu, ju], 0, np.where(~(sc[iu] | sc[ju]) & orders_m[xs, ys], 1, 2))
    out: list[PairOrder] = []
    pairs = zip(iu.tolist(), ju.tolist(), xs.tolist(), ys.tolist(), kind.tolist(), strict=True)
    for i, j, x, y, k in pairs:
        if k == 0:
            out.append(PairOrder(i, j, True, None, None))
        elif k == 1:
            out.append(PairOrder(i, j, False, (x, y), None))
        else:
            out.append(other(i, j, x, y))
    if any(scoped):
        out = [_with_span(v, sums, ends, starts) if scoped[v.i] or scoped[v.j] else v for v in out]
    return out


def _kept_apart(
    req: PlanRequest, invals: Invals
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """The buffers' starts and ends, and which pairs are kept apart: live together (one
    lifetime each, no ranges here), or one an mbarrier without an inval (it keeps its bytes)."""
    n = len(req.buffers)
    mbar = np.fromiter(
        (b.kind == "mbarrier" and i not in invals for i, b in enumerate(req.buffers)),
        dtype=bool,
        count=n,
    )
    start = np.fromiter((b.start for b in req.buffers), dtype=np.int64, count=n)
    end = np.fromiter((b.end for b in req.buffers), dtype=np.int64, count=n)
    overlap = (start[:, None] < end[None, :]) & (start[None, :] < end[:, None])
    overlap |= mbar[:, None] | mbar[None, :]
    return start, end, overlap


def _with_span(v: PairOrder, sums: list[Summary], ends: list[int], starts: list[int]) -> PairOrder:
    """``v`` with the points where a cluster barrier serves it (docs/design.md, Clusters)."""
    if v.overlap:
        return v
    x, y = (v.i, v.j) if ends[v.i] <= starts[v.j] else (v.j, v.i)
    lo, hi = sums[x].lo, sums[y].hi
    if lo is None or max(lo, 1) > hi:
        return v
    return v._replace(span=(max(lo, 1), hi))


def _cluster_pair(
    i: int,
    j: int,
    x: int,
    y: int,
    sums: list[Summary],
    evs: list[Events],
    own: list[int],
    done: tuple[list[list[bool]], list[list[bool]]],
    allow_new: bool,
) -> PairOrder | None:
    """The verdict of a pair with a cluster-scoped buffer: a cluster barrier must run after
    every access of ``x``'s buffer is done and no later than ``y``'s first access (docs/
    design.md, Clusters); being one, it also orders the CTA's threads as a block barrier.
    None when one of the request's does: the pair then needs what any pair needs."""
    sx, sy = sums[x], sums[y]
    if sx.lo is None:
        return PairOrder(i, j, False, None, None)
    lo, hi = max(sx.lo, 1), sy.hi
    k = bisect.bisect_left(own, lo)
    if k < len(own) and own[k] <= hi:
        return None
    if not allow_new:
        return PairOrder(i, j, False, None, None)
    orders, ready = done  # ordered by the request's syncs; and but for the proxy fences
    if ready[x][y]:
        # The CTA's own order stands but for its fences; any point after the completions.
        fences = () if orders[x][y] else _fence_points(evs[x])
        return (
            PairOrder(i, j, False, None, None, fences, None, (lo, hi))
            if lo <= hi
            else (PairOrder(i, j, False, None, None))
        )
    w = barrier_window(sx, sy)
    added: tuple[tuple[int, int], ...] = ()
    if w is None:
        w = barrier_window(sx, sy, fence_new=True)
        added = _fence_points(evs[x]) if w is not None else ()
    if w is None:
        return PairOrder(i, j, False, None, None)
    return PairOrder(i, j, False, None, None, added, None, w)


def _missing_fences(
    order: Order, fences: dict[int, list[int]], x: Events, y: Summary
) -> tuple[tuple[int, int], ...]:
    """A fence right after each generic write of ``x`` whose own fences do not reach every
    async-proxy access of ``y``'s buffer (``x`` ordered before ``y`` otherwise)."""
    out: set[tuple[int, int]] = set()
    for src in x.generic:
        reached = False
        for p, avail in src:
            pts = fences.get(p, [])
            k = bisect.bisect_left(pts, avail)
            if k < len(pts) and all(
                r <= f for r, f in zip(order.reach(p, pts[k]), y.proxy_first, strict=True)
            ):
                reached = True
        if not reached:
            out.add(min(src, key=lambda s: (s[1], s[0])))
    return tuple(sorted(out))


def _fence_points(x: Events) -> tuple[tuple[int, int], ...]:
    """A fence right after each generic write of ``x``: at the earliest point it is done,
    by the partition that knows it."""
    return tuple(sorted({min(src, key=lambda s: (s[1], s[0])) for src in x.generic if src}))


def _named_window(
    x: Events, y: Events, window: tuple[int, int], parts: int
) -> tuple[tuple[int, ...], int] | None:
    """(partitions, lo) of a named barrier that orders ``x``'s buffer before ``y``'s at any
    point of ``[lo, window's hi]`` on its own: every partition that touches ``y``'s buffer
    takes part, and for each access of ``x``'s one that knows it done (the earliest); None
    when that is every partition."""
    members = {q for q, _ in y.targets}
    for src in x.done:
        if not src:
            return None
        if not any(p in members for p, _ in src):
            members.add(min(src, key=lambda s: (s[1], s[0]))[0])
    if len(members) >= parts:
        return None
    lo = max([window[0], *(min(avail for p, avail in src if p in members) for src in x.done)])
    return (tuple(sorted(members)), lo) if lo <= window[1] else None


def _ordered_matrix(sums: list[Summary]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """``[x][y]``: whether every access of ``x``'s buffer is done and ordered before every
    access of ``y``'s, for every pair at once; and whether it is with the proxy fences too
    (``ordered(sums[x], sums[y])``)."""
    if not sums:  # no buffers: no pairs
        none = np.zeros((0, 0), dtype=np.bool_)
        return none, none
    ready = np.asarray([s.ready for s in sums], dtype=np.int64)
    first = np.asarray([s.first for s in sums], dtype=np.int64)
    fenced = np.asarray(
        [[0] * len(s.first) if s.fenced is None else s.fenced for s in sums], dtype=np.int64
    )
    proxy = np.asarray([s.proxy_first for s in sums], dtype=np.int64)
    done: npt.NDArray[np.bool_] = np.all(ready[:, None, :] <= first[None, :, :], axis=2)
    return done, np.logical_and(done, (fenced[:, None, :] <= proxy[None, :, :]).all(axis=2))


def weight_clique(n: int, weights: Sequence[int], edges: set[tuple[int, int]]) -> list[int]:
    """A heaviest clique of the conflict graph (exact: branch and bound on buffers in
    weight order); its weight bounds every arena from below."""
    adj = [0] * n
    for a, b in edges:
        adj[a] |= 1 << b
        adj[b] |= 1 << a
    order = sorted(range(n), key=lambda k: (-weights[k], k))
    best: list[int] = []
    best_w = -1

    def grow(chosen: list[int], weight: int, cand: list[int]) -> None:
        nonlocal best, best_w
        if weight > best_w:
            best, best_w = list(chosen), weight
        rest = sum(weights[c] for c in cand)
        for k, c in enumerate(cand):
            if weight + rest <= best_w:
                return
            rest -= weights[c]
            chosen.append(c)
            grow(chosen, weight + weights[c], [d for d in cand[k + 1 :] if adj[c] >> d & 1])
            chosen.pop()

    grow([], 0, order)
    return sorted(best)
