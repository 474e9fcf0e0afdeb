"""The synchronisation choice of every planning route: the barrier points, fewest or fewest
executions, that serve every reuse which must be ordered.

A *need* is one such reuse, served by a barrier at any point of a set. Two shapes of needs:

- ``Intervals``, on a straight line: need ``i`` is served by any point ``p`` with
  ``left[i] <= p <= right[i]``. ``stab`` is interval stabbing: sort by right end, take the
  latest allowed point in the window of each need still open. Exact (proved fewest points),
  in compiled steps on arrays, so a million needs cost no Python tuples.
- ``PointSets``, on unrolled programs (loops, branches): any set of points serves a need, a
  point may run many times (``executions``), and points in every arm of a branch may serve
  it together. ``choose_on_sets`` takes the fewest executions, then the fewest points: a
  greedy by the needs' order (``PointSets.order``), then a proof or a better set:

  - a packing bound: needs whose candidate points are pairwise disjoint each need a point of
    their own, so the cheapest candidate of each adds up to a lower bound; when the greedy
    meets it, it is proved (tried first on the needs that made the greedy take its points,
    then on every open window);
  - else a branch and bound over the points: take the open window with the fewest
    candidates, try each (cheapest first; once tried, left out of the later branches),
    prune on the bound of what stays open. Exhaustive, hence proved, unless it judges more
    than ``max_nodes`` sets of points or passes ``work`` (the needs and windows judged, per
    set the open ones, per new point or joint key the caller's ``alone_work`` or
    ``joint_work``): then the best set found is kept, unproved. Both limits are counts,
    never the clock, so the same request gets the same points.

Tie-breaks: on intervals the latest allowed point (which serves the most open needs); on
sets, among the cheapest points that serve a need alone, the one serving the most needs
still open, then the caller's ``rank`` of the point (``PointSets.serving``), then the
smallest point.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

__all__ = [
    "Cost",
    "ExplicitSets",
    "Intervals",
    "PointSets",
    "SyncChoice",
    "Windows",
    "choose_on_sets",
    "fewest_on_sets",
    "greedy_on_sets",
    "hits_each",
    "stab",
    "stabbing_points",
]

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Cost = tuple[int, int]  # executions, points
Rank = tuple[int, ...]  # the caller's tie-break among equally good points: smallest first


@dataclass(frozen=True)
class SyncChoice:
    """New points (sorted), whether they are proved the cheapest, and a lower bound on the
    cost (executions, points)."""

    points: list[int]
    proved: bool
    bound: Cost


# --- needs on a straight line: intervals -------------------------------------------------


@dataclass(frozen=True)
class Intervals:
    """Needs on a straight line: need ``i`` is served by a point in ``[left[i], right[i]]``."""

    left: I64
    right: I64


def hits_each(points: list[int], left: I64, right: I64) -> Mask:
    """Per need ``[left, right]``: whether a point of ``points`` (sorted) serves it."""
    pts = np.asarray(points, dtype=np.int64)
    if pts.size == 0:
        return np.zeros(left.size, dtype=np.bool_)
    k = np.searchsorted(pts, left, side="left")
    inside = k < pts.size
    mask: Mask = np.zeros(left.size, dtype=np.bool_)
    mask[inside] = pts[k[inside]] <= right[inside]
    return mask


def stabbing_points(
    intervals: list[tuple[int, int]], candidates: list[int] | None
) -> tuple[list[int], list[tuple[int, int]]]:
    """Fewest points hitting every ``[left, right]``; ``candidates`` sorted, None: any point.

    Returns the points (sorted) and the intervals no candidate can hit.
    """
    chosen: list[int] = []
    missed: list[tuple[int, int]] = []
    last = -1
    for left, right in sorted(intervals, key=lambda iv: (iv[1], iv[0])):
        if last >= left:  # last <= right: it was chosen for an interval ending no later
            continue
        if candidates is None:
            point = right
        else:
            k = bisect.bisect_right(candidates, right) - 1
            if k < 0 or candidates[k] < left:
                missed.append((left, right))
                continue
            point = candidates[k]
        chosen.append(point)
        last = point
    return chosen, missed


def stab(needs: Intervals, candidates: list[int] | None) -> tuple[list[int], Mask]:
    """``stabbing_points`` on arrays: the fewest points (proved) from ``candidates`` (sorted,
    None: any point), and per need whether no candidate can serve it."""
    order = np.lexsort((needs.left, needs.right)).astype(np.int64)
    any_point = candidates is None
    points = np.asarray([] if candidates is None else candidates, dtype=np.int64)
    chosen, missed = _stab_sorted(order, needs.left, needs.right, points, any_point)
    return [int(p) for p in chosen.tolist()], missed


@njit(small=True)
def _stab_sorted(
    order: I64, left: I64, right: I64, candidates: I64, any_point: bool
) -> tuple[I64, Mask]:
    chosen = np.empty(order.size, dtype=np.int64)
    missed = np.zeros(order.size, dtype=np.bool_)
    count = 0
    last = -1
    for i in order:
        if last >= left[i]:  # last <= right: it was chosen for an interval ending no later
            continue
        if any_point:
            point = right[i]
        else:
            k = np.searchsorted(candidates, right[i], side="right") - 1
            if k < 0 or candidates[k] < left[i]:
                missed[i] = True
                continue
            point = candidates[k]
        chosen[count] = point
        count += 1
        last = point
    return chosen[:count], missed


# --- needs on unrolled programs: any sets of points --------------------------------------


class PointSets(Protocol):
    """Needs whose serving points form any sets: what the choice asks of the program."""

    @property
    def size(self) -> int:
        """The number of needs."""
        ...

    @property
    def alone_work(self) -> int:
        """Work charged the first time the search asks which needs one point serves."""
        ...

    @property
    def joint_work(self) -> int:
        """Work charged the first time the search asks about one ``joint_key``."""
        ...

    def order(self) -> Sequence[int]:
        """The needs in the order the greedy serves them."""
        ...

    def executions(self, point: int) -> int:
        """How many times a barrier at the point runs."""
        ...

    def serving(self, need: int) -> dict[int, Rank]:
        """The allowed points that serve the need alone, each with its tie-break rank."""
        ...

    def joint(self, need: int, choices: set[int]) -> list[int] | None:
        """Points of ``choices`` that serve the need together (one in every arm of a branch
        on its way) when none serves it alone; None: no such points."""
        ...

    def alone(self, point: int) -> Mask:
        """Per need: whether a barrier at the point serves it alone."""
        ...

    def served(self, points: list[int]) -> Mask:
        """Per need: whether barriers at the points serve it, alone or together."""
        ...

    def jointly(self, points: list[int]) -> Mask:
        """Per need: whether the points serve it together (through every arm)."""
        ...

    def joint_key(self, points: Iterable[int]) -> frozenset[int]:
        """The points of ``points`` that count for ``jointly``."""
        ...

    def candidates(self, need: int) -> set[int]:
        """Allowed points that may take part in serving the need (alone or together)."""
        ...

    def windows(self, target: I64) -> Windows:
        """The distinct windows of the ``target`` needs and their candidate points."""
        ...


@dataclass(frozen=True)
class Windows:
    """Target needs grouped by window: each window's candidate points, in the order of the
    packing bound (by window end), and each target need's window."""

    candidates: list[frozenset[int]]
    window_of: I64


class ExplicitSets:
    """Needs given as explicit sets of serving points (``PointSets`` with no point serving
    a need together with another), with each point's executions: the shape of a route that
    has already found, per reuse, the points that order it. The greedy takes the needs by
    their last point, then their first, and ranks the latest point first."""

    def __init__(
        self, serves: Sequence[frozenset[int]], executions: Mapping[int, int], allowed: list[int]
    ) -> None:
        self.serves = [s & frozenset(allowed) for s in serves]
        self.weight = executions
        self.size = len(serves)
        self.alone_work = self.size
        self.joint_work = 0

    def order(self) -> Sequence[int]:
        last = [(max(s, default=-1), min(s, default=-1), k) for k, s in enumerate(self.serves)]
        return [k for *_, k in sorted(last)]

    def executions(self, point: int) -> int:
        return self.weight[point]

    def serving(self, need: int) -> dict[int, Rank]:
        return {p: (-p,) for p in self.serves[need]}

    def joint(self, need: int, choices: set[int]) -> list[int] | None:
        return None

    def alone(self, point: int) -> Mask:
        return np.asarray([point in s for s in self.serves], dtype=np.bool_)

    def served(self, points: list[int]) -> Mask:
        chosen = set(points)
        return np.asarray([bool(s & chosen) for s in self.serves], dtype=np.bool_)

    def jointly(self, points: list[int]) -> Mask:
        return np.zeros(self.size, dtype=np.bool_)

    def joint_key(self, points: Iterable[int]) -> frozenset[int]:
        return frozenset()

    def candidates(self, need: int) -> set[int]:
        return set(self.serves[need])

    def windows(self, target: I64) -> Windows:
        sets = [self.serves[k] for k in target.tolist()]
        distinct = sorted(set(sets), key=lambda s: (max(s, default=-1), sorted(s)))
        at = {s: i for i, s in enumerate(distinct)}
        return Windows(distinct, np.asarray([at[s] for s in sets], dtype=np.int64))


def greedy_on_sets(
    needs: PointSets, want: Mask, allowed: list[int], base: list[int]
) -> tuple[list[int], list[int]]:
    """New points from ``allowed`` that, with ``base``, serve every need of ``want`` that
    some allowed point can, in the order taken, and the need that made each taken (-1: a
    point of a joint set). Per open need in ``order``: of the points serving it alone, the
    one run fewest times, then the tie-breaks of the module's docstring; with none, the
    points serving it together."""
    open_ = want & ~needs.served(base)
    choices = set(allowed) | set(base)
    new: list[int] = []
    why: list[int] = []
    for k in needs.order():
        if not open_[k]:
            continue
        fits = needs.serving(k)
        if not fits:
            together = needs.joint(k, choices)
            if together is not None:
                new.extend(together)
                why.extend([-1] * len(together))
                open_ &= ~needs.served(sorted({*base, *new}))
            open_[k] = False
            continue
        cheapest = min(needs.executions(p) for p in fits)
        gains = {p: open_ & needs.alone(p) for p in fits if needs.executions(p) == cheapest}
        best = min(gains, key=lambda p: (-int(gains[p].sum()), fits[p], p))
        new.append(best)
        why.append(k)
        open_ &= ~gains[best]
    return new, why


def choose_on_sets(
    needs: PointSets,
    want: Mask,
    allowed: list[int],
    base: list[int],
    *,
    max_nodes: int,
    work: int,
) -> SyncChoice:
    """New points from ``allowed`` (sorted, none of ``base``) that, with ``base``, serve
    every need of ``want`` that some allowed point can, at the fewest executions, then the
    fewest points; proved, or the best found within ``max_nodes`` and ``work``."""
    taken, why = greedy_on_sets(needs, want, allowed, base)
    found = sorted(set(taken) - set(base))
    if not allowed or not found:
        return SyncChoice(found, True, (0, 0))
    proof = _quick_bound(needs, taken, why)
    if proof is not None:
        return SyncChoice(found, True, proof)
    target = want & ~needs.served(base) & needs.served(sorted({*base, *allowed}))
    if not target.any():
        return SyncChoice(found, True, (0, 0))
    idx = np.flatnonzero(target)
    search = _Search(needs, idx, needs.windows(idx), allowed, base, max_nodes, work)
    return search.run(found)


def fewest_on_sets(
    sets: Sequence[frozenset[int]], runs: Callable[[int], int], max_nodes: int
) -> list[int]:
    """Points (sorted) meeting every non-empty set of ``sets`` at the fewest executions
    (``runs``), then the fewest points: ``choose_on_sets`` on explicit sets, proved within
    ``max_nodes`` sets of points judged (and that many times the sets and points in work),
    else the best found."""
    kept = [s for s in sets if s]
    if not kept:
        return []
    points = sorted(frozenset().union(*kept))
    needs = ExplicitSets(kept, {p: runs(p) for p in points}, points)
    want = np.ones(len(kept), dtype=np.bool_)
    work = max_nodes * (len(kept) + len(points))
    return sorted(choose_on_sets(needs, want, points, [], max_nodes=max_nodes, work=work).points)


def _quick_bound(needs: PointSets, taken: list[int], why: list[int]) -> Cost | None:
    """The greedy's cost when the needs that made it take each point have disjoint
    candidates and each point is the cheapest of its need's: then no set is cheaper (the
    packing bound on those needs alone). None when that does not hold."""
    if -1 in why:
        return None
    seen: set[int] = set()
    for p, k in zip(taken, why, strict=True):
        mine = needs.candidates(k)
        if mine & seen or min(needs.executions(q) for q in mine) < needs.executions(p):
            return None
        seen |= mine
    return sum(needs.executions(p) for p in taken), len(taken)


class _OutOfBudgetError(Exception):
    """The search passed its budget of sets of points or of work."""


class _Search:
    """Branch and bound over the points on the target needs (``idx``)."""

    def __init__(
        self,
        needs: PointSets,
        idx: I64,
        windows: Windows,
        allowed: list[int],
        base: list[int],
        max_nodes: int,
        budget: int,
    ) -> None:
        self.needs = needs
        self.idx = idx
        self.base = base
        self.weight = {p: needs.executions(p) for p in allowed}
        self.candidates = windows.candidates
        self.windows_of = windows.window_of
        self.max_nodes = max_nodes
        self.budget = budget
        self.nodes = 0
        self.work = 0
        self.best: tuple[Cost, list[int]] = ((0, 0), [])
        # Which target needs one point serves (cached per point), and which a set serves
        # together (cached per joint key, since only those points count there).
        self._one: dict[int, Mask] = {}
        self._joint: dict[frozenset[int], Mask] = {}

    def cost(self, points: list[int]) -> Cost:
        return sum(self.weight[p] for p in points), len(points)

    def bound(self, windows: list[int], chosen: frozenset[int], left_out: frozenset[int]) -> Cost:
        """Windows with disjoint candidates (less the chosen and the left-out points) each
        need a point of their own: the cheapest of each, summed, and their number."""
        taken: set[int] = set()
        gone = chosen | left_out
        executions = points = 0
        for w in windows:  # by end
            free = self.candidates[w] - gone
            if not free:
                return (1 << 62, 1 << 62)  # no way to serve it: prune
            if free & taken:
                continue
            taken |= free
            executions += min(self.weight[p] for p in free)
            points += 1
        return executions, points

    def one(self, point: int) -> Mask:
        """Target needs a barrier at the point serves alone."""
        found = self._one.get(point)
        if found is None:
            self.work += self.needs.alone_work
            found = self._one[point] = self.needs.alone(point)[self.idx]
        return found

    def together(self, chosen: frozenset[int]) -> Mask:
        """Target needs the points (with the base) serve together."""
        key = self.needs.joint_key((*self.base, *chosen))
        found = self._joint.get(key)
        if found is None:
            self.work += self.needs.joint_work
            found = self._joint[key] = self.needs.jointly(sorted(key))[self.idx]
        return found

    def open_windows(self, chosen: frozenset[int], single: Mask) -> list[int]:
        """The windows of the target needs the points leave open (``single``: those one of
        them serves alone)."""
        left = ~(single | self.together(chosen))
        return sorted(set(self.windows_of[left].tolist()))

    def run(self, greedy_points: list[int]) -> SyncChoice:
        single = np.zeros(self.idx.size, dtype=np.bool_)
        for p in self.base:
            single |= self.one(p)
        windows = self.open_windows(frozenset(), single)
        lower = self.bound(windows, frozenset(), frozenset())
        self.best = (self.cost(greedy_points), greedy_points)
        if self.best[0] <= lower:
            return SyncChoice(greedy_points, True, lower)
        try:
            self.search(frozenset(), (0, 0), frozenset(), single, windows)
        except _OutOfBudgetError:
            return SyncChoice(sorted(self.best[1]), False, lower)
        return SyncChoice(sorted(self.best[1]), True, self.best[0])

    def search(
        self,
        chosen: frozenset[int],
        cost: Cost,
        left_out: frozenset[int],
        single: Mask,
        windows: list[int],
    ) -> None:
        self.nodes += 1
        self.work += self.idx.size + len(windows)
        if self.nodes > self.max_nodes or self.work > self.budget:
            raise _OutOfBudgetError
        if not windows:
            if cost < self.best[0]:
                self.best = (cost, sorted(chosen))
            return
        more = self.bound(windows, chosen, left_out)
        if (cost[0] + more[0], cost[1] + more[1]) >= self.best[0]:
            return
        # The open window with the fewest candidates: one of them is in every solution.
        w = min(windows, key=lambda w: (len(self.candidates[w] - chosen - left_out), w))
        options = sorted(self.candidates[w] - chosen - left_out, key=lambda p: (self.weight[p], p))
        out = set(left_out)
        for p in options:
            step = (cost[0] + self.weight[p], cost[1] + 1)
            if step >= self.best[0]:
                break
            now = chosen | {p}
            more_single = single | self.one(p)
            self.search(now, step, frozenset(out), more_single, self.open_windows(now, more_single))
            out.add(p)
