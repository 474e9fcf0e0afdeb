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
    bounds: list[int] = [0]  # segment k is [bounds[k], bounds[k + 1]) or to infinity
    owners: list[int] = [-1]  # buffer painted last on segment k, -1 for none
    found: list[Reuse] = []
    starts, ends = start.tolist(), end.tolist()  # Python ints: numpy scalars are slow here
    afters = ends if after is None else after.tolist()
    befores = starts if before is None else before.tolist()
    los = offset.tolist()
    his = (offset + size).tolist()
    for b in order.tolist():
        lo, hi, begin = los[b], his[b], starts[b]
        k = _split(bounds, owners, lo)
        j = _split(bounds, owners, hi)
        for a in sorted(set(owners[k:j])):
            if a >= 0 and ends[a] <= begin:
                found.append(Reuse(a, b, afters[a], befores[b]))
        bounds[k:j] = [lo]
        owners[k:j] = [b]
    return found


def _split(bounds: list[int], owners: list[int], at: int) -> int:
    """Make ``at`` a segment boundary; return the index of the segment starting there."""
    k = bisect.bisect_right(bounds, at) - 1
    if bounds[k] == at:
        return k
    bounds.insert(k + 1, at)
    owners.insert(k + 1, owners[k])
    return k + 1


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
