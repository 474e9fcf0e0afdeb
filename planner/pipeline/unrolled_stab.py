"""The barrier points a placement on the unrolled program relies on: the fewest executions
(a point in loops of ``trips`` iterations runs ``trips`` times, nested loops multiply), then
the fewest points.

Each hazard that shares bytes needs a point from ``allowed`` whose copy lies in its window on
every path, or one in every arm of a branch it crosses (``Program.protected``). With loops
a point has several copies and the windows are no longer intervals of points, so the
straight-line interval stabbing is no longer exact. ``choose`` runs the greedy below, then
proves it or improves on it:

- a bound: hazards whose candidate points (a copy inside the window, grown over a branch
  copy the later piece covers from inside the window; no copy in an arm apart from the one
  holding a piece, which never runs on the path) are pairwise disjoint each need a point of
  their own, so the cheapest candidate of each adds up to a lower bound on the executions,
  and their number on the points; when the greedy meets both it is optimal (tried first on
  the hazards that made the greedy take its points, then on every open window);
- else a branch and bound over the points: take the open hazard with the fewest candidates,
  try each (cheapest first; once tried, left out of the later branches), prune on the
  bound of what stays open. Exhaustive, hence exact, unless it judges more than
  ``SEARCH_NODES`` sets of points or passes its work budget, ``STAB_WORK_PER_SECOND``
  times ``STAB_SEARCH_SHARE`` of the time limit (work: the hazards and windows judged, per set
  the open ones, per new point or set of points inside arms the program's): then the best
  set found is kept, unproved. Both budgets are counts, never the clock, so the same
  request gets the same barriers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.budget import STAB_SEARCH_SHARE, STAB_WORK_PER_SECOND
from planner.pipeline.program import BarrierCopy, Program

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
    """The search passed its budget of sets of points or of work."""


def greedy(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> list[int]:
    """New points (sorted) from ``allowed`` that, with ``base``, protect every hazard of
    ``need`` that some allowed point can. Greedy by the window's end: of the points with a
    copy that covers the hazard, the one run fewest times, then the one whose copies cover
    the most hazards still open, then the one inside fewest arms, then the latest."""
    return sorted(set(_greedy(prog, need, allowed, base)[0]))


def _greedy(
    prog: Program, need: Mask, allowed: list[int], base: list[int]
) -> tuple[list[int], list[int]]:
    """``greedy``'s points in the order taken, and the hazard that made each taken (-1: a
    point of one in every arm)."""
    h = prog.hazards
    prog.prime([*allowed, *base])
    open_ = need & ~prog.protected(base)
    choices = set(allowed) | set(base)
    pool, keys = prog.pool(allowed)
    new: list[int] = []
    why: list[int] = []
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
                why.extend([-1] * len(arms))
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
        why.append(k)
        open_ &= ~gains[best]
    return new, why


def choose(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> Choice:
    """New points from ``allowed`` that, with ``base``, protect every hazard of ``need``
    that some allowed point can, at the fewest executions, then the fewest points."""
    allowed = sorted(set(allowed) - set(base))
    taken, why = _greedy(prog, need, allowed, base)
    found = sorted(set(taken) - set(base))
    if not allowed or not found:
        return Choice(found, True, (0, 0))
    proof = _quick_bound(prog, allowed, taken, why)
    if proof is not None:
        return Choice(found, True, proof)
    target = need & ~prog.protected(base) & prog.protected(sorted({*base, *allowed}))
    if not target.any():
        return Choice(found, True, (0, 0))
    budget = int(STAB_WORK_PER_SECOND * STAB_SEARCH_SHARE * prog.req.options.time_limit)
    return _Search(prog, target, allowed, base, budget).run(found)


def _quick_bound(
    prog: Program, allowed: list[int], taken: list[int], why: list[int]
) -> Cost | None:
    """The greedy's cost when the hazards that made it take each point have disjoint
    candidates and each point is the cheapest of its hazard's: then no set is cheaper (the
    packing bound on those hazards alone). None when that does not hold."""
    if -1 in why:
        return None
    pool, keys = prog.pool(allowed)
    seen: set[int] = set()
    for p, k in zip(taken, why, strict=True):
        mine = _candidates(prog, k, pool, keys)
        if mine & seen or min(prog.executions(q) for q in mine) < prog.executions(p):
            return None
        seen |= mine
    return sum(prog.executions(p) for p in taken), len(taken)


def _candidates(prog: Program, k: int, pool: list[BarrierCopy], keys: list[int]) -> set[int]:
    """Points with a copy that may take part in protecting hazard ``k`` (``_Search``'s
    windows, for one hazard)."""
    h = prog.hazards
    after, before = int(h.after[k]), int(h.before[k])
    xs, xe, ys, ye = int(h.xs[k]), int(h.xe[k]), int(h.ys[k]), int(h.ye[k])
    held: list[tuple[int, int, tuple[int, int]]] = []  # branch copy span, the arm with a piece
    for b in prog.branch_copies():
        arm = next(
            (a for a in b.arms if (a[0] <= xs and xe <= a[1]) or (a[0] <= ys and ye <= a[1])),
            None,
        )
        if arm is not None:
            held.append((b.start, b.end, arm))
        elif after < b.start <= before:
            before = max(before, b.end)
    lo, hi = bisect.bisect_right(keys, after), bisect.bisect_right(keys, before)
    return {
        c.point
        for c in pool[lo:hi]
        if not any(s <= c.virtual < e and not a[0] <= c.virtual < a[1] for s, e, a in held)
    }


class _Search:
    def __init__(
        self, prog: Program, target: Mask, allowed: list[int], base: list[int], budget: int
    ) -> None:
        self.prog = prog
        self.base = base
        self.weight = {p: prog.executions(p) for p in allowed}
        h = prog.hazards
        idx = np.flatnonzero(target)
        after, before = h.after[idx], h.before[idx].copy()
        ys, ye = h.ys[idx], h.ye[idx]
        for b in prog.branch_copies():  # outer copies first: grown windows reach inner ones
            # A later piece that covers the branch from inside the window may start on any
            # arm's first point: the window grows over the branch (one inside an arm needs
            # a point on that arm's path: the window holds it already).
            grow = (after < b.start) & (b.start <= before)
            for s, e in b.arms:
                grow &= ~((s <= ys) & (ye <= e))
            before[grow] = np.maximum(before[grow], b.end)
        pool, keys = prog.pool(allowed)
        lo = np.searchsorted(np.asarray(keys, dtype=np.int64), after, side="right")
        hi = np.searchsorted(np.asarray(keys, dtype=np.int64), before, side="right")
        # The arm of each branch copy that holds a piece of the hazard (-1: none): a copy in
        # another arm of that branch copy never runs on the hazard's path.
        branches = prog.branch_copies()
        held = np.full((idx.size, len(branches)), -1, dtype=np.int64)
        for t, bc in enumerate(branches):
            for k, (s, e) in enumerate(bc.arms):
                inside = ((s <= h.xs[idx]) & (h.xe[idx] <= e)) | ((s <= ys) & (ye <= e))
                held[inside, t] = k
        # Distinct windows numbered by their end (the order of the bound's packing).
        rows, window = _unique_rows(np.concatenate([np.stack([hi, lo], axis=1), held], axis=1))
        spans = rows[:, [1, 0]].tolist()
        # Candidate points of each distinct window (its copies, less those in an arm apart
        # from the one holding a piece), and each target hazard's window.
        at = np.asarray(keys, dtype=np.int64)
        copy = np.arange(at.size)
        ends = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        usable = (ends[:, :1] <= copy[None, :]) & (copy[None, :] < ends[:, 1:])
        for t, bc in enumerate(branches):
            arm_of = np.full(at.size, -1, dtype=np.int64)
            for k, (s, e) in enumerate(bc.arms):
                arm_of[(s <= at) & (at < e)] = k
            mine = rows[:, 2 + t][:, None]
            usable &= (mine < 0) | (arm_of[None, :] < 0) | (arm_of[None, :] == mine)
        point = np.asarray([c.point for c in pool], dtype=np.int64)
        self.candidates = [frozenset(point[row].tolist()) for row in usable]
        self.nodes = 0
        self.work = 0
        self.budget = budget
        self.best: tuple[Cost, list[int]] = ((0, 0), [])
        # Coverage on the target hazards only: by one point (cached per point), or by points
        # in every arm of a branch (judged per set of the chosen points inside arms, since
        # only those count there).
        self.idx = idx
        self.windows_of = window
        arms = [arm for br in prog.req.branches for arm in br.arms]
        self.in_arm = {p for p in [*allowed, *base] if any(s <= p < e for s, e in arms)}
        self._one: dict[int, Mask] = {}
        self._arms: dict[frozenset[int], Mask] = {}

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
                return (1 << 62, 1 << 62)  # no way to cover it: prune
            if free & taken:
                continue
            taken |= free
            executions += min(self.weight[p] for p in free)
            points += 1
        return executions, points

    def one(self, point: int) -> Mask:
        """Target hazards a barrier at the point protects alone."""
        found = self._one.get(point)
        if found is None:
            self.work += self.prog.hazards.n
            found = self._one[point] = self.prog.protected_by(point)[self.idx]
        return found

    def by_arms(self, chosen: frozenset[int]) -> Mask:
        """Target hazards the points protect through every arm of a branch."""
        key = frozenset(p for p in (*self.base, *chosen) if p in self.in_arm)
        found = self._arms.get(key)
        if found is None:
            self.work += self.prog.hazards.n * len(self.prog.branch_copies())
            found = self._arms[key] = self.prog.by_every_arm(sorted(key))[self.idx]
        return found

    def open_windows(self, chosen: frozenset[int], single: Mask) -> list[int]:
        """The windows of the target hazards the points leave open (``single``: those one
        of them protects alone)."""
        left = ~(single | self.by_arms(chosen))
        return sorted(set(self.windows_of[left].tolist()))

    def run(self, greedy_points: list[int]) -> Choice:
        single = np.zeros(self.idx.size, dtype=np.bool_)
        for p in self.base:
            single |= self.one(p)
        windows = self.open_windows(frozenset(), single)
        lower = self.bound(windows, frozenset(), frozenset())
        self.best = (self.cost(greedy_points), greedy_points)
        if self.best[0] <= lower:
            return Choice(greedy_points, True, lower)
        try:
            self.search(frozenset(), (0, 0), frozenset(), single, windows)
        except _OutOfBudgetError:
            return Choice(sorted(self.best[1]), False, lower)
        return Choice(sorted(self.best[1]), True, self.best[0])

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
        if self.nodes > SEARCH_NODES or self.work > self.budget:
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


def _unique_rows(m: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of ``m`` in lexicographic order, and each row's index among them
    (``np.unique(m, axis=0, return_inverse=True)``, without its cost on small inputs)."""
    if not m.shape[0]:
        return m, np.zeros(0, dtype=np.int64)
    order = np.lexsort(m.T[::-1])
    ordered = m[order]
    new = np.ones(len(order), dtype=np.bool_)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return ordered[new], inverse
