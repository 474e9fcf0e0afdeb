"""The interference graph: which buffers may never share a byte, and the lower bound.

Two buffers conflict when their *occupied* intervals intersect. The occupied interval is the
lifetime ``[start, end)`` extended, under a sync policy, until the first barrier after the
buffer's last access (barrier-extended: without a thread-local exemption a buffer stays
occupied until the next barrier after its last access, docs/design.md, Barrier-extended
lifetimes; without access patterns the last access is at ``end - 1``):

- ``"none"``: no extension; the caller synchronizes.
- ``"existing"``: extended to the next barrier of the request.
- ``"insert"``: extended to the next barrier or barrier candidate (all points by default,
  so no extension); sharings no candidate can protect stay conflicts.

Occupied intervals form an interval graph, so edges are counted and components found by
sorting, and neighbour lists are built by one sweep, never by testing all pairs. Everything
but the neighbour lists (``neighbours``, ``edges``, ``to_networkx``) grows with the buffers;
those grow with the conflicts (up to n²/2 when every buffer overlaps every other) and are
built only when a heuristic or an exact method asks for them, within the limits set in
``solvers.greedy`` and ``solvers.auto``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.core.arrays import distinct
from planner.core.columns import columns
from planner.core.models import PlanRequest
from planner.core.models.request import SyncPolicy

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "InterferenceGraph",
    "LowerBound",
    "access_bounds",
    "build_graph",
    "count_overlaps",
    "sync_barriers",
]

I64 = npt.NDArray[np.int64]
ALIGNED_BOUND_MAX_BUFFERS = 2000  # the aligned bound is quadratic in buffers


def sync_barriers(request: PlanRequest, sync: SyncPolicy | None = None) -> list[int] | None:
    """Points that end an occupied interval under a policy (default: the request's).

    None means no extension at all.
    """
    opts = request.options
    sync = opts.sync if sync is None else sync
    existing = sorted(set(request.barriers))
    if sync == "none":
        return None
    if sync == "existing" or opts.max_new_barriers == 0:
        return existing
    if opts.barrier_candidates is None:
        return None
    return sorted(set(existing) | set(opts.barrier_candidates))


def extend_to_barriers(end: I64, barriers: list[int] | None, horizon: int) -> I64:
    """Each end moved to the first barrier at or after it; past the last barrier: horizon."""
    if barriers is None:
        return end.copy()
    points = np.asarray(barriers, dtype=np.int64)
    k = np.searchsorted(points, end, side="left")
    extended = np.full_like(end, horizon)
    inside = k < points.size
    extended[inside] = points[k[inside]]
    return np.maximum(extended, end)


def count_overlaps(start: I64, end: I64) -> int:
    """Pairs of half-open intervals that intersect, in O(n log n)."""
    n = int(start.size)
    # An unordered pair is disjoint iff one ends at or before the other starts.
    disjoint = int(np.searchsorted(np.sort(end), start, side="right").sum())
    return n * (n - 1) // 2 - disjoint


@dataclass(frozen=True)
class LowerBound:
    """Most bytes occupied at one point: no plan fits in fewer. ``point`` is where."""

    bytes: int
    point: int | None
    buffers: list[int]  # indices of the buffers occupied at ``point``


@dataclass(frozen=True)
class InterferenceGraph:
    """Buffers as arrays (request order) with their occupied intervals."""

    ids: list[str]
    start: I64  # program point, inclusive
    end: I64  # program point, exclusive (the lifetime)
    occupied_end: I64  # program point, exclusive (barrier-extended)
    size: I64  # bytes
    alignment: I64  # bytes, power of two
    pinned: I64  # bytes, -1 where free
    # What a solver built of this graph for a later step of the same request to take up
    # (the search's portfolio); empty in a copy made with ``dataclasses.replace``.
    memo: dict[str, object] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @cached_property
    def live_edges(self) -> int:
        """Pairs live at the same time (raw lifetimes)."""
        return count_overlaps(self.start, self.end)

    @cached_property
    def conflict_edges(self) -> int:
        """Pairs that may not share bytes under the policy (occupied intervals)."""
        return count_overlaps(self.start, self.occupied_end)

    @property
    def hazard_edges(self) -> int:
        """Sequential pairs that conflict only through a missing barrier."""
        return self.conflict_edges - self.live_edges

    @cached_property
    def by_start(self) -> I64:
        """Buffer indices sorted by start, ties by index."""
        return np.argsort(self.start, kind="stable").astype(np.int64)

    @cached_property
    def component(self) -> I64:
        """Connected component of each buffer, numbered in start order."""
        order = self.by_start
        ends = self.occupied_end[order]
        reach = np.maximum.accumulate(ends) if ends.size else ends
        breaks = np.zeros(order.size, dtype=np.int64)
        breaks[1:] = self.start[order][1:] >= reach[:-1]
        labels = np.empty_like(order)
        labels[order] = np.cumsum(breaks)
        return labels

    @property
    def components(self) -> int:
        return int(self.component.max()) + 1 if self.n else 0

    @cached_property
    def lower_bound(self) -> LowerBound:
        """Peak occupied bytes, by a sweep over interval ends and starts."""
        if self.n == 0:
            return LowerBound(0, None, [])
        points = np.concatenate([self.occupied_end, self.start])
        deltas = np.concatenate([-self.size, self.size])
        # Half-open: at equal points ends (negative deltas) come first.
        order = np.lexsort((deltas, points))
        live = np.cumsum(deltas[order])
        k = int(np.argmax(live))
        point = int(points[order][k])
        occupied = np.flatnonzero((self.start <= point) & (self.occupied_end > point))
        return LowerBound(int(live[k]), point, [int(i) for i in occupied])

    @cached_property
    def aligned_bound(self) -> LowerBound:
        """A lower bound that also counts alignment padding, for up to
        ``ALIGNED_BOUND_MAX_BUFFERS`` buffers (else the plain peak).

        At a point where buffers are live together, every offset is a multiple of the
        smallest alignment g among them, so each buffer below the topmost one takes at least
        its size rounded up to g: the arena is at least the sum of the rounded sizes less the
        largest rounding of one buffer (the one that may sit on top).
        """
        plain = self.lower_bound
        if self.n == 0 or self.n > ALIGNED_BOUND_MAX_BUFFERS:
            return plain
        if not bool((self.size % int(self.alignment.max())).any()):
            # Every size is a multiple of every alignment (powers of two): no rounding pads
            # a buffer, and the bound at each point is its live bytes, at most the peak.
            return plain
        points = distinct(self.start)
        at = points[:, None]
        live = (self.start[None, :] <= at) & (self.occupied_end[None, :] > at)
        big = np.iinfo(np.int64).max
        g = np.where(live, self.alignment[None, :], big).min(axis=1)[:, None]  # bytes
        rounded = (self.size[None, :] + g - 1) // g * g
        padding = np.where(live, rounded - self.size[None, :], 0)
        bound = np.where(live, rounded, 0).sum(axis=1) - padding.max(axis=1)
        k = int(np.argmax(bound))
        if int(bound[k]) <= plain.bytes:
            return plain
        return LowerBound(int(bound[k]), int(points[k]), [int(i) for i in np.flatnonzero(live[k])])

    @cached_property
    def neighbours(self) -> tuple[I64, I64, I64, I64]:
        """Sweep-built adjacency: ``(pos, hi, back_ptr, back)``.

        In start order, the buffers after position ``p`` that conflict with it are exactly
        positions ``p+1 .. hi[p]-1`` (contiguous); the ones before it are listed in
        ``back[back_ptr[p]:back_ptr[p+1]]``. ``pos[i]`` is buffer ``i``'s position.
        """
        order = self.by_start
        hi = self.forward_end
        back_ptr, back = _backward_lists(hi)
        pos = np.empty_like(order)
        pos[order] = np.arange(order.size, dtype=np.int64)
        return pos, hi, back_ptr, back

    @cached_property
    def forward_end(self) -> I64:
        """Per start-order position ``p``: the later buffers conflicting with it are the
        positions ``p+1 .. forward_end[p]-1``. Memory grows with the buffers, not the edges."""
        starts = self.start[self.by_start]
        ends = self.occupied_end[self.by_start]
        hi: I64 = np.searchsorted(starts, ends, side="left").astype(np.int64)
        return hi

    @cached_property
    def degree(self) -> I64:
        """Conflict degree of each buffer, counted from ``forward_end`` (no neighbour lists)."""
        n = self.n
        hi = self.forward_end
        p = np.arange(n, dtype=np.int64)
        # Position q is a backward neighbour of every position in (q, hi[q]).
        marks = np.zeros(n + 1, dtype=np.int64)
        np.add.at(marks, np.minimum(p + 1, n), 1)
        np.add.at(marks, np.maximum(hi, p + 1), -1)
        backward = np.cumsum(marks)[:n]
        by_pos = (hi - p - 1) + backward
        result: I64 = np.empty(n, dtype=np.int64)
        result[self.by_start] = by_pos
        return result

    def released(
        self, after_last: I64, barriers: list[int] | None, horizon: int
    ) -> InterferenceGraph:
        """The same buffers (arrays shared; no graph writes them) with each occupied interval
        ending at the first of ``barriers`` at or after ``after_last`` (last access + 1), and
        at least at the lifetime's end; ``barriers`` None: no extension. This graph itself,
        with what it has computed, when no occupied interval changes."""
        occupied_end = np.maximum(extend_to_barriers(after_last, barriers, horizon), self.end)
        if np.array_equal(occupied_end, self.occupied_end):
            return self
        return replace(self, occupied_end=occupied_end)

    def subgraph(self, members: I64) -> InterferenceGraph:
        """The buffers ``members`` (indices, in that order) as a graph of their own."""
        return InterferenceGraph(
            ids=[self.ids[i] for i in members.tolist()],
            start=self.start[members],
            end=self.end[members],
            occupied_end=self.occupied_end[members],
            size=self.size[members],
            alignment=self.alignment[members],
            pinned=self.pinned[members],
        )

    def members(self) -> list[I64]:
        """Buffer indices of each connected component, in component order."""
        labels = self.component
        order = np.argsort(labels, kind="stable")
        cuts = np.flatnonzero(np.diff(labels[order])) + 1
        return [part.astype(np.int64) for part in np.split(order, cuts)] if self.n else []

    def edges(self) -> list[tuple[int, int]]:
        """Every conflicting pair ``(i, j)`` with ``i < j``, in a deterministic order."""
        _, hi, _, _ = self.neighbours
        order = self.by_start
        pairs: list[tuple[int, int]] = []
        for p in range(self.n):
            a = int(order[p])
            for q in range(p + 1, int(hi[p])):
                b = int(order[q])
                pairs.append((a, b) if a < b else (b, a))
        return sorted(pairs)

    def to_networkx(self) -> nx.Graph:
        """The graph with node attributes and edge ``kind`` "live" or "hazard"."""
        import networkx as nx

        g = nx.Graph()
        for i, ident in enumerate(self.ids):
            g.add_node(
                ident,
                size=int(self.size[i]),
                start=int(self.start[i]),
                end=int(self.end[i]),
                occupied_end=int(self.occupied_end[i]),
            )
        for a, b in self.edges():
            live = self.start[a] < self.end[b] and self.start[b] < self.end[a]
            g.add_edge(self.ids[a], self.ids[b], kind="live" if live else "hazard")
        return g


@njit(small=True)
def _backward_lists(hi: I64) -> tuple[I64, I64]:
    n = hi.shape[0]
    count = np.zeros(n + 1, dtype=np.int64)
    for q in range(n):
        for p in range(q + 1, hi[q]):
            count[p + 1] += 1
    ptr = np.cumsum(count)
    back = np.empty(ptr[n], dtype=np.int64)
    fill = ptr[:-1].copy()
    for q in range(n):
        for p in range(q + 1, hi[q]):
            back[fill[p]] = q
            fill[p] += 1
    return ptr, back


def access_bounds(request: PlanRequest) -> tuple[I64, I64]:
    """Per buffer: the first access, and the last access + 1 (without patterns, the
    lifetime's start and end)."""
    cols = columns(request)  # read-only, the request's own: the caller gets copies
    return cols.first_access.copy(), cols.access_end.copy()


def build_graph(
    request: PlanRequest,
    sync: SyncPolicy | None = None,
    *,
    barriers: list[int] | None = None,
    sizes: list[int] | None = None,
) -> InterferenceGraph:
    """Arrays and occupied intervals of the request's buffers under a sync policy.

    ``barriers`` (sorted) replaces the policy's set of points that end an occupied interval;
    ``sizes`` (bytes, request order) replaces the declared sizes (per-block footprints).
    """
    cols = columns(request)  # read-only, the request's own: the graph gets copies
    end = cols.end.copy()
    lifetimes = InterferenceGraph(
        ids=[b.id for b in request.buffers],
        start=cols.start.copy(),
        end=end,
        occupied_end=end,
        size=cols.size.copy() if sizes is None else np.asarray(sizes, dtype=np.int64),
        alignment=cols.alignment.copy(),
        pinned=cols.pinned.copy(),
    )
    points = sync_barriers(request, sync) if barriers is None else barriers
    return lifetimes.released(cols.access_end, points, request.horizon)
