"""The new syncs of a partitioned plan (docs/design.md, Warp-specialised partitions): after
the placement, each reuse that needs ordering gets the cheapest sufficient synchronisation.

The fewest barrier points come first (interval stabbing over the block-barrier windows of
the pairs that share bytes, ``partitioned._stab``): each point is one barrier execution. Each
pair is then served by a point of its window where a named barrier of just its partitions
orders it, when there is one, and each point becomes a named barrier of the partitions its
pairs need (``bar.sync id, n``, an id the request does not use, one per set of partitions)
unless that is every partition, the threads are no whole number of warps, or the ids run
out: then it is a block barrier. A point no pair is served by is dropped. A pair ordered by
the request's syncs but for a proxy fence gets the fence only, right after the write.

A named barrier inserted at a point cannot deadlock: every sync edge goes from a point to
the same or a later one, and at one point waits, fences, barriers and arrives run in that
order in every partition, so the point axis is an order every partition's program agrees
with, and each partition taking part reaches the barrier once its earlier points are done.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

from planner.core.models import NamedBarrier, PlanRequest
from planner.core.models.sync import Completed, group_of
from planner.core.partitions import PairOrder

__all__ = [
    "NAMED_BARRIER_IDS",
    "NewSyncs",
    "block_or_named",
    "choose_syncs",
    "named_barriers",
    "waits_in_words",
]

NAMED_BARRIER_IDS = range(1, 16)  # bar.sync ids; 0 is the block barrier (__syncthreads)
WARP = 32  # bar.sync counts threads in whole warps


@dataclass
class NewSyncs:
    """What a partitioned plan adds (or, under sync "none", relies on the caller for)."""

    blocks: list[int] = field(default_factory=list)  # block barrier points, sorted
    named: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    # (point, id, partitions), by point
    fences: list[tuple[int, int]] = field(default_factory=list)  # (partition, point), sorted
    clusters: list[int] = field(default_factory=list)  # cluster barrier points, sorted
    _orders: dict[tuple[int, int], tuple[str, int, int] | None] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def cost(self) -> tuple[int, int]:
        """Cluster barriers added (each waits for every CTA of the cluster), then barriers
        added in all: one execution each."""
        return len(self.clusters), len(self.clusters) + len(self.blocks) + len(self.named)

    def joint(self, key: tuple[int, int]) -> None:
        """Say that pair ``key`` is ordered by the request's syncs and the new ones together:
        its own new fence was left out as needless (``partition_fences``)."""
        self._orders[key] = ("joint", 0, 0)

    def orders(self, v: PairOrder) -> tuple[str, int, int] | None:
        """How the new syncs order a pair that the request's alone do not: ("cluster", point,
        0), ("block", point, 0), ("named", point, id), ("fence", 0, 0), ("joint", 0, 0) (see
        ``joint``); None when they do not. Taken once per pair (the syncs are not changed
        after they are chosen)."""
        key = (v.i, v.j)
        if key not in self._orders:
            self._orders[key] = self._order(v)
        return self._orders[key]

    def _order(self, v: PairOrder) -> tuple[str, int, int] | None:
        if v.fences and not set(v.fences) <= set(self.fences):
            return None
        if v.ordered is not None:
            return ("fence", 0, 0) if v.fences else None
        if v.cluster is not None:
            at = _first_in(self.clusters, *v.cluster)
            return None if at is None else ("cluster", at, 0)
        if v.window is None:
            return None
        lo, hi = v.window[2], v.window[3]
        at = _first_in(self.clusters, lo, hi)  # a cluster barrier is a block barrier too
        if at is not None:
            return "cluster", at, 0
        at = _first_in(self.blocks, lo, hi)
        if at is not None:
            return "block", at, 0
        if v.named is not None:
            need, named_lo = set(v.named[0]), max(lo, v.named[1])
            for at, ident, members in self.named:
                if named_lo <= at <= hi and need <= set(members):
                    return "named", at, ident
        return None


def _first_in(points: list[int], lo: int, hi: int) -> int | None:
    """The first of ``points`` (sorted) in ``[lo, hi]``, or None."""
    k = bisect.bisect_left(points, lo)
    return points[k] if k < len(points) and points[k] <= hi else None


def choose_syncs(
    req: PlanRequest, verdicts: list[PairOrder], shared: set[tuple[int, int]], chosen: list[int]
) -> NewSyncs:
    """The syncs that order every pair on common bytes the request's syncs leave unordered,
    with barriers at (a subset of) the ``chosen`` points."""
    everyone = tuple(range(len(req.partitions)))
    served: dict[int, set[int]] = {}  # point -> partitions that must take part
    fences: set[tuple[int, int]] = set()
    for v in verdicts:
        if v.overlap or (v.i, v.j) not in shared:
            continue
        fences.update(v.fences)
        if v.ordered is not None or v.window is None:
            continue
        lo, hi = v.window[2], v.window[3]
        points = chosen[bisect.bisect_left(chosen, lo) : bisect.bisect_right(chosen, hi)]
        if not points:
            continue  # pinned apart from any order: the static check refuses the plan
        at, members = points[0], everyone
        if v.named is not None:
            named_at = next((p for p in points if p >= v.named[1]), None)
            if named_at is not None:
                at, members = named_at, v.named[0]
        served.setdefault(at, set()).update(members)
    out = NewSyncs(fences=sorted(fences))
    out.blocks, out.named = block_or_named(
        req, [(at, tuple(sorted(served[at]))) for at in sorted(served)]
    )
    return out


def block_or_named(
    req: PlanRequest, points: list[tuple[int, tuple[int, ...]]]
) -> tuple[list[int], list[tuple[int, int, tuple[int, ...]]]]:
    """Each barrier point with the partitions that must take part (``points``, by point) as
    a block barrier or a named one: named (``bar.sync id, n``) where not every partition
    takes part, their threads are whole warps and an id is left (the request's own ids
    kept out, one id per set of partitions). Returns the block points and the named ones
    (point, id, partitions)."""
    everyone = tuple(range(len(req.partitions)))
    threads = [p.size for p in req.partitions]
    used = {s.id for s in req.syncs if s.kind == "named_barrier"}
    free = [k for k in NAMED_BARRIER_IDS if k not in used]
    ids: dict[tuple[int, ...], int] = {}
    blocks: list[int] = []
    named: list[tuple[int, int, tuple[int, ...]]] = []
    for at, members in points:
        whole = sum(threads[q] for q in members) % WARP == 0
        if members not in ids and whole and members != everyone and free:
            ids[members] = free.pop(0)
        if members == everyone or members not in ids or not whole:
            blocks.append(at)
        else:
            named.append((at, ids[members], members))
    return blocks, named


def waits_in_words(
    req: PlanRequest, completed: Completed, origin: Literal["inserted", "required"]
) -> dict[int, str]:
    """Per buffer, in words, the waits the plan adds (``core.asyncs.added_waits``, each run
    by the partition that issued the accesses it completes) that complete its accesses."""
    ours = {(w.at, w.group, w.partition) for w in completed.waits}
    found: dict[int, set[tuple[int, str, str]]] = {}
    for c in completed.covered:
        a = req.buffers[c.buffer].accesses[c.access]
        group = group_of(a)
        if group is not None and (c.done, group, a.partition) in ours:
            found.setdefault(c.buffer, set()).add((c.done, group, a.partition or ""))
    return {
        i: ", ".join(
            f"the {g} wait_group by {q} at point {at} ({origin})" for at, g, q in sorted(w)
        )
        for i, w in found.items()
    }


def named_barriers(
    req: PlanRequest,
    named: list[tuple[int, int, tuple[int, ...]]],
    origin: Literal["inserted", "required"],
) -> list[NamedBarrier]:
    """The named barriers ``named`` (point, id, partitions) as the plan lists them, with the
    partitions and threads taking part."""
    names = [p.id for p in req.partitions]
    threads = [p.size for p in req.partitions]
    return [
        NamedBarrier(
            at=at,
            id=ident,
            partitions=[names[q] for q in members],
            threads=sum(threads[q] for q in members),
            origin=origin,
        )
        for at, ident, members in named
    ]
