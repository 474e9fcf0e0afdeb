"""Control flow of a request (wire format 1.1): loops that repeat point ranges and branches
whose arms exclude each other, and every check that keeps them well nested.

Loops nest or are disjoint. A branch's arms are contiguous, non-empty point ranges; a branch
lies wholly inside one arm of another branch or is disjoint from it; a loop contains a whole
branch, lies inside one of its arms, or is disjoint from it. A buffer range never straddles an
arm boundary. The unrolled program (every loop body twice, one straight line per choice of
arms) is bounded by ``MAX_LOOP_DEPTH`` and ``MAX_PATHS``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.models._base import Errors, Point, Span, absent

if TYPE_CHECKING:
    from planner.core.models.request import Buffer

__all__ = [
    "MAX_ARMS",
    "MAX_BRANCHES",
    "MAX_LOOPS",
    "MAX_LOOP_DEPTH",
    "MAX_PATHS",
    "MAX_TRIPS",
    "UNKNOWN_TRIPS",
    "Branch",
    "Loop",
    "check_control",
    "check_ranges_vs_arms",
    "check_ranges_vs_loops",
    "executions_at",
    "stretched",
]

UNKNOWN_TRIPS = 1000  # iterations charged for a loop with no upper bound on its trips
MAX_TRIPS = 1 << 30
MAX_LOOPS = 256
MAX_BRANCHES = 256
MAX_ARMS = 64  # per branch
MAX_LOOP_DEPTH = 8  # nested loops: the unrolled program repeats the innermost body 2**depth times
MAX_PATHS = 4096  # straight-line executions of the unrolled program (choices of arms)


class Loop(BaseModel):
    """Points ``[start, end)`` that repeat: ``trips`` times exactly, or between ``min_trips``
    and ``max_trips`` times. A count not known to be at least one may be zero: then the body
    does not run at all, and a barrier inside it separates nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: Point = Field(description="First point of the loop body (inclusive).")
    end: Point = Field(description="End of the loop body, exclusive; end > start.")
    trips: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TRIPS,
        description=(
            "Iterations, exactly (at least 1). null: not known exactly; min_trips and max_trips"
            " say\nwhat is known, and without them the loop may run any number of times, zero"
            " included."
        ),
    )
    min_trips: int | None = Field(
        default=None,
        exclude_if=absent,
        ge=0,
        le=MAX_TRIPS,
        description=(
            "Fewest iterations when trips is not given (0 or more). Default 0: the loop may be"
            " skipped,\nso a barrier inside it protects no reuse across it."
        ),
    )
    max_trips: int | None = Field(
        default=None,
        exclude_if=absent,
        ge=1,
        le=MAX_TRIPS,
        description=(
            "Most iterations when trips is not given (at least 1). Default unbounded; barrier"
            " executions\ncount max_trips, else max(min_trips, 1000)."
        ),
    )

    @model_validator(mode="after")
    def _non_empty(self) -> Loop:
        errors = Errors("Loop")
        if self.end <= self.start:
            errors.add(
                ("end",),
                "empty_loop",
                f"loop end ({self.end}) must be greater than its start ({self.start})",
                self.end,
            )
        if self.trips is not None:
            for name in ("min_trips", "max_trips"):
                value = getattr(self, name)
                if value is not None:
                    errors.add(
                        (name,),
                        "trips_and_bounds",
                        f"give trips ({self.trips}) or min_trips/max_trips, not both",
                        value,
                    )
        elif (
            self.min_trips is not None
            and self.max_trips is not None
            and self.min_trips > self.max_trips
        ):
            errors.add(
                ("max_trips",),
                "trips_bounds_reversed",
                f"max_trips ({self.max_trips}) is less than min_trips ({self.min_trips})",
                self.max_trips,
            )
        errors.raise_if_any()
        return self

    @property
    def fewest(self) -> int:
        """Fewest iterations the loop may run: 0 when that is not known to be more."""
        if self.trips is not None:
            return self.trips
        return self.min_trips or 0

    @property
    def most(self) -> int | None:
        """Most iterations the loop may run; None when unbounded."""
        return self.trips if self.trips is not None else self.max_trips

    @property
    def may_skip(self) -> bool:
        """Whether the body may not run at all (zero trips)."""
        return self.fewest == 0

    @property
    def repeats(self) -> bool:
        """Whether the body may run more than once (a back edge is taken)."""
        most = self.most
        return most is None or most > 1

    @property
    def count_text(self) -> str:
        """The trip count as known, for labels: ``8``, ``1+``, ``0-16``, ``0+``."""
        if self.trips is not None:
            return str(self.trips)
        return f"{self.fewest}+" if self.max_trips is None else f"{self.fewest}-{self.max_trips}"

    @property
    def multiplier(self) -> int:
        """Executions of a point in the body per execution of the loop, for the barrier
        count: the exact trips, else ``max_trips``, else ``max(min_trips, UNKNOWN_TRIPS)``."""
        most = self.most
        return most if most is not None else max(self.fewest, UNKNOWN_TRIPS)


class Branch(BaseModel):
    """Point ranges of which exactly one runs (a block-uniform condition)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arms: list[Span] = Field(
        min_length=1,
        max_length=MAX_ARMS,
        description=(
            "The arms [[start, end], ...]: half-open, non-empty, sorted and contiguous (each arm"
            " starts\nwhere the previous one ends). An if without else gives the else arm as a"
            " range of points\nwithout accesses."
        ),
    )

    @model_validator(mode="after")
    def _contiguous(self) -> Branch:
        errors = Errors("Branch")
        for k, (s, e) in enumerate(self.arms):
            if e <= s:
                errors.add(
                    ("arms", k),
                    "empty_arm",
                    f"arm [{s}, {e}) is empty: its end must be greater than its start",
                    [s, e],
                )
            if k and s != self.arms[k - 1][1]:
                prev = self.arms[k - 1]
                kind = "arms_overlap" if s < prev[1] else "arms_not_contiguous"
                how = "overlaps" if s < prev[1] else "does not start where"
                errors.add(
                    ("arms", k),
                    kind,
                    f"arm [{s}, {e}) {how} the previous arm [{prev[0]}, {prev[1]}) "
                    + ("" if s < prev[1] else "ends; arms must be sorted and contiguous"),
                    [s, e],
                )
        errors.raise_if_any()
        return self

    @property
    def start(self) -> int:
        """First point of the first arm."""
        return self.arms[0][0]

    @property
    def end(self) -> int:
        """End of the last arm (exclusive)."""
        return self.arms[-1][1]


def _show(lo: int, hi: int) -> str:
    return f"[{lo}, {hi})"


def _inside_arm(lo: int, hi: int, branch: Branch) -> bool:
    return any(s <= lo and hi <= e for s, e in branch.arms)


def _partial(a0: int, a1: int, b0: int, b1: int) -> bool:
    """Whether [a0, a1) and [b0, b1) intersect with neither containing the other."""
    return a0 < b1 and b0 < a1 and not (a0 <= b0 and b1 <= a1) and not (b0 <= a0 and a1 <= b1)


def executions_at(loops: Sequence[Loop], point: int) -> int:
    """How many times the point runs: the product of the trips of every loop around it."""
    count = 1
    for loop in loops:
        if loop.start <= point < loop.end:
            count *= loop.multiplier
    return count


def check_control(loops: Sequence[Loop], branches: Sequence[Branch], errors: Errors) -> bool:
    """Adds an error for every badly nested loop or branch; True when there is none."""
    before = len(errors.items)
    if len(loops) > MAX_LOOPS:
        errors.add(("loops",), "too_many_loops", f"{len(loops)} loops exceed {MAX_LOOPS}", None)
    if len(branches) > MAX_BRANCHES:
        errors.add(
            ("branches",),
            "too_many_branches",
            f"{len(branches)} branches exceed {MAX_BRANCHES}",
            None,
        )
    if len(errors.items) > before:
        return False
    _check_loops(loops, errors)
    _check_branches(branches, errors)
    _check_loops_vs_branches(loops, branches, errors)
    if len(errors.items) > before:
        return False
    _check_size(loops, branches, errors)
    return len(errors.items) == before


def _check_loops(loops: Sequence[Loop], errors: Errors) -> None:
    for j, b in enumerate(loops):
        depth = 1
        for i, a in enumerate(loops):
            if i == j:
                continue
            if (a.start, a.end) == (b.start, b.end) and i < j:
                errors.add(
                    ("loops", j),
                    "duplicate_loop",
                    f"loops.{j} {_show(b.start, b.end)} covers the same points as loops.{i}; "
                    "give nested loops over the same points as one loop (trips multiply)",
                    [b.start, b.end],
                )
            elif _partial(a.start, a.end, b.start, b.end) and i < j:
                errors.add(
                    ("loops", j),
                    "loops_overlap",
                    f"loops.{i} {_show(a.start, a.end)} and loops.{j} {_show(b.start, b.end)} "
                    "partially overlap; loops must nest or be disjoint",
                    [b.start, b.end],
                )
            elif a.start <= b.start and b.end <= a.end:
                depth += 1
        if depth > MAX_LOOP_DEPTH:
            errors.add(
                ("loops", j),
                "program_too_large",
                f"loops.{j} {_show(b.start, b.end)} is nested {depth} deep; the limit is "
                f"{MAX_LOOP_DEPTH} nested loops",
                [b.start, b.end],
            )


def _check_branches(branches: Sequence[Branch], errors: Errors) -> None:
    for j, b in enumerate(branches):
        for i in range(j):
            a = branches[i]
            if not (a.start < b.end and b.start < a.end):
                continue
            if (a.start, a.end) != (b.start, b.end) and (
                _inside_arm(b.start, b.end, a) or _inside_arm(a.start, a.end, b)
            ):
                continue
            errors.add(
                ("branches", j),
                "branches_overlap",
                f"branches.{j} {_show(b.start, b.end)} overlaps branches.{i} "
                f"{_show(a.start, a.end)} without lying inside one of its arms",
                [b.start, b.end],
            )


def _check_loops_vs_branches(
    loops: Sequence[Loop], branches: Sequence[Branch], errors: Errors
) -> None:
    for i, loop in enumerate(loops):
        for j, br in enumerate(branches):
            if not (loop.start < br.end and br.start < loop.end):
                continue
            if loop.start <= br.start and br.end <= loop.end:
                continue
            if _inside_arm(loop.start, loop.end, br):
                continue
            errors.add(
                ("loops", i),
                "loop_crosses_arm",
                f"loops.{i} {_show(loop.start, loop.end)} partially overlaps branches.{j} "
                f"(arms {br.arms}); a loop must contain the whole branch, lie inside one arm, "
                "or be disjoint from it",
                [loop.start, loop.end],
            )


def _check_size(loops: Sequence[Loop], branches: Sequence[Branch], errors: Errors) -> None:
    """The number of straight-line executions of the unrolled program stays bounded."""
    paths = count_paths(loops, branches)
    if paths > MAX_PATHS:
        errors.add(
            ("branches",),
            "program_too_large",
            f"the program unrolled (every loop body twice) has more than {MAX_PATHS} "
            "executions (choices of arms); the limit is "
            f"{MAX_PATHS}",
            len(branches),
        )


def count_paths(loops: Sequence[Loop], branches: Sequence[Branch]) -> int:
    """Straight-line executions of the program with every loop body repeated twice, capped at
    ``MAX_PATHS + 1``: a loop squares the count of its body, a branch sums its arms'."""
    # Regions: 0 = the whole program, then loop bodies, then arms. Each item (loop or branch)
    # lies in the smallest region around it; on equal ranges a loop lies inside an arm and a
    # branch inside a loop.
    regions: list[tuple[int, int, int]] = [(-1, 1 << 62, 1)]  # (start, end, tie rank)
    for loop in loops:
        regions.append((loop.start, loop.end, 0))
    arm_region: list[list[int]] = []
    for br in branches:
        ids = []
        for s, e in br.arms:
            ids.append(len(regions))
            regions.append((s, e, 1))
        arm_region.append(ids)
    cap = MAX_PATHS + 1

    def region_of(lo: int, hi: int, exclude: set[int], loop_item: bool) -> int:
        best, key = 0, (1 << 63, 0)
        for r, (s, e, rank) in enumerate(regions):
            if r == 0 or r in exclude or not (s <= lo and hi <= e):
                continue
            # An equal arm holds a loop; an equal loop holds a branch.
            k = (e - s, (1 - rank) if loop_item else rank)
            if k < key:
                best, key = r, k
        return best

    children: dict[int, list[tuple[str, int]]] = {}
    for i, loop in enumerate(loops):
        r = region_of(loop.start, loop.end, {i + 1}, True)
        children.setdefault(r, []).append(("loop", i))
    for j, br in enumerate(branches):
        r = region_of(br.start, br.end, set(arm_region[j]), False)
        children.setdefault(r, []).append(("branch", j))

    def paths(region: int, depth: int) -> int:
        if depth > 2 * (MAX_LOOPS + MAX_BRANCHES):
            return cap
        total = 1
        for kind, idx in children.get(region, ()):
            if kind == "loop":
                body = paths(idx + 1, depth + 1)
                total = min(cap, total * body * body)
            else:
                total = min(
                    cap, total * min(cap, sum(paths(a, depth + 1) for a in arm_region[idx]))
                )
        return total

    return paths(0, 0)


def check_ranges_vs_arms(
    buffers: Sequence[Buffer], branches: Sequence[Branch], errors: Errors
) -> None:
    """Every buffer range lies inside one arm, contains the whole branch, or misses it."""
    if not branches:
        return
    arms = ArmIndex(branches)
    for i, b in enumerate(buffers):
        for k, (s, e) in enumerate(b.lifetimes):
            arm = arms.crossed(s, e)
            if arm is None:
                continue
            loc = ("buffers", i, "ranges", k) if b.ranges is not None else ("buffers", i, "end")
            j, m = arm
            arm_s, arm_e = branches[j].arms[m]
            errors.add(
                loc,
                "range_crosses_arm",
                f"live range {_show(s, e)} of buffer {b.id!r} straddles the boundary of arm "
                f"{_show(arm_s, arm_e)} of branches.{j}; a range lies inside one arm, "
                "contains the whole branch, or misses it",
                [s, e],
            )


def stretched(start: int, end: int, loops: Sequence[Loop]) -> tuple[int, int, list[int]]:
    """The range ``[start, end)`` as live in the unrolled program: grown over every loop it
    enters or leaves (live over the whole body on every iteration), and those loops."""
    lo, hi = start, end
    over: list[int] = []
    grown = True
    while grown:
        grown = False
        for j, lp in enumerate(loops):
            if j not in over and _partial(lo, hi, lp.start, lp.end):
                over.append(j)
                lo, hi = min(lo, lp.start), max(hi, lp.end)
                grown = True
    return lo, hi, sorted(over)


def check_ranges_vs_loops(buffers: Sequence[Buffer], loops: Sequence[Loop], errors: Errors) -> None:
    """No two ranges of one buffer are live at once once each is grown over the loops it
    enters or leaves (they share the buffer's one offset)."""
    if not loops:
        return
    for i, b in enumerate(buffers):
        if b.ranges is None or len(b.ranges) < 2:
            continue
        grown = [stretched(s, e, loops) for s, e in b.lifetimes]
        clash = next(
            (
                (k, m)
                for m in range(len(grown))
                for k in range(m)
                if grown[k][0] < grown[m][1] and grown[m][0] < grown[k][1]
            ),
            None,
        )
        if clash is None:
            continue
        k, m = clash
        lo, hi = max(grown[k][0], grown[m][0]), min(grown[k][1], grown[m][1])
        loop = min(
            j for j in {*grown[k][2], *grown[m][2]} if loops[j].start < hi and lo < loops[j].end
        )
        lp = loops[loop]
        (s1, e1), (s2, e2) = b.lifetimes[k], b.lifetimes[m]
        errors.add(
            ("buffers", i, "ranges"),
            "ranges_overlap",
            f"ranges {_show(s1, e1)} and {_show(s2, e2)} of buffer {b.id!r} are live at once: "
            f"a range that enters or leaves loops.{loop} {_show(lp.start, lp.end)} is live over "
            "the whole loop body on every iteration; keep the ranges apart, or merge them",
            [list(r) for r in b.lifetimes],
        )


class ArmIndex:
    """The arms of well-nested branches, for finding the arms around a point."""

    def __init__(self, branches: Sequence[Branch]) -> None:
        self.branches = branches
        arms = sorted(
            (s, -e, -(br.end - br.start), j, k)
            for j, br in enumerate(branches)
            for k, (s, e) in enumerate(br.arms)
        )
        self.points: list[int] = sorted({p for s, ne, _, _, _ in arms for p in (s, -ne)})
        self.innermost: list[tuple[int, int] | None] = []  # per segment from each point
        self.parent: dict[tuple[int, int], tuple[int, int] | None] = {}
        # Arms nest (checked), so a stack sweep finds the innermost arm of every segment.
        stack: list[tuple[int, tuple[int, int]]] = []  # (end, (branch, arm))
        nxt = 0
        for p in self.points:
            while stack and stack[-1][0] <= p:
                stack.pop()
            while nxt < len(arms) and arms[nxt][0] == p:
                _, ne, _, j, k = arms[nxt]
                self.parent[(j, k)] = stack[-1][1] if stack else None
                stack.append((-ne, (j, k)))
                nxt += 1
            self.innermost.append(stack[-1][1] if stack else None)

    def around(self, point: int) -> list[tuple[int, int]]:
        """The arms around the point, innermost first, as (branch, arm)."""
        k = bisect.bisect_right(self.points, point) - 1
        arm = self.innermost[k] if k >= 0 else None
        chain = []
        while arm is not None:
            chain.append(arm)
            arm = self.parent[arm]
        return chain

    def crossed(self, start: int, end: int) -> tuple[int, int] | None:
        """An arm whose boundary the range [start, end) straddles, or None: the range must lie
        inside each arm around its ends or contain that arm's whole branch."""
        for point in (start, end - 1):
            for j, k in self.around(point):
                arm_s, arm_e = self.branches[j].arms[k]
                if start >= arm_s and end <= arm_e:
                    break  # inside this arm, so inside every arm around it
                br = self.branches[j]
                if not (start <= br.start and br.end <= end):
                    return (j, k)
        return None
