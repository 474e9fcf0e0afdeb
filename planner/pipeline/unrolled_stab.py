"""The barrier points a placement on the unrolled program relies on: the program's needs in
the shape of the shared synchronisation choice (``planner.core.sync_choice``), which takes
the fewest executions (a point in loops of ``trips`` iterations runs ``trips`` times, nested
loops multiply), then the fewest points.

Each hazard that shares bytes needs a point from ``allowed`` whose copy lies in its window on
every path, or one in every arm of a branch it crosses (``Program.protected``). With loops
a point has several copies and the windows are no longer intervals of points, so the
straight-line interval stabbing is no longer exact; the choice on sets proves its greedy
with a packing bound or searches, within ``SEARCH_NODES`` sets of points and a work budget
of ``STAB_WORK_PER_SECOND`` times ``STAB_SEARCH_SHARE`` of the time limit (work: the
hazards and windows judged, per set the open ones, per new point or set of points inside
arms the program's hazards). A hazard's candidate points (for the bound and the search)
are its window's copies, the window grown over a branch copy the later piece covers from
inside it, less the copies in an arm apart from the one holding a piece (that arm never
runs on the hazard's path). The greedy's tie-break among equally cheap points serving the
most open hazards: the copy inside fewest arms, then the latest copy.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from planner.core.budget import STAB_SEARCH_SHARE, STAB_WORK_PER_SECOND
from planner.core.sync_choice import SyncChoice, Windows, choose_on_sets, greedy_on_sets
from planner.pipeline.program import Program

__all__ = ["SEARCH_NODES", "Choice", "ProgramNeeds", "choose", "greedy"]

Mask = npt.NDArray[np.bool_]
I64 = npt.NDArray[np.int64]
Choice = SyncChoice
SEARCH_NODES = 500


def greedy(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> list[int]:
    """New points (sorted) from ``allowed`` that, with ``base``, protect every hazard of
    ``need`` that some allowed point can (the choice's greedy, unproved)."""
    prog.prime([*allowed, *base])
    return sorted(set(greedy_on_sets(ProgramNeeds(prog, allowed, base), need, allowed, base)[0]))


def choose(prog: Program, need: Mask, allowed: list[int], base: list[int]) -> Choice:
    """New points from ``allowed`` that, with ``base``, protect every hazard of ``need``
    that some allowed point can, at the fewest executions, then the fewest points."""
    allowed = sorted(set(allowed) - set(base))
    prog.prime([*allowed, *base])
    work = int(STAB_WORK_PER_SECOND * STAB_SEARCH_SHARE * prog.req.options.time_limit)
    needs = ProgramNeeds(prog, allowed, base)
    return choose_on_sets(needs, need, allowed, base, max_nodes=SEARCH_NODES, work=work)


class ProgramNeeds:
    """The hazards of an unrolled program as needs served by sets of ``allowed`` points
    (``planner.core.sync_choice.PointSets``)."""

    def __init__(self, prog: Program, allowed: list[int], base: list[int]) -> None:
        self.prog = prog
        self.allowed = allowed
        h = prog.hazards
        arms = [arm for br in prog.req.branches for arm in br.arms]
        self.in_arm = {p for p in [*allowed, *base] if any(s <= p < e for s, e in arms)}
        self.size = h.n
        self.alone_work = h.n
        self.joint_work = h.n * len(prog.branch_copies())

    def order(self) -> Sequence[int]:
        """By the window's end, then its start."""
        h = self.prog.hazards
        order: list[int] = np.lexsort((h.after, h.before)).tolist()
        return order

    def executions(self, point: int) -> int:
        return self.prog.executions(point)

    def serving(self, need: int) -> dict[int, tuple[int, ...]]:
        """Points with a copy that protects the hazard, ranked by their best copy: inside
        fewest arms, then latest."""
        h = self.prog.hazards
        pool, keys = self.prog.pool(self.allowed)
        lo = bisect.bisect_right(keys, int(h.after[need]))
        hi = bisect.bisect_right(keys, int(h.before[need]))
        ranks: dict[int, tuple[int, ...]] = {}
        for c in pool[lo:hi]:
            if self.prog.covers(c, need):
                rank = (len(c.arms), -c.virtual)
                if c.point not in ranks or rank < ranks[c.point]:
                    ranks[c.point] = rank
        return ranks

    def joint(self, need: int, choices: set[int]) -> list[int] | None:
        return self.prog.every_arm_points(need, choices)

    def alone(self, point: int) -> Mask:
        return self.prog.protected_by(point)

    def served(self, points: list[int]) -> Mask:
        return self.prog.protected(points)

    def jointly(self, points: list[int]) -> Mask:
        return self.prog.by_every_arm(points)

    def joint_key(self, points: Iterable[int]) -> frozenset[int]:
        """The points inside an arm of a branch."""
        return frozenset(p for p in points if p in self.in_arm)

    def candidates(self, need: int) -> set[int]:
        """Points with a copy that may take part in protecting the hazard (``windows``, for
        one hazard)."""
        prog = self.prog
        pool, keys = prog.pool(self.allowed)
        h = prog.hazards
        after, before = int(h.after[need]), int(h.before[need])
        xs, xe, ys, ye = int(h.xs[need]), int(h.xe[need]), int(h.ys[need]), int(h.ye[need])
        # Each branch copy holding a piece of the hazard: its span and the arm holding it.
        held: list[tuple[int, int, tuple[int, int]]] = []
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

    def windows(self, target: I64) -> Windows:
        """The distinct windows of the target hazards (by their end, then start, then the
        arms holding a piece) and their candidate points."""
        prog, idx = self.prog, target
        h = prog.hazards
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
        pool, keys = prog.pool(self.allowed)
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
        candidates = [frozenset(point[row].tolist()) for row in usable]
        return Windows(candidates, window)


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
