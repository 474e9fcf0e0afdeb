"""Straight-line executions of a program with loops and exclusive branches, for the static check.

The semantics (docs/design.md, "Loops, several live ranges, exclusive branches") are taken
on straight-line programs: every loop body repeated ``min(2, most)`` times (two when the
loop has no upper bound on its trips; nested loops repeat inside each outer copy), and not at
all when the loop may run zero times (both executions are checked), and, for every branch
reached, one of its arms, chosen independently in every copy (the condition is uniform
across the block, not across iterations). Points of the arms not taken do not run; points
inside a branch's span but in no arm always run.

An execution is a list of ``Segment``: original points ``[lo, hi)`` run in order in one copy
of their enclosing loops, at unrolled points ``[at, at + hi - lo)``. A buffer range becomes
one ``UnrolledRange`` per copy of the loops wholly containing it; a range that starts outside a loop
and ends inside it (or the reverse) is live over every copy of that loop.

This module knows nothing of the request models: loops, branches and ranges come in as plain
integers, so it is an implementation of the semantics independent of the planner's own.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = [
    "COPIES",
    "MAX_EXECUTIONS",
    "MAX_SEGMENTS",
    "ControlFlow",
    "Execution",
    "Segment",
    "TooManyExecutionsError",
    "UnrolledRange",
    "executions",
]

COPIES = 2  # copies of a loop body; barriers repeat every iteration, so two are enough
MAX_EXECUTIONS = 4096  # straight-line executions (choices of arms) checked per plan
MAX_SEGMENTS = 1 << 20  # segments in one execution (copies of nested loop bodies)

Copy = tuple[tuple[int, int], ...]  # (loop index, copy) of each enclosing loop, outermost first


class TooManyExecutionsError(ValueError):
    """The program unrolls to more executions or segments than the limits allow."""


@dataclass(frozen=True)
class ControlFlow:
    """Loops ``(start, end, fewest trips, most trips or None)`` and branches (each a list of
    arms ``(start, end)``)."""

    loops: tuple[tuple[int, int, int, int | None], ...] = ()
    branches: tuple[tuple[tuple[int, int], ...], ...] = ()
    # (start, end) -> ``loops_around`` of the range, filled on first use
    around: dict[tuple[int, int], tuple[frozenset[int], tuple[int, ...]]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def loops_around(self, start: int, end: int) -> tuple[frozenset[int], tuple[int, ...]]:
        """The loops wholly containing the range ``[start, end)`` (one piece per copy of
        them), and the loops it enters or leaves, in order (live over all their copies; a
        loop that never repeats: none)."""
        found = self.around.get((start, end))
        if found is None:
            inside = frozenset(
                i for i, (s, e, _, _) in enumerate(self.loops) if s <= start and end <= e
            )
            crossed = tuple(
                i
                for i, (s, e, _, most) in enumerate(self.loops)
                if s < end
                and start < e
                and not (s <= start and end <= e)
                and not (start <= s and e <= end)
                and most != 1
            )
            found = self.around[start, end] = (inside, crossed)
        return found

    @property
    def straight(self) -> bool:
        """No loop and no branch: the one execution is the program itself."""
        return not self.loops and not self.branches


@dataclass(frozen=True)
class Segment:
    """Original points ``[lo, hi)`` in one copy of their loops, run at unrolled ``at``."""

    lo: int
    hi: int
    at: int
    copy: Copy


@dataclass(frozen=True)
class UnrolledRange:
    """One range of a buffer in one copy of the loops wholly containing it, unrolled."""

    start: int  # unrolled point
    end: int  # unrolled point, half-open
    copy: Copy  # the copies of the loops wholly containing the range
    stretched: tuple[int, ...] = ()  # loops the range enters or leaves: live over all of them


@dataclass
class _Node:
    kind: str  # "loop", "branch" or "hole" (an arm not taken)
    index: int
    start: int
    end: int
    fewest: int = 0  # loop: fewest trips (0: it may be skipped)
    most: int | None = None  # loop: most trips (None: unbounded)
    arms: list[tuple[int, int]] = field(default_factory=list)
    children: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class Execution:
    """One straight-line execution: its segments in order, and the lookups on them."""

    flow: ControlFlow
    segments: tuple[Segment, ...]
    starts: tuple[int, ...] = field(init=False, repr=False, compare=False)  # unrolled, sorted
    # (lo, hi, at) of each segment, for the lookups that run per buffer range
    spans: tuple[tuple[int, int, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "starts", tuple(s.at for s in self.segments))
        object.__setattr__(self, "spans", tuple((s.lo, s.hi, s.at) for s in self.segments))

    @property
    def length(self) -> int:
        """Unrolled points in all."""
        last = self.segments[-1] if self.segments else None
        return 0 if last is None else last.at + last.hi - last.lo

    def origin(self, unrolled: int) -> int:
        """The original point of an unrolled one."""
        k = bisect.bisect_right(self.starts, unrolled) - 1
        s = self.segments[max(k, 0)]
        return s.lo + unrolled - s.at

    def copy_at(self, unrolled: int) -> Copy:
        """The loop copies an unrolled point runs in."""
        k = bisect.bisect_right(self.starts, unrolled) - 1
        return self.segments[max(k, 0)].copy

    def occurrences(self, points: Sequence[int]) -> list[int]:
        """Every unrolled occurrence of the original ``points``, sorted."""
        ordered = sorted(set(points))
        out: list[int] = []
        for s in self.segments:
            k = bisect.bisect_left(ordered, s.lo)
            while k < len(ordered) and ordered[k] < s.hi:
                out.append(s.at + ordered[k] - s.lo)
                k += 1
        return sorted(out)

    def pieces(self, start: int, end: int) -> list[UnrolledRange]:
        """The pieces of the range ``[start, end)`` in this execution (none when it lies in an
        arm not taken)."""
        inside, crossed = self.flow.loops_around(start, end)
        if not inside and not crossed:
            # Outside every loop: one piece, the hull of the segments it meets.
            first = last = -1
            for lo, hi, at in self.spans:
                if lo < end and start < hi:
                    if first < 0:
                        first = at + (start - lo if start > lo else 0)
                    last = at + ((end if end < hi else hi) - lo)
            return [] if first < 0 else [UnrolledRange(first, last, (), ())]
        groups: dict[Copy, list[int]] = {}
        for s in self.segments:
            if s.lo < end and start < s.hi:
                key = tuple(c for c in s.copy if c[0] in inside) if inside else ()
                lo = s.at + (start - s.lo if start > s.lo else 0)
                hi = s.at + ((end if end < s.hi else s.hi) - s.lo)
                span = groups.get(key)
                if span is None:
                    groups[key] = [lo, hi]
                else:
                    span[0] = lo if lo < span[0] else span[0]
                    span[1] = hi if hi > span[1] else span[1]
        if crossed:
            for s in self.segments:
                if any(c[0] in crossed for c in s.copy):
                    key = tuple(c for c in s.copy if c[0] in inside) if inside else ()
                    if key in groups:
                        span = groups[key]
                        span[0] = min(span[0], s.at)
                        span[1] = max(span[1], s.at + s.hi - s.lo)
        return [
            UnrolledRange(lo, hi, key, tuple(crossed)) for key, (lo, hi) in sorted(groups.items())
        ]


def executions(flow: ControlFlow, horizon: int) -> Iterator[Execution]:
    """Every straight-line execution of the points ``[0, horizon)``.

    Raises TooManyExecutionsError, naming the limit, before producing any when the program has
    more than ``MAX_EXECUTIONS`` executions or one of more than ``MAX_SEGMENTS`` segments.
    """
    roots = _tree(flow)
    count, size = _count(roots, 0, horizon)
    if count > MAX_EXECUTIONS:
        raise TooManyExecutionsError(
            f"the loops and branches unroll to {count} executions, over the limit of "
            f"{MAX_EXECUTIONS} the static check enumerates"
        )
    if size > MAX_SEGMENTS:
        raise TooManyExecutionsError(
            f"the loops unroll to {size} segments per execution, over the limit of "
            f"{MAX_SEGMENTS} the static check enumerates"
        )
    for parts in _span(roots, 0, horizon, ()):
        at = 0
        segments: list[Segment] = []
        for lo, hi, copy in parts:
            segments.append(Segment(lo, hi, at, copy))
            at += hi - lo
        yield Execution(flow, tuple(segments))


def _tree(flow: ControlFlow) -> list[_Node]:
    """Loops and branches as a nesting tree (a loop and a branch of one span: the loop
    outside); the roots, sorted by start."""
    nodes = [
        _Node("loop", i, s, e, fewest, most) for i, (s, e, fewest, most) in enumerate(flow.loops)
    ]
    nodes += [
        _Node("branch", j, arms[0][0], arms[-1][1], arms=list(arms))
        for j, arms in enumerate(flow.branches)
        if arms
    ]
    nodes.sort(key=lambda n: (n.start, -n.end, n.kind != "loop", n.index))
    roots: list[_Node] = []
    stack: list[_Node] = []
    for n in nodes:
        while stack and not (stack[-1].start <= n.start and n.end <= stack[-1].end):
            stack.pop()
        (stack[-1].children if stack else roots).append(n)
        stack.append(n)
    return roots


_Part = tuple[int, int, Copy]


def _span(children: list[_Node], lo: int, hi: int, copy: Copy) -> list[list[_Part]]:
    """The alternatives of ``[lo, hi)`` holding ``children`` (sorted, disjoint)."""
    alternatives: list[list[_Part]] = [[]]
    at = lo
    for child in children:
        if at < child.start:
            alternatives = [[*a, (at, child.start, copy)] for a in alternatives]
        inner = _node(child, copy)
        alternatives = [[*a, *b] for a in alternatives for b in inner]
        at = max(at, child.end)
    if at < hi:
        alternatives = [[*a, (at, hi, copy)] for a in alternatives]
    return alternatives


def _node(n: _Node, copy: Copy) -> list[list[_Part]]:
    if n.kind == "hole":
        return [[]]
    if n.kind == "loop":
        alternatives: list[list[_Part]] = [[]]
        for k in range(_copies(n)):
            body = _span(n.children, n.start, n.end, (*copy, (n.index, k)))
            alternatives = [[*a, *b] for a in alternatives for b in body]
        return [[], *alternatives] if n.fewest == 0 else alternatives
    out: list[list[_Part]] = []
    for chosen in range(len(n.arms)):
        out += _span(_arm_children(n, chosen), n.start, n.end, copy)
    return out


def _arm_children(n: _Node, chosen: int) -> list[_Node]:
    """The branch's span with arm ``chosen`` taken: its children and those between arms, and
    a hole for every other arm."""
    kept = [
        c
        for c in n.children
        if not any(s <= c.start and c.end <= e for k, (s, e) in enumerate(n.arms) if k != chosen)
    ]
    holes = [_Node("hole", k, s, e) for k, (s, e) in enumerate(n.arms) if k != chosen]
    return sorted(kept + holes, key=lambda c: (c.start, c.end))


def _count(children: list[_Node], lo: int, hi: int) -> tuple[int, int]:
    """(executions, most segments in one) of ``[lo, hi)`` holding ``children``."""
    count, size, at = 1, 0, lo
    for child in children:
        if at < child.start:
            size += 1
        c, s = _count_node(child)
        count, size, at = count * c, size + s, max(at, child.end)
        count = min(count, MAX_EXECUTIONS + 1)
    if at < hi:
        size += 1
    return count, min(size, MAX_SEGMENTS + 1)


def _count_node(n: _Node) -> tuple[int, int]:
    if n.kind == "hole":
        return 1, 0
    if n.kind == "loop":
        copies = _copies(n)
        c, s = _count(n.children, n.start, n.end)
        skipped = 1 if n.fewest == 0 else 0
        return min(c**copies + skipped, MAX_EXECUTIONS + 1), min(s * copies, MAX_SEGMENTS + 1)
    count, size = 0, 0
    for chosen in range(len(n.arms)):
        c, s = _count(_arm_children(n, chosen), n.start, n.end)
        count, size = min(count + c, MAX_EXECUTIONS + 1), max(size, s)
    return count, size


def _copies(n: _Node) -> int:
    """Copies of a loop body when it runs: two, or one for a loop that never repeats."""
    return COPIES if n.most is None else min(COPIES, n.most)
