"""The unrolled program of a request with loops, branches or several live ranges: the
"pieces" model the planner plans on.

Virtual time lays the program out with every loop body twice (once for a loop of one trip;
nested loops: the inner body twice inside each outer copy); branch arms keep their places,
one after the other, since they are contiguous point ranges already. Each buffer range
becomes one *piece* per copy of the innermost loop around it (a range that starts or ends
inside a deeper loop covers that whole unrolled loop: it is live over the whole body on every
iteration). Every piece of a buffer shares the buffer's offset. Then, exactly as on a straight line:

- two pieces whose virtual intervals intersect never share a byte (pieces in different arms
  of one branch copy never intersect: the arms lie one after the other);
- a piece Y after a piece X on the same bytes needs a barrier at a virtual point ``v`` with
  ``last_access(X) < v <= first_access(Y)`` that runs on every path from X to Y: one inside
  an arm that holds neither X nor Y does not count, and X, Y in different arms of one branch
  copy never run together, so need none;
- a barrier at an original point runs in every copy of it;
- the peak of live bytes over virtual points is a lower bound on every path.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.core.errors import RequestError
from planner.core.models import PlanRequest
from planner.core.models.control import ArmIndex

__all__ = [
    "MAX_PIECES",
    "BarrierCopy",
    "BranchCopy",
    "Hazards",
    "Piece",
    "Program",
    "build_program",
    "held_peak",
    "straight_line",
]

I64 = npt.NDArray[np.int64]

MAX_PIECES = 1024  # pieces of the unrolled program; hazards are checked over all pairs
PRIME_CELLS = 1 << 22  # (barrier copy, hazard) cells judged at once

Copies = tuple[int, ...]  # copy (0 or 1) of each loop around a point, outermost first


@dataclass(frozen=True)
class Piece:
    """One buffer range in one copy of the loops around it, in virtual time."""

    buffer: int  # index in the request
    point: int  # original point where the piece starts (a loop's start when it covers it)
    start: int  # virtual point, inclusive
    end: int  # virtual point, exclusive
    first: int  # virtual point of the first access
    last: int  # virtual point of the last access
    arms: dict[tuple[int, Copies], int]  # (branch, copies of its loops) -> arm it lies in
    part: int = 0  # index of the range in the buffer's ``lifetimes``


@dataclass(frozen=True)
class BarrierCopy:
    """One virtual copy of a barrier point, and the arm copies around it."""

    virtual: int
    point: int  # the original program point
    # virtual [start, end) of each arm copy around it, and of each copy of a loop around it
    # that may run zero times: the barrier runs only on paths through all of them
    arms: tuple[tuple[int, int], ...]


@dataclass
class BranchCopy:
    """One copy of a branch in virtual time: its arm copies, the arm copies around it and
    those of the branches inside it."""

    arms: tuple[tuple[int, int], ...]
    outer: tuple[tuple[int, int], ...] = ()  # arm copies and skippable loop copies around it
    inner: tuple[tuple[int, int], ...] = ()

    @property
    def start(self) -> int:
        return self.arms[0][0]

    @property
    def end(self) -> int:
        return self.arms[-1][1]

    def nested(self, v: int, arm: tuple[int, int]) -> bool:
        """Whether virtual point ``v`` of ``arm`` lies in an arm of a branch inside it."""
        return any(arm[0] <= s and e <= arm[1] and s <= v < e for s, e in self.inner)


@dataclass(frozen=True)
class Hazards:
    """Every ordered pair of pieces that may run in sequence (a possible reuse), as arrays:
    piece ``later[k]`` follows piece ``earlier[k]``; on shared bytes it needs a barrier in
    ``(after[k], before[k]]`` (virtual) that runs on every path between them."""

    earlier: I64  # piece index
    later: I64
    a: I64  # buffer of ``earlier``
    b: I64  # buffer of ``later``
    pa: I64  # range (index in ``lifetimes``) of ``earlier``
    pb: I64  # range of ``later``
    after: I64  # virtual: last access of ``earlier``
    before: I64  # virtual: first access of ``later``
    xs: I64  # virtual interval of ``earlier``
    xe: I64
    ys: I64  # virtual interval of ``later``
    ye: I64

    @property
    def n(self) -> int:
        return int(self.after.size)


@dataclass
class Program:
    """The request's unrolled program: pieces, their conflicts and hazards, barrier copies."""

    req: PlanRequest
    pieces: list[Piece]
    by_buffer: list[list[int]]  # piece indices of each buffer
    hazards: Hazards
    live_pairs: set[tuple[int, int]]  # buffer pairs (i < j) live at one virtual point
    peak: int  # bytes: most live at one virtual point
    peak_point: int  # original point of the peak
    peak_buffers: list[int]
    _loops: _Loops = field(repr=False)
    _arms: ArmIndex | None = field(repr=False)
    _copies: dict[int, list[BarrierCopy]] = field(default_factory=dict, repr=False)
    _executions: dict[int, int] = field(default_factory=dict, repr=False)
    _masks: dict[int, npt.NDArray[np.bool_]] = field(default_factory=dict, repr=False)
    _pools: dict[tuple[int, ...], tuple[list[BarrierCopy], list[int]]] = field(
        default_factory=dict, repr=False
    )
    _branches: list[BranchCopy] | None = field(default=None, repr=False)
    _kids: list[list[list[int]]] | None = field(default=None, repr=False)
    _every_arm: dict[tuple[int, ...], npt.NDArray[np.bool_]] = field(
        default_factory=dict, repr=False
    )

    def copies_of(self, point: int) -> list[BarrierCopy]:
        """Every virtual copy of a barrier at ``point``."""
        found = self._copies.get(point)
        if found is None:
            found = [
                BarrierCopy(self._loops.position(point, cp), point, self._arm_copies(point, cp))
                for cp in self._loops.all_copies(point)
            ]
            self._copies[point] = found
        return found

    def _arm_copies(self, point: int, cp: Copies) -> tuple[tuple[int, int], ...]:
        """The virtual spans a barrier copy runs only inside: the arm copies around it, and
        the copies of the loops around it that may run zero times (a skipped body runs no
        barrier, so one there protects only pieces inside that loop)."""
        out = self._loops.skippable_spans(self._loops.chain(point), cp)
        if self._arms is None:
            return out
        for j, k in self._arms.around(point):
            br = self.req.branches[j]
            s, e = br.arms[k]
            # The loops around the whole branch (a loop spanning just this arm runs inside it).
            sub = cp[: self._loops.depth_of_range(br.start, br.end)]
            out += ((self._loops.position(s, sub), self._loops.end_position(e, sub)),)
        return out

    def covers(self, barrier: BarrierCopy, k: int) -> bool:
        """Whether the barrier copy protects hazard ``k``: inside its window and on every
        path from the earlier piece to the later one (an arm around the barrier holds one of
        them)."""
        h = self.hazards
        if not h.after[k] < barrier.virtual <= h.before[k]:
            return False
        xs, xe, ys, ye = int(h.xs[k]), int(h.xe[k]), int(h.ys[k]), int(h.ye[k])
        return all((s <= xs and xe <= e) or (s <= ys and ye <= e) for s, e in barrier.arms)

    def pool(self, points: list[int]) -> tuple[list[BarrierCopy], list[int]]:
        """The copies of barriers at ``points`` sorted by virtual point, and those points."""
        key = tuple(points)
        found = self._pools.get(key)
        if found is None:
            copies = sorted((c for p in points for c in self.copies_of(p)), key=lambda c: c.virtual)
            found = self._pools[key] = (copies, [c.virtual for c in copies])
        return found

    def protected_by(self, point: int) -> npt.NDArray[np.bool_]:
        """Per hazard: whether a barrier at ``point`` (every copy) protects it."""
        found = self._masks.get(point)
        if found is None:
            found = self._masks[point] = self.covered(self.copies_of(point))
        return found

    def protected_by_any(self, points: list[int]) -> npt.NDArray[np.bool_]:
        """Per hazard: whether a barrier at one of ``points`` protects it."""
        self.prime(points)
        if not points:
            return np.zeros(self.hazards.n, dtype=np.bool_)
        masks = [self._masks[p] for p in set(points)]
        return np.logical_or.reduce(masks, axis=0) if len(masks) > 1 else masks[0].copy()

    def protected(self, points: list[int]) -> npt.NDArray[np.bool_]:
        """Per hazard: whether barriers at ``points`` protect it on every path, one point
        alone (``protected_by``) or one point in every arm of a branch (``by_every_arm``)."""
        return self.protected_by_any(points) | self.by_every_arm(points)

    def by_every_arm(self, points: list[int]) -> npt.NDArray[np.bool_]:
        """Per hazard: whether a branch copy that every path from the earlier piece to the
        later one runs is *covered* by barriers at ``points`` within the window: each of its
        arms holds a barrier directly (no deeper branch around it) or a branch copy inside
        it that is covered in turn (nested branches, at any depth). The earlier piece's last
        access lies before the branch; when the later piece's first access lies inside the
        branch (it covers the branch from its first point: on the path of an arm its first
        access may be that arm's first point) each arm needs its barrier at its first point,
        directly or in each arm of a branch starting there."""
        h = self.hazards
        if not self.req.branches or not points or self._arms is None:
            return np.zeros(h.n, dtype=np.bool_)
        # Only the points inside arms count: judged once per set of them.
        key = tuple(sorted({p for p in points if self._arms.around(p)}))
        found = self._every_arm.get(key)
        if found is None:
            found = self._every_arm[key] = self._by_every_arm(list(key))
        return found.copy()

    def _by_every_arm(self, points: list[int]) -> npt.NDArray[np.bool_]:
        h = self.hazards
        mask = np.zeros(h.n, dtype=np.bool_)
        if not points:
            return mask
        virtuals = sorted({c.virtual for c in self.pool(points)[0]})
        full, from_start = self._covered_branches(virtuals)
        for b, whole, first in zip(self.branch_copies(), full, from_start, strict=True):
            if not whole:
                continue
            m = h.after < b.start
            for s, e in b.outer:
                m &= ((s <= h.xs) & (h.xe <= e)) | ((s <= h.ys) & (h.ye <= e))
            reach = h.before >= b.end
            if first:
                reach |= h.before >= b.start
            mask |= m & reach
        return mask

    def _covered_branches(self, virtuals: list[int]) -> tuple[list[bool], list[bool]]:
        """Per branch copy (``branch_copies`` order): whether barriers at the virtual points
        cover every arm (directly or through a covered branch copy inside it), and whether
        they do so at every arm's first point."""
        copies = self.branch_copies()
        children = self._children()
        full = [False] * len(copies)
        first = [False] * len(copies)
        # Inner branch copies start no earlier and end no later: judged first from the back.
        for i in reversed(range(len(copies))):
            b = copies[i]
            whole = start = True
            for k, arm in enumerate(b.arms):
                kids = children[i][k]
                inside = virtuals[
                    bisect.bisect_left(virtuals, arm[0]) : bisect.bisect_left(virtuals, arm[1])
                ]
                direct = any(not b.nested(v, arm) for v in inside)
                whole &= direct or any(full[c] for c in kids)
                at = bool(inside) and inside[0] == arm[0] and not b.nested(arm[0], arm)
                start &= at or any(first[c] and copies[c].start == arm[0] for c in kids)
            full[i], first[i] = whole, whole and start
        return full, first

    def _children(self) -> list[list[list[int]]]:
        """Per branch copy, per arm: the branch copies directly inside that arm."""
        if self._kids is None:
            copies = self.branch_copies()
            kids: list[list[list[int]]] = [[[] for _ in b.arms] for b in copies]
            for j, c in enumerate(copies):
                best: tuple[int, int] | None = None  # (branch copy, arm): the innermost
                for i, b in enumerate(copies):
                    if i == j:
                        continue
                    for k, (s, e) in enumerate(b.arms):
                        inside = s <= c.start and c.end <= e
                        if inside and (best is None or e - s < _width(copies, best)):
                            best = (i, k)
                if best is not None:
                    kids[best[0]][best[1]].append(j)
            self._kids = kids
        return self._kids

    def every_arm_points(self, k: int, allowed: set[int]) -> list[int] | None:
        """Points from ``allowed`` that protect hazard ``k`` through ``by_every_arm``, one
        per arm of the latest branch copy that can (in each arm the one run fewest times,
        then the latest, or else the points of a branch inside the arm; the arm's first point
        when the later piece's first access lies inside the branch), or None."""
        h = self.hazards
        after, before = int(h.after[k]), int(h.before[k])
        xs, xe, ys, ye = int(h.xs[k]), int(h.xe[k]), int(h.ys[k]), int(h.ye[k])
        copies = self.pool(sorted(allowed))[0]
        branches = self.branch_copies()
        for i in reversed(range(len(branches))):
            b = branches[i]
            if not (after < b.start <= before):
                continue
            if not all((s <= xs and xe <= e) or (s <= ys and ye <= e) for s, e in b.outer):
                continue
            chosen = self._cover_points(i, copies, at_start=before < b.end)
            if chosen is not None and self.by_every_arm(chosen)[k]:
                return sorted(set(chosen))
        return None

    def _cover_points(self, i: int, copies: list[BarrierCopy], at_start: bool) -> list[int] | None:
        """Points of ``copies`` covering branch copy ``i``: per arm the direct copy run
        fewest times, then the latest (the arm's first point only, ``at_start``), else the
        points covering a branch copy inside the arm; None when an arm has neither."""
        b = self.branch_copies()[i]
        chosen: list[int] = []
        for k, (s, e) in enumerate(b.arms):
            last = s + 1 if at_start else e
            fits = [c for c in copies if s <= c.virtual < last and not b.nested(c.virtual, (s, e))]
            if fits:
                best = min(fits, key=lambda c: (self.executions(c.point), -c.virtual))
                chosen.append(best.point)
                continue
            inner = None
            for j in self._children()[i][k]:
                if at_start and self.branch_copies()[j].start != s:
                    continue
                inner = self._cover_points(j, copies, at_start)
                if inner is not None:
                    break
            if inner is None:
                return None
            chosen.extend(inner)
        return chosen

    def branch_copies(self) -> list[BranchCopy]:
        """Every copy of every branch in virtual time, by start."""
        if self._branches is None:
            loops = self._loops
            found: list[BranchCopy] = []
            for br in self.req.branches:
                depth = loops.depth_of_range(br.start, br.end)
                chain = loops.chain(br.start)[:depth]
                for cp in loops.copies(chain):
                    arms = tuple(
                        (loops.position(s, cp), loops.end_position(e, cp)) for s, e in br.arms
                    )
                    found.append(BranchCopy(arms, loops.skippable_spans(chain, cp)))
            for b in found:
                b.outer += tuple(
                    a
                    for o in found
                    if o is not b
                    for a in o.arms
                    if a[0] <= b.start and b.end <= a[1]
                )
                b.inner = tuple(
                    a
                    for o in found
                    if o is not b and b.start <= o.start and o.end <= b.end
                    for a in o.arms
                )
            self._branches = sorted(found, key=lambda b: (b.start, -b.end))
        return self._branches

    def barrier_peak(self, sizes: list[int], points: list[int]) -> tuple[int, int, list[int]]:
        """Most bytes held at one virtual point when barriers run at ``points`` only, the
        original point of its copy and the buffers held there: a lower bound on every plan
        under those barriers.

        A piece of a buffer without accesses holds its bytes from its start until the first
        barrier copy after its end (any copy, even inside an arm: it may stop early, never
        late) and never past the end of an arm copy around it (the other arms are other
        paths). A piece whose accesses are known holds them from its first access to its
        last. Pieces held at one virtual point then conflict pairwise on the path through
        it: live together, or a reuse with no barrier between the one's last access and the
        other's first."""
        if not self.pieces:
            return 0, 0, []
        barriers = sorted({c.virtual for c in self.pool(sorted(set(points)))[0]})
        horizon = max(p.end for p in self.pieces)
        arms = [a for b in self.branch_copies() for a in b.arms]
        held: list[tuple[int, int]] = []
        for p in self.pieces:
            if self.req.buffers[p.buffer].accesses:
                held.append((p.first, p.last + 1))
                continue
            k = bisect.bisect_right(barriers, p.last)
            end = barriers[k] if k < len(barriers) else horizon
            for s, e in arms:
                if s <= p.start and p.end <= e:
                    end = min(end, e)
            held.append((p.start, max(end, p.end)))
        return held_peak(self.pieces, held, sizes)

    def prime(self, points: list[int]) -> None:
        """Computes ``protected_by`` of the points at once: one row per barrier copy, in
        blocks of at most ``PRIME_CELLS`` cells."""
        h = self.hazards
        todo = sorted({p for p in points if p not in self._masks})
        if not todo:
            return
        per_block = max(1, PRIME_CELLS // max(h.n, 1))
        held: dict[tuple[tuple[int, int], ...], npt.NDArray[np.bool_]] = {}
        k = 0
        while k < len(todo):
            block: list[int] = []
            copies: list[BarrierCopy] = []
            while k < len(todo) and (not block or len(copies) < per_block):
                block.append(todo[k])
                copies.extend(self.copies_of(todo[k]))
                k += 1
            v = np.asarray([c.virtual for c in copies], dtype=np.int64)[:, None]
            rows = (h.after[None, :] < v) & (v <= h.before[None, :])
            by_arms: dict[tuple[tuple[int, int], ...], list[int]] = {}
            for i, c in enumerate(copies):
                if c.arms:
                    by_arms.setdefault(c.arms, []).append(i)
            for arms, idx in by_arms.items():
                cond = held.get(arms)
                if cond is None:
                    cond = np.ones(h.n, dtype=np.bool_)
                    for s, e in arms:
                        cond &= ((s <= h.xs) & (h.xe <= e)) | ((s <= h.ys) & (h.ye <= e))
                    held[arms] = cond
                rows[idx] &= cond
            at = 0
            for p in block:
                n = len(self.copies_of(p))
                self._masks[p] = rows[at] if n == 1 else np.logical_or.reduce(rows[at : at + n])
                at += n

    def covered(self, copies: list[BarrierCopy]) -> npt.NDArray[np.bool_]:
        """Per hazard: whether one of the barrier copies protects it."""
        h = self.hazards
        mask = np.zeros(h.n, dtype=np.bool_)
        plain = np.asarray(sorted(c.virtual for c in copies if not c.arms), dtype=np.int64)
        if plain.size:
            k = np.searchsorted(plain, h.after, side="right")
            inside = k < plain.size
            mask[inside] = plain[k[inside]] <= h.before[inside]
        # Copies inside arms, grouped by their arm copies: a hazard is covered by the group
        # when one copy lies in its window and each arm holds one of its pieces.
        groups: dict[tuple[tuple[int, int], ...], list[int]] = {}
        for c in copies:
            if c.arms:
                groups.setdefault(c.arms, []).append(c.virtual)
        for arms, virtuals in groups.items():
            at = np.asarray(sorted(virtuals), dtype=np.int64)
            k = np.searchsorted(at, h.after, side="right")
            m = k < at.size
            m[m] = at[k[m]] <= h.before[m]
            for s, e in arms:
                m &= ((s <= h.xs) & (h.xe <= e)) | ((s <= h.ys) & (h.ye <= e))
            mask |= m
        return mask

    def executions(self, point: int) -> int:
        """How many times a barrier at the point runs (trips of the loops around it)."""
        found = self._executions.get(point)
        if found is None:
            found = self._executions[point] = self.req.executions_at(point)
        return found


def _width(copies: list[BranchCopy], at: tuple[int, int]) -> int:
    s, e = copies[at[0]].arms[at[1]]
    return e - s


class _Loops:
    """Loop nesting and the virtual layout: each body repeated twice (once when it runs
    once)."""

    def __init__(self, req: PlanRequest) -> None:
        ordered = sorted(req.loops, key=lambda lp: (lp.start, -lp.end))
        loops = [(lp.start, lp.end) for lp in ordered]
        self.loops = loops
        # A loop that never repeats is unrolled once; any other loop twice.
        self.count = [2 if lp.repeats else 1 for lp in ordered]
        self.skippable = [lp.may_skip for lp in ordered]
        self._chains: dict[int, list[int]] = {}
        self._positions: dict[tuple[int, Copies], int] = {}
        self._depths: dict[tuple[int, int], int] = {}
        self._ends: dict[tuple[int, Copies], int] = {}
        self.parent: list[int] = []
        stack: list[int] = []
        for i, (s, _) in enumerate(loops):
            while stack and loops[stack[-1]][1] <= s:
                stack.pop()
            self.parent.append(stack[-1] if stack else -1)
            stack.append(i)
        self.children: dict[int, list[int]] = {}
        for i, p in enumerate(self.parent):
            self.children.setdefault(p, []).append(i)
        self.vlen: dict[int, int] = {}
        for i in reversed(range(len(loops))):  # children come after their parent
            s, e = loops[i]
            self.vlen[i] = (e - s) + sum(self._extra(c) for c in self.children.get(i, ()))
        # Per region (-1: the program), child loops by start with the extra virtual points
        # of the children before each.
        self.starts: dict[int, list[int]] = {}
        self.extra_before: dict[int, list[int]] = {}
        for region, kids in self.children.items():
            self.starts[region] = [loops[c][0] for c in kids]
            acc = [0]
            for c in kids:
                acc.append(acc[-1] + self._extra(c))
            self.extra_before[region] = acc

    def _extra(self, loop: int) -> int:
        s, e = self.loops[loop]
        return self.count[loop] * self.vlen[loop] - (e - s)

    def skippable_spans(self, chain: list[int], cp: Copies) -> tuple[tuple[int, int], ...]:
        """Virtual [start, end) of the loops of ``chain`` that may run zero times, in the
        copies ``cp`` of the loops outside each (all of its own copies)."""
        return tuple(
            (
                self.position(self.loops[loop][0], cp[:depth]),
                self.end_position(self.loops[loop][1], cp[:depth]),
            )
            for depth, loop in enumerate(chain[: len(cp)])
            if self.skippable[loop]
        )

    def chain(self, point: int) -> list[int]:
        """Loops around the point (start <= point < end), outermost first."""
        found = self._chains.get(point)
        if found is None:
            found = self._chains[point] = self._chain(point)
        return found

    def _chain(self, point: int) -> list[int]:
        out: list[int] = []
        region = -1
        while True:
            kids = self.children.get(region, [])
            k = bisect.bisect_right(self.starts.get(region, []), point) - 1
            if k < 0 or self.loops[kids[k]][1] <= point:
                return out
            region = kids[k]
            out.append(region)

    def depth_of_range(self, start: int, end: int) -> int:
        """Loops around the whole range [start, end)."""
        key = (start, end)
        found = self._depths.get(key)
        if found is None:
            found = self._depths[key] = self._depth_of_range(start, end)
        return found

    def _depth_of_range(self, start: int, end: int) -> int:
        a, b = self.chain(start), self.chain(end - 1)
        depth = 0
        while depth < min(len(a), len(b)) and a[depth] == b[depth]:
            depth += 1
        return depth

    def all_copies(self, point: int) -> list[Copies]:
        return self.copies(self.chain(point))

    def copies(self, chain: list[int]) -> list[Copies]:
        """Every choice of copies of the loops ``chain``, outermost first."""
        return list(itertools.product(*(range(self.count[k]) for k in chain)))

    def _offset_in(self, region: int, point: int) -> int:
        """Virtual offset of ``point`` from the region's start, the point lying in the region
        and not strictly inside a child loop (a child's start or end is fine)."""
        base = 0 if region < 0 else self.loops[region][0]
        starts = self.starts.get(region, [])
        k = bisect.bisect_right(starts, point) - 1
        kids = self.children.get(region, [])
        # Children ending at or before the point are passed whole.
        while k >= 0 and self.loops[kids[k]][1] > point:
            k -= 1
        return (point - base) + self.extra_before.get(region, [0])[k + 1]

    def position(self, point: int, cp: Copies) -> int:
        """Virtual point of ``point`` in the copies ``cp`` of the loops around it (a prefix:
        the start of the next deeper loop, for a range that covers it whole)."""
        key = (point, cp)
        found = self._positions.get(key)
        if found is None:
            found = self._positions[key] = self._position(point, cp)
        return found

    def _position(self, point: int, cp: Copies) -> int:
        chain = self.chain(point)
        v = 0
        region = -1
        for depth, loop in enumerate(chain):
            if depth >= len(cp):
                # Not in a given copy: the start of the loop (a range covering it whole).
                return v + self._offset_in(region, self.loops[loop][0])
            v += self._offset_in(region, self.loops[loop][0]) + cp[depth] * self.vlen[loop]
            region = loop
        return v + self._offset_in(region, point)

    def end_position(self, end: int, cp: Copies) -> int:
        """Virtual exclusive end of a range ending at ``end`` in the copies ``cp`` of the
        loops around the range: loops deeper than ``cp`` that the end falls in are covered
        whole (both copies)."""
        key = (end, cp)
        found = self._ends.get(key)
        if found is None:
            found = self._ends[key] = self._end_position(end, cp)
        return found

    def _end_position(self, end: int, cp: Copies) -> int:
        chain = self.chain(end - 1)
        v = 0
        region = -1
        for depth, loop in enumerate(chain):
            if depth >= len(cp):
                s = self.loops[loop][0]
                return v + self._offset_in(region, s) + self.count[loop] * self.vlen[loop]
            v += self._offset_in(region, self.loops[loop][0]) + cp[depth] * self.vlen[loop]
            region = loop
        return v + self._offset_in(region, end - 1) + 1


def build_program(req: PlanRequest) -> Program:
    """The pieces, hazards and live pairs of a request (``req.has_control_flow``); raises
    RequestError when the unrolled program passes ``MAX_PIECES``."""
    loops = _Loops(req)
    arms = ArmIndex(req.branches) if req.branches else None
    pieces: list[Piece] = []
    by_buffer: list[list[int]] = []
    total = 0
    for b in req.buffers:
        for s, e in b.lifetimes:
            total += 1 << loops.depth_of_range(s, e)
    if total > MAX_PIECES:
        raise RequestError.field(
            ("buffers",),
            f"the unrolled program (every loop body twice) has {total} buffer pieces; the "
            f"limit is {MAX_PIECES}",
            "program_too_large",
            len(req.buffers),
        )
    for i, b in enumerate(req.buffers):
        mine: list[int] = []
        for part, (s, e) in enumerate(b.lifetimes):
            depth = loops.depth_of_range(s, e)
            accesses = [a.at for a in b.accesses if s <= a.at < e]
            arm_chain = [] if arms is None else _arms_around(arms, req, s, e)
            for cp in loops.copies(loops.chain(s)[:depth]):
                vs, ve = loops.position(s, cp), loops.end_position(e, cp)
                if accesses:
                    seen = [
                        loops.position(p, cp + extra)
                        for p in set(accesses)
                        for extra in loops.copies(loops.chain(p)[depth:])
                    ]
                    first, last = min(seen), max(seen)
                else:
                    first, last = vs, ve - 1
                keys = {
                    (j, cp[: loops.depth_of_range(req.branches[j].start, req.branches[j].end)]): k
                    for j, k in arm_chain
                }
                mine.append(len(pieces))
                origin = s if len(loops.chain(s)) == depth else _loop_start(loops, s, depth)
                pieces.append(Piece(i, origin, vs, ve, first, last, keys, part))
        _check_own_pieces(req, i, [pieces[k] for k in mine])
        by_buffer.append(mine)
    hazards, live = _pairs(pieces)
    peak, at, live_at = held_peak(
        pieces, [(p.start, p.end) for p in pieces], [b.size for b in req.buffers]
    )
    return Program(
        req=req,
        pieces=pieces,
        by_buffer=by_buffer,
        hazards=hazards,
        live_pairs=live,
        peak=peak,
        peak_point=at,
        peak_buffers=live_at,
        _loops=loops,
        _arms=arms,
    )


def _check_own_pieces(req: PlanRequest, index: int, mine: list[Piece]) -> None:
    """Two ranges of one buffer live at once (each grown over a loop it enters or leaves)
    cannot share the buffer's one offset: a request error."""
    if len(mine) < 2:
        return
    spans = sorted((p.start, p.end) for p in mine)
    for (_, e1), (s2, _) in itertools.pairwise(spans):
        if s2 < e1:
            b = req.buffers[index]
            raise RequestError.field(
                ("buffers", index, "ranges"),
                f"two live ranges of buffer {b.id!r} ({b.lifetimes}) are live at once: a "
                "range that starts or ends inside a loop is live over the whole loop body, "
                "so it meets the other range there",
                "ranges_overlap",
                [list(r) for r in b.lifetimes],
            )


def _arms_around(arms: ArmIndex, req: PlanRequest, start: int, end: int) -> list[tuple[int, int]]:
    """Arms that hold the whole range [start, end)."""
    return [
        (j, k)
        for j, k in arms.around(start)
        if req.branches[j].arms[k][0] <= start and end <= req.branches[j].arms[k][1]
    ]


def _exclusive_arms(ax: dict[tuple[int, Copies], int], ay: dict[tuple[int, Copies], int]) -> bool:
    """Whether pieces in the arms ``ax`` and ``ay`` lie in different arms of one branch copy
    (never both run)."""
    if len(ay) < len(ax):
        ax, ay = ay, ax
    return any(ay.get(key, arm) != arm for key, arm in ax.items())


def _pairs(pieces: list[Piece]) -> tuple[Hazards, set[tuple[int, int]]]:
    """Every ordered pair of pieces in sequence (not in different arms of one branch copy),
    and the buffer pairs whose pieces intersect."""
    start = np.asarray([p.start for p in pieces], dtype=np.int64)
    end = np.asarray([p.end for p in pieces], dtype=np.int64)
    first = np.asarray([p.first for p in pieces], dtype=np.int64)
    last = np.asarray([p.last for p in pieces], dtype=np.int64)
    buf = np.asarray([p.buffer for p in pieces], dtype=np.int64)
    part = np.asarray([p.part for p in pieces], dtype=np.int64)
    seq = start[None, :] >= end[:, None]  # row before column
    x, y = np.nonzero(seq)
    # Pieces with the same arms are exclusive with the same pieces: judged once per pair of
    # distinct arm maps (few), then looked up per pair of pieces.
    kinds: dict[tuple[tuple[tuple[int, Copies], int], ...], int] = {}
    kind = np.asarray(
        [kinds.setdefault(tuple(sorted(p.arms.items())), len(kinds)) for p in pieces],
        dtype=np.int64,
    )
    if len(kinds) > 1:
        maps = [dict(key) for key in kinds]
        apart = np.asarray([[_exclusive_arms(u, v) for v in maps] for u in maps], dtype=np.bool_)
        keep = ~apart[kind[x], kind[y]]
        x, y = x[keep], y[keep]
    meet = (start[None, :] < end[:, None]) & (start[:, None] < end[None, :])
    u, v = np.nonzero(np.triu(meet, 1))
    a, b = buf[u], buf[v]
    other = a != b
    live = set(zip(np.minimum(a, b)[other].tolist(), np.maximum(a, b)[other].tolist(), strict=True))
    hazards = Hazards(
        earlier=x.astype(np.int64),
        later=y.astype(np.int64),
        a=buf[x],
        b=buf[y],
        pa=part[x],
        pb=part[y],
        after=last[x],
        before=first[y],
        xs=start[x],
        xe=end[x],
        ys=start[y],
        ye=end[y],
    )
    return hazards, live


def held_peak(
    pieces: Sequence[Piece], held: Sequence[tuple[int, int]], sizes: Sequence[int]
) -> tuple[int, int, list[int]]:
    """Most bytes held at one virtual point when piece ``k`` holds its buffer's ``sizes``
    bytes over ``held[k]`` (half-open): the bytes, the original point of that copy, and the
    buffers held there."""
    events = sorted(
        [(e, -sizes[p.buffer], k) for k, (p, (_, e)) in enumerate(zip(pieces, held, strict=True))]
        + [(s, sizes[p.buffer], k) for k, (p, (s, _)) in enumerate(zip(pieces, held, strict=True))]
    )
    best, at, live = 0, -1, 0
    for _, delta, k in events:
        live += delta
        if live > best:
            best, at = live, k
    if at < 0:
        return 0, 0, []
    v = held[at][0]
    buffers = sorted({p.buffer for p, (s, e) in zip(pieces, held, strict=True) if s <= v < e})
    return best, pieces[at].point, buffers


def _loop_start(loops: _Loops, point: int, depth: int) -> int:
    """Start of the loop at ``depth`` around the point (the loop a piece covers whole)."""
    return loops.loops[loops.chain(point)[depth]][0]


def straight_line(req: PlanRequest) -> PlanRequest:
    """The same kernel as version 1 can say it, for comparison: each buffer live on the hull
    of its ranges grown over every loop it touches (a straight line cannot repeat, so a
    buffer used in a loop body holds its bytes for the whole loop), arms one after the other
    (not exclusive), no loops, branches or ranges."""
    data = req.model_dump()
    buffers = []
    for b in req.buffers:
        s, e = b.start, b.end
        for lp in req.loops:
            if lp.start < e and s < lp.end:
                s, e = min(s, lp.start), max(e, lp.end)
        item = {k: v for k, v in b.model_dump().items() if k != "ranges"}
        buffers.append({**item, "start": s, "end": e})
    data.update(buffers=buffers, loops=[], branches=[])
    return PlanRequest.model_validate(data)
