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
the write, ordered the same way. An mbarrier of a partitioned request keeps its bytes.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from planner.core.models import Buffer, PlanRequest
from planner.core.models.sync import ASYNC_PROXY_AGENTS

__all__ = ["INF", "Order", "PairOrder", "pair_orders", "weight_clique"]

INF = 1 << 62
_GROUP = {("cp.async", "write"): "cp.async", ("tma", "read"): "bulk", ("mma", "read"): "wgmma"}

Source = tuple[tuple[int, int], ...]  # any one of (partition, point from which it is done)
Target = tuple[int, int]  # (partition, point)


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

    def reach(self, partition: int, avail: int) -> list[int]:
        """Per partition, the first point from which its accesses are ordered after the work
        ``partition`` finished before its syncs at ``avail`` (INF: never)."""
        key = (partition, avail)
        got = self._memo.get(key)
        if got is not None:
            return got
        ordered = [INF] * self.n
        syncs_from = [INF] * self.n  # a partition's syncs at or after it follow the work
        syncs_from[partition] = avail
        changed = True
        while changed:
            changed = False
            updates: list[tuple[list[int], int]] = []
            lo = min(syncs_from)
            k = bisect.bisect_left(self.blocks, lo)
            if k < len(self.blocks):
                updates.append((list(range(self.n)), self.blocks[k]))
            for at, members in self.named:
                if any(syncs_from[q] <= at for q in members):
                    updates.append((list(members), at))
            for m, arrives in self.arrives.items():
                first = min((at for at, q in arrives if syncs_from[q] <= at), default=INF)
                if first == INF:
                    continue
                for at, q in self.waits.get(m, []):
                    if at > first:
                        updates.append(([q], at))
            for m, issued in self.issues.items():
                for at, q, end in issued:
                    if ordered[q] <= at:
                        updates += [([w], p) for p, w in self.waits.get(m, []) if at < p <= end]
            for targets, point in updates:
                for q in targets:
                    if point < ordered[q]:
                        ordered[q] = point
                        changed = True
                    if point < syncs_from[q]:
                        syncs_from[q] = point
                        changed = True
        self._memo[key] = ordered
        return ordered

    def before(self, source: Source, target: Target, seen: Source = ()) -> bool:
        """Whether some completion in ``source`` is ordered before ``target``; ``seen``: the
        (partition, point) of waits that observed the completion themselves (a TMA write's
        mbarrier wait), which order it for their partition's threads from that point on."""
        q, at = target
        if any(p == q and w <= at for p, w in seen):
            return True
        return any(self.reach(p, avail)[q] <= at for p, avail in source)


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
        blocks=sorted({*req.barriers, *extra_blocks}),
        named=sorted(named, key=lambda x: (x[0], sorted(x[1]))),
        arrives=arrives,
        waits={m: sorted(w) for m, w in waits.items()},
    )


@dataclass(frozen=True)
class Events:
    """What one buffer's accesses need ordered: their completions and their first touches."""

    done: list[Source]  # each must be ordered before every target of a later buffer
    seen: list[Source]  # per ``done``: the waits that observed it (TMA writes), else ()
    targets: list[Target]
    generic: list[Source]  # completions of generic-proxy writes (fence after them)
    proxy: list[Target]  # issues of async-proxy accesses


def events(req: PlanRequest, i: int) -> Events:
    """The events of buffer ``i`` (docs/design.md, Warp-specialised partitions)."""
    b = req.buffers[i]
    index = {p.id: k for k, p in enumerate(req.partitions)}
    everyone = range(len(req.partitions))
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
            finished = completion(req, b, a.agent, a.op, a.at, q, a.mbarrier)
        done.append(finished)
        # An mbarrier wait observes the complete-tx itself: its threads see the bytes.
        seen.append(finished if a.agent == "tma" and a.op == "write" else ())
        if a.op == "write" and a.agent not in ASYNC_PROXY_AGENTS:
            generic.append(finished)
        if a.agent in ASYNC_PROXY_AGENTS:
            proxy.append((q, a.at))
    return Events(done=done, seen=seen, targets=targets, generic=generic, proxy=proxy)


def completion(
    req: PlanRequest, b: Buffer, agent: str, op: str, at: int, q: int, mbarrier: str | None
) -> Source:
    """Where an asynchronous access is done: (partition, point) of each sync that returns
    only once it is; empty when none does within the buffer's lifetime."""
    names = [p.id for p in req.partitions]
    if agent == "tma" and op == "write":
        return tuple(
            (names.index(s.partition or ""), s.at)
            for s in req.syncs
            if s.kind == "mbarrier_wait" and s.mbarrier == mbarrier and at < s.at <= b.end
        )
    group = _GROUP.get((agent, op))
    own = names[q]
    commits = sorted(
        {
            a.at
            for c in req.buffers
            for a in c.accesses
            if a.partition == own and _GROUP.get((a.agent, a.op)) == group
        }
    )
    for s in sorted(req.syncs, key=lambda s: s.at):
        if not (at < s.at <= b.end and s.kind == "wait_group" and s.group == group):
            continue
        if s.partition != own:
            continue
        later = bisect.bisect_left(commits, s.at) - bisect.bisect_right(commits, at)
        if later >= s.pending:
            return ((q, s.at),)
    return ()


def fences_of(req: PlanRequest) -> dict[int, list[int]]:
    """Per partition, the points of its proxy fences, sorted."""
    index = {p.id: k for k, p in enumerate(req.partitions)}
    out: dict[int, list[int]] = {}
    for s in req.syncs:
        if s.kind == "fence_proxy_async" and s.partition in index:
            out.setdefault(index[s.partition], []).append(s.at)
    return {q: sorted(v) for q, v in out.items()}


def ordered(order: Order, fences: dict[int, list[int]], first: Events, then: Events) -> bool:
    """Whether every event of ``first`` is done and ordered before every event of ``then``
    (with a proxy fence where a generic write meets an async-proxy access)."""
    for src, seen in zip(first.done, first.seen, strict=True):
        if not src:
            return False
        for t in then.targets:
            if not order.before(src, t, seen):
                return False
    for src in first.generic:
        for t in then.proxy:
            fenced: list[tuple[int, int]] = []
            for p, avail in src:
                pts = fences.get(p, [])
                fenced += [(p, f) for f in pts[bisect.bisect_left(pts, avail) :]]
            if not order.before(tuple(fenced), t):
                return False
    return True


@dataclass(frozen=True)
class PairOrder:
    """How a pair of buffers (i < j) may share bytes."""

    i: int
    j: int
    overlap: bool  # lifetimes intersect: never
    ordered: tuple[int, int] | None  # (earlier, later) ordered by the request's syncs
    window: tuple[int, int, int, int] | None  # (earlier, later, lo, hi): a new block barrier
    # at any point in [lo, hi] would order them


def pair_orders(req: PlanRequest, allow_new: bool) -> list[PairOrder]:
    """Every pair's verdict; ``allow_new``: look for a window for a new block barrier too."""
    order = order_of(req)
    fences = fences_of(req)
    evs = [events(req, i) for i in range(len(req.buffers))]
    n = len(req.buffers)
    mbar = [b.kind == "mbarrier" for b in req.buffers]
    out: list[PairOrder] = []
    for i in range(n):
        bi = req.buffers[i]
        for j in range(i + 1, n):
            bj = req.buffers[j]
            overlap = mbar[i] or mbar[j] or _overlap(bi, bj)
            if overlap:
                out.append(PairOrder(i, j, True, None, None))
                continue
            found: tuple[int, int] | None = None
            window: tuple[int, int, int, int] | None = None
            for x, y in ((i, j), (j, i)):
                if not _before(req.buffers[x], req.buffers[y]):
                    continue
                if ordered(order, fences, evs[x], evs[y]):
                    found = (x, y)
                    break
                if allow_new and window is None:
                    w = barrier_window(order, fences, evs[x], evs[y])
                    if w is not None:
                        window = (x, y, *w)
            out.append(PairOrder(i, j, False, found, None if found else window))
    return out


def barrier_window(
    order: Order, fences: dict[int, list[int]], first: Events, then: Events
) -> tuple[int, int] | None:
    """The points ``[lo, hi]`` where one new block barrier orders ``first`` before
    ``then`` (with the request's own fences), or None."""
    lo = 0
    for src in first.done:
        if not src:
            return None
        lo = max(lo, min(avail for _, avail in src))
    for src in first.generic:
        if not then.proxy:
            break
        fence = INF
        for p, avail in src:
            pts = fences.get(p, [])
            k = bisect.bisect_left(pts, avail)
            if k < len(pts):
                fence = min(fence, pts[k])
        if fence == INF:
            return None
        lo = max(lo, fence)
    hi = min(at for _, at in then.targets)
    lo = max(lo, 1)
    return (lo, hi) if lo <= hi else None


def _overlap(a: Buffer, b: Buffer) -> bool:
    return any(s < e2 and s2 < e for s, e in a.lifetimes for s2, e2 in b.lifetimes)


def _before(a: Buffer, b: Buffer) -> bool:
    """``a``'s lifetime ends no later than ``b``'s starts (the only order reuse can take)."""
    return max(e for _, e in a.lifetimes) <= min(s for s, _ in b.lifetimes)


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
