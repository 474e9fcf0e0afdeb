"""What new syncs at original points order, for a partitioned request with loops or
branches (docs/design.md, Warp-specialised partitions, Loops and branches).

A sync at an original point runs at every run of that point, so a new block barrier orders
a pair of buffer instances on a path when one of those runs lies in the pair's window there
(after the earlier's accesses are done, no later than the later's first). A buffer pair is
served by a point when, on every path, every unordered pair of their instances has a run of
the point in its window. A pair that also needs a proxy fence is served with the fence at
the original point of each fence its instance pairs need (right after the generic write,
by the partition that knows it done): ``plain`` holds what block barriers alone serve,
``fenced`` what they serve with those fences. A named barrier of just the partitions a pair
needs serves it at the points where, on every path, a run lies in the named window of
every unordered instance pair. The points are those of the synchronisation choice on
explicit sets (``core.sync_choice``): the fewest executions, then the fewest points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from planner.core.partition_paths import Path
from planner.core.partitions import PairOrder
from planner.core.sync_choice import fewest_on_sets

__all__ = ["Key", "Needs", "stab"]

STAB_NODES = 500  # sets of points the choice judges before it keeps the best found

Pair = tuple[int, int]
Key = Pair | int  # a buffer pair (i < j), or a buffer's own instances
Named = tuple[frozenset[int], frozenset[int]]  # (partitions taking part, points)


@dataclass
class Needs:
    """What new syncs could order, per buffer pair (i < j) and per buffer's own instances
    (an ``int`` key): the allowed original points whose block barrier serves them (``None``:
    none does). A key absent from ``fenced`` but present in ``fences`` needs its fences
    only."""

    allowed: frozenset[int]
    plain: dict[Key, frozenset[int] | None] = field(default_factory=dict)
    fenced: dict[Key, frozenset[int] | None] = field(default_factory=dict)
    fences: dict[Key, set[tuple[int, int]]] = field(default_factory=dict)  # (partition, point)
    named: dict[Key, Named | None] = field(default_factory=dict)

    def add(self, path: Path, v: PairOrder, key: Key) -> None:
        """An unordered instance pair of ``path``: narrows what serves its key."""
        window: frozenset[int] | None = None
        if v.window is not None:
            window = self._runs(path, v.window[2], v.window[3])
        self.plain[key] = _narrowed(self.plain, key, None if v.fences else window)
        if v.fences:
            self.fences.setdefault(key, set()).update((q, path.points[at]) for q, at in v.fences)
        if v.ordered is not None and v.fences:
            return  # ordered but for its fences: they alone order it
        self.fenced[key] = _narrowed(self.fenced, key, window)
        named: Named | None = None
        if v.window is not None and v.named is not None:
            members, lo = v.named
            named = (frozenset(members), self._runs(path, lo, v.window[3]))
        if key not in self.named:
            self.named[key] = named
            return
        before = self.named[key]
        if before is None or named is None:
            self.named[key] = None
        else:
            self.named[key] = (before[0] | named[0], before[1] & named[1])

    def _runs(self, path: Path, lo: int, hi: int) -> frozenset[int]:
        """The allowed original points with a run in ``[lo, hi]`` of ``path``."""
        hi = min(hi, len(path.points) - 1)
        return frozenset(path.points[k] for k in range(lo, hi + 1)) & self.allowed

    def served(self, key: Key, with_fences: bool) -> bool:
        """Whether new syncs (with the fences where ``with_fences``) order ``key``."""
        if not with_fences:
            return self.plain.get(key) is not None
        if key in self.fenced:
            return self.fenced[key] is not None
        return key in self.fences

    def points(self, key: Key, with_fences: bool) -> frozenset[int]:
        """The points whose block barrier serves a served ``key`` (empty: it needs none)."""
        table = self.fenced if with_fences else self.plain
        return table.get(key) or frozenset()


def _narrowed(
    table: Mapping[Key, frozenset[int] | None], key: Key, points: frozenset[int] | None
) -> frozenset[int] | None:
    """What serves ``key`` and also ``points`` (``None``: nothing)."""
    if key in table:
        before = table[key]
        points = None if before is None or points is None else before & points
    return points or None


def stab(sets: list[frozenset[int]], runs: Callable[[int], int]) -> list[int]:
    """Points meeting every non-empty set at the fewest executions (``runs``), then the fewest
    points: the synchronisation choice on explicit sets (``core.sync_choice``), proved
    within ``STAB_NODES`` sets of points judged, else the best found."""
    return fewest_on_sets(sets, runs, STAB_NODES)
