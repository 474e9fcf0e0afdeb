"""New block barriers for a partitioned request with loops or branches, at original points
(docs/design.md, Warp-specialised partitions, Loops and branches).

A barrier at an original point runs at every run of that point, so it orders a pair of
buffer instances on a path when one of those runs lies in the pair's window there (after the
earlier's accesses are done, no later than the later's first). A buffer pair is served by a
point when, on every path, every unordered pair of their instances has a run of the point in
its window; a pair that also needs a proxy fence, or that no allowed point serves, is kept
apart. The points are chosen greedily: the one serving the most open pairs first, then the
one that runs fewest times, then the later point.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from planner.core.partition_paths import Path
from planner.core.partitions import PairOrder

__all__ = ["Needs", "stab"]

Pair = tuple[int, int]
K = TypeVar("K", int, tuple[int, int])


@dataclass
class Needs:
    """What new barriers could order, per buffer pair (i < j) and per buffer's own
    instances: the allowed original points that serve them (``None``: none can)."""

    allowed: frozenset[int]
    pairs: dict[Pair, frozenset[int] | None] = field(default_factory=dict)
    own: dict[int, frozenset[int] | None] = field(default_factory=dict)

    def add(self, path: Path, v: PairOrder, key: Pair | int) -> None:
        """An unordered instance pair of ``path``: narrows what serves its buffer pair."""
        points: frozenset[int] | None = None
        if v.window is not None and not v.fences:
            lo, hi = v.window[2], min(v.window[3], len(path.points) - 1)
            points = frozenset(path.points[k] for k in range(lo, hi + 1)) & self.allowed
        if isinstance(key, tuple):
            self.pairs[key] = _narrowed(self.pairs, key, points)
        else:
            self.own[key] = _narrowed(self.own, key, points)


def _narrowed(
    table: Mapping[K, frozenset[int] | None], key: K, points: frozenset[int] | None
) -> frozenset[int] | None:
    """What serves ``key`` and also ``points`` (``None``: nothing)."""
    if key in table:
        before = table[key]
        points = None if before is None or points is None else before & points
    return points or None


def stab(sets: list[frozenset[int]], runs: Callable[[int], int]) -> list[int]:
    """Points meeting every set (each non-empty): greedily the point in most open sets, then
    the one that runs fewest times (``runs``), then the later one."""
    chosen: list[int] = []
    open_sets = [s for s in sets if s]
    while open_sets:
        count: dict[int, int] = {}
        for s in open_sets:
            for p in s:
                count[p] = count.get(p, 0) + 1
        best = max(count, key=lambda p: (count[p], -runs(p), p))
        chosen.append(best)
        open_sets = [s for s in open_sets if best not in s]
    return sorted(chosen)
