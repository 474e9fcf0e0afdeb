"""Which barriers a placement relies on, and the fewest new ones it needs.

A reuse is a pair A, B with A ending before B starts and sharing a byte. It is safe when a
barrier stands at some p with ``last_access(A) < p <= first_access(B)`` (docs/design.md,
Reuse hazard; without access patterns ``last_access = end - 1`` and
``first_access = start``), or when it is a thread-local alias (``planner.core.aliasing``),
which the caller drops from the list. Choosing the fewest points that hit every such interval
is interval stabbing, exact: the shared synchronisation choice on intervals
(``planner.core.sync_choice.stab``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.core.arrays import distinct
from planner.core.indexed import Indexed
from planner.core.models.request import SyncPolicy
from planner.core.sync_choice import Intervals, hits_each, stab

__all__ = [
    "BarrierChoice",
    "Reuse",
    "Reuses",
    "choose_barriers",
    "hits",
    "reuses",
]

I64 = npt.NDArray[np.int64]
_MIXED = -2  # a segment-tree node whose range has more than one painter


class Reuse(NamedTuple):
    """B takes bytes of A after A's lifetime; it needs a barrier in ``[after, before]``.

    A named tuple: a placement of 100 000 buffers makes about as many, and a tuple is made
    several times faster than a frozen dataclass."""

    previous: int  # buffer index of A
    next: int  # buffer index of B
    after: int  # last access of A + 1
    before: int  # first access of B


class Reuses(Indexed[Reuse]):
    """Reuses held as four arrays (a placement of a million buffers makes about as many, and
    tuples of them cost seconds); indexing and iteration give ``Reuse`` tuples."""

    def __init__(self, previous: I64, following: I64, after: I64, before: I64) -> None:
        self.previous, self.following, self.after, self.before = previous, following, after, before

    def __len__(self) -> int:
        return int(self.previous.size)

    def item(self, i: int) -> Reuse:
        return Reuse(
            int(self.previous[i]), int(self.following[i]), int(self.after[i]), int(self.before[i])
        )

    def __iter__(self) -> Iterator[Reuse]:
        columns = (self.previous, self.following, self.after, self.before)
        return (Reuse(*row) for row in zip(*(c.tolist() for c in columns), strict=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


def _columns(found: Sequence[Reuse]) -> tuple[I64, I64]:
    """``after`` and ``before`` of every reuse, as arrays."""
    if isinstance(found, Reuses):
        return found.after, found.before
    after = np.fromiter((r.after for r in found), dtype=np.int64, count=len(found))
    before = np.fromiter((r.before for r in found), dtype=np.int64, count=len(found))
    return after, before


def reuses(
    start: I64,
    end: I64,
    offset: I64,
    size: I64,
    *,
    after: I64 | None = None,
    before: I64 | None = None,
) -> Reuses:
    """Every binding reuse of a placement without live overlaps, in O(n log n).

    ``after`` (last access + 1) and ``before`` (first access) default to ``end`` and
    ``start``.

    Buffers are painted onto the address space in start order; the owners a new buffer paints
    over are its predecessors on those bytes. For each byte only the latest predecessor binds:
    a barrier after it also follows every earlier one.
    """
    order = np.lexsort((np.arange(start.size), end, start)).astype(np.int64)
    lo, hi = offset.astype(np.int64), (offset + size).astype(np.int64)
    coords = distinct(np.concatenate([lo, hi]))
    pairs_a, pairs_b = _painted_over(
        order,
        np.searchsorted(coords, lo).astype(np.int64),
        np.searchsorted(coords, hi).astype(np.int64),
        max(int(coords.size), 1),
        start.astype(np.int64),
        end.astype(np.int64),
    )
    afters = (end if after is None else after).astype(np.int64)
    befores = (start if before is None else before).astype(np.int64)
    return Reuses(pairs_a, pairs_b, afters[pairs_a], befores[pairs_b])


@njit(small=True)
def _painted_over(
    order: I64, lo: I64, hi: I64, slots: int, start: I64, end: I64
) -> tuple[I64, I64]:
    """Buffers painted onto address slots in ``order``: the pairs ``(a, b)`` where ``a`` is
    the last painter of a slot ``b`` covers and ``a`` ended by ``b``'s start, grouped by
    ``b`` in order, ``a`` ascending.

    A segment tree over the slots holds on each node the painter of its whole range, or
    ``_MIXED``; painting a range sets the nodes that cover it, and finding the painters of a
    range stops at nodes with one painter, so each piece of paint is read once before it is
    painted over: O((n + pieces) log n) in all, with memory that grows with the buffers.
    """
    width = 1
    while width < slots:
        width *= 2
    paint = np.full(2 * width, -1, dtype=np.int64)  # -1: never painted
    n = order.size
    seen = np.full(max(n, 1), -1, dtype=np.int64)
    found = np.empty(max(n, 1), dtype=np.int64)
    out_a = np.empty(max(n, 16), dtype=np.int64)
    out_b = np.empty(max(n, 16), dtype=np.int64)
    count = 0
    stack = np.empty((128, 3), dtype=np.int64)
    for b in order:
        ql, qr = lo[b], hi[b]
        if ql >= qr:
            continue
        k = 0
        top = 0
        stack[0, 0], stack[0, 1], stack[0, 2] = 1, 0, width
        top = 1
        while top > 0:
            top -= 1
            node, left, right = stack[top, 0], stack[top, 1], stack[top, 2]
            if right <= ql or left >= qr:
                continue
            v = paint[node]
            if v != _MIXED:
                if v >= 0 and seen[v] != b:
                    seen[v] = b
                    if end[v] <= start[b]:
                        found[k] = v
                        k += 1
                continue
            mid = (left + right) // 2
            stack[top, 0], stack[top, 1], stack[top, 2] = 2 * node + 1, mid, right
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 2 * node, left, mid
            top += 2
        if count + k > out_a.size:
            grown = max(2 * out_a.size, count + k)
            out_a = np.concatenate((out_a, np.empty(grown - out_a.size, dtype=np.int64)))
            out_b = np.concatenate((out_b, np.empty(grown - out_b.size, dtype=np.int64)))
        out_a[count : count + k] = np.sort(found[:k])
        out_b[count : count + k] = b
        count += k
        stack[0, 0], stack[0, 1], stack[0, 2] = 1, 0, width
        top = 1
        while top > 0:
            top -= 1
            node, left, right = stack[top, 0], stack[top, 1], stack[top, 2]
            if right <= ql or left >= qr:
                continue
            if ql <= left and right <= qr:
                paint[node] = b
                continue
            if paint[node] != _MIXED:  # push the one painter down before splitting
                paint[2 * node] = paint[node]
                paint[2 * node + 1] = paint[node]
                paint[node] = _MIXED
            mid = (left + right) // 2
            stack[top, 0], stack[top, 1], stack[top, 2] = 2 * node + 1, mid, right
            stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = 2 * node, left, mid
            top += 2
    return out_a[:count], out_b[:count]


def hits(points: list[int], left: int, right: int) -> bool:
    """Whether a point of ``points`` (sorted) lies in ``[left, right]``."""
    k = bisect.bisect_left(points, left)
    return k < len(points) and points[k] <= right


@dataclass(frozen=True)
class BarrierChoice:
    """Barriers for one placement under one policy."""

    inserted: list[int]  # new barriers the planner adds (policy "insert")
    required: list[int]  # the fewest barriers, existing or new, every reuse relies on
    missed: list[Reuse]  # reuses no allowed barrier can protect


def choose_barriers(
    found: Sequence[Reuse],
    existing: list[int],
    sync: SyncPolicy,
    candidates: list[int] | None,
) -> BarrierChoice:
    """New barriers (fewest) and the barriers relied on, preferring existing ones: the
    synchronisation choice on intervals, first the new points for the reuses no existing
    barrier serves, then the existing points the rest rely on."""
    after, before = _columns(found)
    uncovered = np.flatnonzero(~hits_each(existing, after, before))
    # Candidates are where "insert" may add barriers; under "none" the caller synchronizes
    # wherever the plan says, so any point may be required.
    allowed: list[int] | None = {"existing": [], "insert": candidates, "none": None}[sync]
    if allowed is not None:
        allowed = sorted(set(allowed) - set(existing))
    new, missed_mask = stab(Intervals(after[uncovered], before[uncovered]), allowed)
    rest = np.flatnonzero(~hits_each(new, after, before))
    kept, _ = stab(Intervals(after[rest], before[rest]), existing)
    missed = [found[int(i)] for i in uncovered[missed_mask].tolist()]
    required = sorted(set(kept) | set(new))
    return BarrierChoice(inserted=new if sync == "insert" else [], required=required, missed=missed)


_WARM: list[bool] = []
