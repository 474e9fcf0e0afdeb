"""The barrier points a placement on the unrolled program relies on: the fewest executions
(a point in loops of ``trips`` iterations runs ``trips`` times, nested loops multiply), then
the fewest points.

Each hazard that shares bytes needs a point from ``allowed`` whose copy lies in its window on
every path, or one in every arm of a branch it crosses (``Program.protected``). With loops
a point has several copies and the windows are no longer intervals of points, so the
straight-line interval stabbing is no longer exact. ``choose`` runs the greedy below, then
proves it or improves on it:

- a bound: hazards whose candidate points (a copy inside the window, the window grown over
  every branch copy that starts in it) are pairwise disjoint each need a point of their
  own, so the cheapest candidate of each adds up to a lower bound on the executions, and
  their number on the points; when the greedy meets both it is optimal;
- else a branch and bound over the points: take the open hazard with the fewest candidates,
  try each (cheapest first; once tried, left out of the later branches), prune on the
  bound of what stays open. Exhaustive, hence exact, unless it judges more than
  ``SEARCH_NODES`` sets of points: then the best set found is kept, unproved.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.program import Program

__all__ = ["SEARCH_NODES", "Choice", "choose", "greedy"]

Mask = npt.NDArray[np.bool_]
Cost = tuple[int, int]  # executions, points
SEARCH_NODES = 500


@dataclass(frozen=True)
class Choice:
    """New points (sorted), whether they are proved the cheapest, and a lower bound."""

    points: list[int]
    proved: bool
    bound: Cost


class _OutOfBudgetError(Exception):
    """The search judged ``SEARCH_NODES`` sets of points."""


def greedy(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> list[int]:
    """New points (sorted) from ``allowed`` that, with ``base``, protect every hazard of
    ``need`` that some allowed point can. Greedy by the window's end: of the points with a
    copy that covers the hazard, the one run fewest times, then the one whose copies cover
    the most hazards still open, then the one inside fewest arms, then the latest."""
    h = prog.hazards
    prog.prime([*allowed, *base])
    open_ = need & ~prog.protected(base)
    choices = set(allowed) | set(base)
    pool, keys = prog.pool(allowed)
    new: list[int] = []
    order = np.lexsort((h.after, h.before))
    for k in order[open_[order]].tolist():
        if not open_[k]:
            continue
        lo = bisect.bisect_right(keys, int(h.after[k]))
        hi = bisect.bisect_right(keys, int(h.before[k]))
        fits = [c for c in pool[lo:hi] if prog.covers(c, k)]
        if not fits:
            # One point in every arm of a branch on the way, or none: then the caller made
            # the pair a conflict.
            arms = prog.every_arm_points(k, choices)
            if arms is not None:
                new.extend(arms)
                open_ &= ~prog.protected(sorted({*base, *new}))
            open_[k] = False
            continue
        cheapest = min(prog.executions(c.point) for c in fits)
        fits = [c for c in fits if prog.executions(c.point) == cheapest]
        gains = {c.point: open_ & prog.protected_by(c.point) for c in fits}
        if len(gains) > 1:
            fits.sort(key=lambda c: (-int(gains[c.point].sum()), len(c.arms), -c.virtual))
        else:
            fits.sort(key=lambda c: (len(c.arms), -c.virtual))
        best = fits[0].point
        new.append(best)
        open_ &= ~gains[best]
    return sorted(set(new))


def choose(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> Choice:
    """New points from ``allowed`` that, with ``base``, protect every hazard of ``need``
    that some allowed point can, at the fewest executions, then the fewest points."""
    allowed = sorted(set(allowed) - set(base))
    found = [p for p in greedy(prog, need, allowed, base) if p not in base]
    if not allowed:
        return Choice(found, True, (0, 0))
    target = need & ~prog.protected(base) & prog.protected(sorted({*base, *allowed}))
    if not target.any():
        return Choice(found, True, (0, 0))
    return _Search(prog, target, allowed, base).run(found)


class _Search:
    def __init__(self, prog: Program, target: Mask, allowed: list[int], base: list[int]) -> None:
        self.prog = prog
        self.target = target
        self.base = base
        self.weight = {p: prog.executions(p) for p in allowed}
        h = prog.hazards
        idx = np.flatnonzero(target)
        after, before = h.after[idx], h.before[idx].copy()
        for b in prog.branch_copies():  # outer copies first: grown windows reach inner ones
            grow = (after < b.start) & (b.start <= before)
            before[grow] = np.maximum(before[grow], b.end)
        pool, keys = prog.pool(allowed)
        lo = np.searchsorted(np.asarray(keys, dtype=np.int64), after, side="right")
        hi = np.searchsorted(np.asarray(keys, dtype=np.int64), before, side="right")
        spans, window = np.unique(np.stack([lo, hi], axis=1), axis=0, return_inverse=True)
        # Candidate points of each distinct window, and each target hazard's window.
        self.candidates = [frozenset(c.point for c in pool[a:b]) for a, b in spans.tolist()]
        self.window = np.full(h.n, -1, dtype=np.int64)
        self.window[idx] = window.reshape(-1)
        self.ends = spans[:, 1]
        self.nodes = 0
        self.best: tuple[Cost, list[int]] = ((0, 0), [])
        self._covered: dict[frozenset[int], Mask] = {}

    def cost(self, points: list[int]) -> Cost:
        return sum(self.weight[p] for p in points), len(points)

    def bound(self, windows: list[int], chosen: frozenset[int], left_out: frozenset[int]) -> Cost:
        """Windows with disjoint candidates (less the chosen and the left-out points) each
        need a point: the cheapest of each, summed, and their number."""
        taken: set[int] = set()
        executions = points = 0
        for w in sorted(windows, key=lambda w: (int(self.ends[w]), w)):
            free = self.candidates[w] - chosen - left_out
            if not free:
                return (1 << 62, 1 << 62)  # no way to cover it: prune
            if free & taken:
                continue
            taken |= free
            executions += min(self.weight[p] for p in free)
            points += 1
        return executions, points

    def open_windows(self, chosen: frozenset[int]) -> list[int]:
        found = self._covered.get(chosen)
        if found is None:
            found = self.prog.protected(sorted({*self.base, *chosen}))
            self._covered[chosen] = found
        left = self.target & ~found
        return sorted(set(self.window[left].tolist()))

    def run(self, greedy_points: list[int]) -> Choice:
        windows = self.open_windows(frozenset())
        lower = self.bound(windows, frozenset(), frozenset())
        self.best = (self.cost(greedy_points), greedy_points)
        if self.best[0] <= lower:
            return Choice(greedy_points, True, lower)
        try:
            self.search(frozenset(), (0, 0), frozenset(), windows)
        except _OutOfBudgetError:
            return Choice(sorted(self.best[1]), False, lower)
        return Choice(sorted(self.best[1]), True, self.best[0])

    def search(
        self, chosen: frozenset[int], cost: Cost, left_out: frozenset[int], windows: list[int]
    ) -> None:
        self.nodes += 1
        if self.nodes > SEARCH_NODES:
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
            self.search(now, step, frozenset(out), self.open_windows(now))
            out.add(p)
