"""Loops and branches in a request with partitions (docs/design.md, Warp-specialised
partitions, Loops and branches): such a request is checked and planned on every path, so the
paths (every arm of every branch, every loop run each trip count it admits of 0 to 3) and
their points are counted here and capped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from planner.core.models._base import Errors

if TYPE_CHECKING:
    from planner.core.models.control import Branch, Loop

__all__ = [
    "MAX_PARTITION_PATHS",
    "MAX_PATH_POINTS",
    "check_partition_control",
    "count_paths",
    "path_trips",
]

MAX_PARTITION_PATHS = 64  # straight-line programs a partitioned request unrolls to
MAX_PATH_POINTS = 4096  # points of one such program
PATH_TRIPS = (0, 1, 2, 3)  # trip counts a path runs a loop; 3 stands for any more

_Span = tuple[int, int, int, int]  # (start, end, 0 loop | 1 branch, index)


def path_trips(loop: Loop) -> list[int]:
    """The trip counts the paths run ``loop``: those of 0 to 3 it admits, else 3 alone (a
    loop that runs more than 3 times at the least)."""
    low = loop.trips if loop.trips is not None else (loop.min_trips or 0)
    high = loop.trips if loop.trips is not None else loop.max_trips
    fit = [t for t in PATH_TRIPS if low <= t and (high is None or t <= high)]
    return fit or [PATH_TRIPS[-1]]


def check_partition_control(
    loops: Sequence[Loop],
    branches: Sequence[Branch],
    cluster: bool,
    errors: Errors,
) -> None:
    """A partitioned request's loops and branches: no cluster with them, and at most
    ``MAX_PARTITION_PATHS`` paths of at most ``MAX_PATH_POINTS`` points each (counted only on
    a well-nested request: the nesting errors come first)."""
    if cluster:
        errors.add(
            ("loops" if loops else "branches",),
            "partitions_control_flow",
            "a request with partitions and a cluster is planned on its straight-line point "
            "axis: give the loop's iterations as points",
            len(loops) + len(branches),
        )
        return
    if errors.items:
        return
    paths, points = count_paths(loops, branches)
    if paths > MAX_PARTITION_PATHS:
        errors.add(
            ("loops" if loops else "branches",),
            "too_many_paths",
            f"the loops (each run 0 to 3 times as it admits) and branches give more than "
            f"{MAX_PARTITION_PATHS} paths; a request with partitions is checked on each",
            paths,
        )
    elif points > MAX_PATH_POINTS:
        errors.add(
            ("loops",),
            "too_many_paths",
            f"a path runs {points} points; a request with partitions is checked on paths of "
            f"at most {MAX_PATH_POINTS}",
            points,
        )


def count_paths(loops: Sequence[Loop], branches: Sequence[Branch]) -> tuple[int, int]:
    """(paths, points of the longest) of well-nested loops and branches, the paths counted
    up to ``MAX_PARTITION_PATHS + 1``."""
    spans: list[_Span] = [(lp.start, lp.end, 0, k) for k, lp in enumerate(loops)]
    spans += [(br.start, br.end, 1, k) for k, br in enumerate(branches)]
    if not spans:
        return 1, 0
    return _count(spans, loops, branches, 0, max(s[1] for s in spans), None)


def _count(
    spans: list[_Span],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
    lo: int,
    hi: int,
    me: _Span | None,
) -> tuple[int, int]:
    """(paths, points of the longest) through ``[lo, hi)``, ``me`` the span being opened."""
    mine = [s for s in spans if lo <= s[0] and s[1] <= hi and s != me]
    top = [
        s
        for s in mine
        if not any(
            o != s
            and o[0] <= s[0]
            and s[1] <= o[1]
            and ((o[0], o[1]) != (s[0], s[1]) or o[2] < s[2])
            for o in mine
        )
    ]
    paths, points = 1, hi - lo
    for s in top:
        start, end, kind, k = s
        points -= end - start
        if kind == 0:
            body, longest = _count(spans, loops, branches, start, end, s)
            trips = path_trips(loops[k])
            paths *= sum(body**t for t in trips)
            points += max(trips) * longest
        else:
            arms = [_count(spans, loops, branches, a0, a1, s) for a0, a1 in branches[k].arms]
            paths *= sum(p for p, _ in arms)
            points += max(n for _, n in arms)
        paths = min(paths, MAX_PARTITION_PATHS + 1)
    return paths, points
