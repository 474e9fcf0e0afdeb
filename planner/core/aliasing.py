"""Thread-local aliasing (docs/design.md, Reuse hazard, rule (b)) on the planner's side.

Two sequential buffers may share a byte with no barrier between them when every access to it
in the earlier one, and every access to it in the later one before the first barrier at or
after the later one's first access, is made by one and the same thread. ``Owners`` caches the
owner maps; ``sharing_pairs`` lists the sequential sharings of a placement; ``alias_chains``
finds buffers that can sit exactly over a dead, owner-compatible one, the greedy portfolio's
aliasing move.
"""

from __future__ import annotations

import bisect

import numpy as np
import numpy.typing as npt

from planner.core.access import OwnerMap, byte_owners, owners_agree
from planner.core.barriers import Reuse
from planner.core.graph import InterferenceGraph
from planner.core.models import PlanRequest
from planner.core.patterns import access_span

__all__ = [
    "ALIAS_MAX_BUFFERS",
    "Owners",
    "RangeOwners",
    "alias_chains",
    "merge_chains",
    "sharing_pairs",
]

ALIAS_MAX_BUFFERS = 2000  # aliasing is checked pairwise; larger requests go without it

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


class Owners:
    """Owner maps of a request's buffers, computed once per (buffer, cut-off point).

    ``barriers`` are the run-time barriers the later buffer's cut-off is taken from (sorted);
    buffers in ``opaque`` (per-block footprints, whose bytes move between blocks) count as
    touched by any thread.
    """

    def __init__(
        self, request: PlanRequest, barriers: list[int], opaque: frozenset[int] = frozenset()
    ) -> None:
        self.request = request
        self.barriers = barriers
        self.opaque = opaque
        self.patterned = [
            bool(b.accesses) and i not in opaque for i, b in enumerate(request.buffers)
        ]
        self._maps: dict[tuple[int, int | None], OwnerMap] = {}

    def owners(self, index: int, before: int | None) -> OwnerMap:
        key = (index, before)
        if key not in self._maps:
            self._maps[key] = byte_owners(self.request, index, before=before)
        return self._maps[key]

    def cut(self, later: int) -> int | None:
        """The first barrier at or after the later buffer's first access; None: none."""
        first, _ = access_span(self.request.buffers[later])
        k = bisect.bisect_left(self.barriers, first)
        return self.barriers[k] if k < len(self.barriers) else None

    def compatible(self, earlier: int, later: int, shift: int) -> bool:
        """Whether ``later`` placed ``shift`` bytes above ``earlier`` may share with it by
        rule (b): every shared byte untouched in one of them or owned by one thread in both."""
        if not (self.patterned[earlier] and self.patterned[later]):
            return False
        size_a = self.request.buffers[earlier].size
        size_b = self.request.buffers[later].size
        if max(0, shift) >= min(size_a, shift + size_b):
            return True
        return owners_agree(
            self.owners(earlier, None), 0, self.owners(later, self.cut(later)), shift
        )


class RangeOwners:
    """Rule (b) between live ranges of a program with loops, branches or ranges, per
    iteration: the owner map of a range is taken over every access of that range (the same
    accesses run in every iteration of the loops around it), so two pieces agree in every
    pair of consecutive iterations when their ranges' maps agree. Stricter than the
    straight-line rule, which counts the later buffer's accesses only up to its first barrier,
    and the same rule as the static check of such programs.

    Buffers in ``opaque`` (per-block footprints) and buffers without access patterns count as
    touched by any thread: they never alias."""

    def __init__(self, request: PlanRequest, opaque: frozenset[int] = frozenset()) -> None:
        self.request = request
        self.patterned = [
            bool(b.accesses) and i not in opaque for i, b in enumerate(request.buffers)
        ]
        self._maps: dict[tuple[int, int], OwnerMap | None] = {}
        self._agree: dict[tuple[int, int, int, int, int], bool] = {}

    def owners(self, index: int, part: int) -> OwnerMap | None:
        """The owner map of range ``part`` of buffer ``index``; None: no access in it."""
        key = (index, part)
        if key not in self._maps:
            b = self.request.buffers[index]
            s, e = b.lifetimes[part]
            kept = [a for a in b.accesses if s <= a.at < e]
            found = None
            if kept:
                buffers = list(self.request.buffers)
                buffers[index] = b.model_copy(update={"accesses": kept})
                request = self.request.model_copy(update={"buffers": buffers})
                found = byte_owners(request, index)
            self._maps[key] = found
        return self._maps[key]

    def agree(self, a: int, part_a: int, b: int, part_b: int, shift: int) -> bool:
        """Whether range ``part_b`` of ``b`` placed ``shift`` bytes above range ``part_a`` of
        ``a`` may follow it with no barrier: every shared byte untouched in one of them or
        owned by one and the same thread in both."""
        if not (self.patterned[a] and self.patterned[b]):
            return False
        key = (a, part_a, b, part_b, shift)
        found = self._agree.get(key)
        if found is None:
            first, later = self.owners(a, part_a), self.owners(b, part_b)
            found = first is not None and later is not None and owners_agree(first, 0, later, shift)
            self._agree[key] = found
        return found


def sharing_pairs(request: PlanRequest, offsets: I64, sizes: I64) -> list[Reuse]:
    """Every sequential pair sharing a byte, with the window a barrier must fall in.

    Quadratic (a boolean matrix): for up to ``ALIAS_MAX_BUFFERS`` buffers only.
    """
    bufs = request.buffers
    n = len(bufs)
    start = np.fromiter((b.start for b in bufs), dtype=np.int64, count=n)
    end = np.fromiter((b.end for b in bufs), dtype=np.int64, count=n)
    lo, hi = offsets, offsets + sizes
    share = (lo[:, None] < hi[None, :]) & (lo[None, :] < hi[:, None])
    sequential = end[:, None] <= start[None, :]  # [a, b]: a ends before b starts
    spans = [access_span(b) for b in bufs]
    found: list[Reuse] = []
    for a, b in zip(*np.nonzero(share & sequential), strict=True):
        a, b = int(a), int(b)
        found.append(Reuse(a, b, spans[a][1] + 1, spans[b][0]))
    return found


def alias_chains(g: InterferenceGraph, owners: Owners) -> list[int]:
    """``parent[b] = a`` when ``b`` can sit exactly over ``a`` (same offset) with no barrier,
    else -1. Each buffer has at most one successor; a chain's members are checked pairwise.

    Candidates are pairs that conflict in ``g`` only because no barrier separates them.
    """
    n = g.n
    parent = [-1] * n
    child = [-1] * n
    root = list(range(n))
    pos, _, back_ptr, back = g.neighbours
    order = g.by_start
    for b in order.tolist():
        if g.pinned[b] >= 0 or not owners.patterned[b]:
            continue
        p = int(pos[b])
        best: tuple[int, int, int] | None = None  # (-shared bytes, -end, a)
        for k in range(int(back_ptr[p]), int(back_ptr[p + 1])):
            a = int(order[int(back[k])])
            if child[a] >= 0 or g.pinned[a] >= 0 or g.end[a] > g.start[b]:
                continue
            chain = _chain(root[a], child, a)
            if not all(owners.compatible(c, b, 0) for c in chain if g.occupied_end[c] > g.start[b]):
                continue
            key = (-min(int(g.size[a]), int(g.size[b])), -int(g.end[a]), a)
            if best is None or key < best:
                best = key
        if best is not None:
            a = best[2]
            parent[b], child[a], root[b] = a, b, root[a]
    return parent


def _chain(first: int, child: list[int], last: int) -> list[int]:
    out = [first]
    while out[-1] != last:
        out.append(child[out[-1]])
    return out


def merge_chains(g: InterferenceGraph, parent: list[int]) -> tuple[InterferenceGraph, I64]:
    """The graph with each chain one buffer: from its first start to its last occupied end,
    as large and as aligned as its largest member. Returns it and each buffer's node."""
    n = g.n
    node_of_root: dict[int, int] = {}
    roots: list[int] = []
    node = np.empty(n, dtype=np.int64)
    for i in g.by_start.tolist():
        r = i
        while parent[r] >= 0:
            r = parent[r]
        if r not in node_of_root:
            node_of_root[r] = len(roots)
            roots.append(r)
        node[i] = node_of_root[r]
    m = len(roots)
    size = np.zeros(m, dtype=np.int64)
    align = np.ones(m, dtype=np.int64)
    occupied_end = np.zeros(m, dtype=np.int64)
    end = np.zeros(m, dtype=np.int64)
    np.maximum.at(size, node, g.size)
    np.maximum.at(align, node, g.alignment)
    np.maximum.at(occupied_end, node, g.occupied_end)
    np.maximum.at(end, node, g.end)
    ids = [g.ids[r] for r in roots]
    merged = InterferenceGraph(
        ids=ids,
        start=g.start[roots],
        end=end,
        occupied_end=occupied_end,
        size=size,
        alignment=align,
        pinned=g.pinned[roots],
    )
    return merged, node
