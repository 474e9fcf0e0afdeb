"""Which barriers a placement relies on, and the fewest new ones it needs.

A reuse is a pair A, B with A ending before B starts and sharing a byte. It is safe when a
barrier stands at some p with ``last_access(A) < p <= first_access(B)`` (DESIGN section 2;
without access patterns ``last_access = end - 1`` and ``first_access = start``), or when it
is a thread-local alias (``planner.aliasing``), which the caller drops from the list.
Choosing the fewest points that hit every such interval is interval stabbing: sort by right
end, take the rightmost allowed point, which is exact.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sortedcontainers import SortedDict

from planner.models.request import SyncPolicy

__all__ = ["BarrierChoice", "Reuse", "choose_barriers", "hits", "reuses", "stab"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Reuse:
    """B takes bytes of A after A's lifetime; it needs a barrier in ``[after, before]``."""

    previous: int  # buffer index of A
    next: int  # buffer index of B
    after: int  # last access of A + 1
    before: int  # first access of B


def reuses(
    start: I64,
    end: I64,
    offset: I64,
    size: I64,
    *,
    after: I64 | None = None,
    before: I64 | None = None,
) -> list[Reuse]:
    """Every binding reuse of a placement without live overlaps, in O(n log n).

    ``after`` (last access + 1) and ``before`` (first access) default to ``end`` and
    ``start``.

    Buffers are painted onto the address space in start order; the owners a new buffer paints
    over are its predecessors on those bytes. For each byte only the latest predecessor binds:
    a barrier after it also follows every earlier one.
    """
    order = np.lexsort((np.arange(start.size), end, start))
    # Segment starting at key k runs to the next key (the last to infinity); its value is the
    # buffer painted last on it, -1 for none. A sorted dict keeps each split and each removal
    # logarithmic, so 100 000 buffers stacked on one another stay O(n log n).
    painted = SortedDict({0: -1})
    found: list[Reuse] = []
    starts, ends = start.tolist(), end.tolist()  # Python ints: numpy scalars are slow here
    afters = ends if after is None else after.tolist()
    befores = starts if before is None else before.tolist()
    los = offset.tolist()
    his = (offset + size).tolist()
    for b in order.tolist():
        lo, hi, begin = los[b], his[b], starts[b]
        _split(painted, lo)
        _split(painted, hi)
        covered = list(painted.irange(lo, hi, inclusive=(True, False)))
        for a in sorted({painted[key] for key in covered}):
            if a >= 0 and ends[a] <= begin:
                found.append(Reuse(a, b, afters[a], befores[b]))
        for key in covered[1:]:
            del painted[key]
        if covered:
            painted[lo] = b
    return found


def _split(painted: SortedDict, at: int) -> None:
    """Make ``at`` a segment boundary (the segment keeps its owner)."""
    if at in painted:
        return
    k = painted.bisect_right(at) - 1
    painted[at] = painted.peekitem(k)[1]


def hits(points: list[int], left: int, right: int) -> bool:
    """Whether a point of ``points`` (sorted) lies in ``[left, right]``."""
    k = bisect.bisect_left(points, left)
    return k < len(points) and points[k] <= right


def stab(
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


@dataclass(frozen=True)
class BarrierChoice:
    """Barriers for one placement under one policy."""

    inserted: list[int]  # new barriers the planner adds (policy "insert")
    required: list[int]  # the fewest barriers, existing or new, every reuse relies on
    missed: list[Reuse]  # reuses no allowed barrier can protect


def choose_barriers(
    found: list[Reuse],
    existing: list[int],
    sync: SyncPolicy,
    candidates: list[int] | None,
) -> BarrierChoice:
    """New barriers (fewest) and the barriers relied on, preferring existing ones."""
    uncovered = [r for r in found if not hits(existing, r.after, r.before)]
    allowed: list[int] | None = [] if sync == "existing" else candidates
    if allowed is not None:
        allowed = sorted(set(allowed) - set(existing))
    new, missed_iv = stab([(r.after, r.before) for r in uncovered], allowed)
    rest = [r for r in found if not hits(new, r.after, r.before)]
    kept, _ = stab([(r.after, r.before) for r in rest], existing)
    missed_set = set(missed_iv)
    missed = [r for r in uncovered if (r.after, r.before) in missed_set]
    required = sorted(set(kept) | set(new))
    return BarrierChoice(inserted=new if sync == "insert" else [], required=required, missed=missed)
