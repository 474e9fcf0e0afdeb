"""Owner analysis: which thread touches each byte of a buffer, from its affine access patterns.

An access touches element ``sum(coeff * var) + offset`` for every thread, block and loop
value (docs/design.md, Access patterns). Per access the thread part, the block part and the
loop part of the index add up, so the elements are ``thread_offset[t] + rest[k]`` with
``rest`` the distinct values of the block and loop part: a ``threads x rest`` table that
numpy reduces to the smallest and largest thread per element. A byte has one owner when both
agree.

Blocks never share a block's shared memory, but the planner places a buffer once for every
block, so a byte has an owner only if one and the same thread touches it in every block.
Enumeration is capped per access by a budget of index tuples; past it the whole buffer falls
back, conservatively, to ``ANY`` and the map says it is not exact.

A map is kept as runs of bytes with one owner, built from the distinct elements each access
touches: its memory grows with the accesses' enumeration (at most the budget per access),
never with the buffer's size, so a 128 MiB buffer costs what its accesses cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.arrays import distinct
from planner.core.models import Access, Diagnostic, PlanRequest
from planner.core.models.request import BLOCK_VARS, THREAD_VARS

__all__ = [
    "ANY",
    "DEFAULT_BUDGET",
    "NONE",
    "BlockSpan",
    "OwnerMap",
    "block_byte_range",
    "block_spans",
    "budget_diagnostics",
    "byte_owners",
    "enumeration_size",
    "over_budget",
    "owners_agree",
    "uses_block_index",
]

NONE = -1  # no thread touches the byte
ANY = -2  # several threads, any thread ("threads": "all"), or the budget was exceeded
DEFAULT_BUDGET = 1 << 22  # (thread, block, loop) index tuples enumerated per access
# A request without ``block`` has more than one thread, how many is not said, and none of its
# indices uses threadIdx (the request refuses that): two threads touching the same bytes are
# enough to tell that no byte has one owner.
UNKNOWN_BLOCK = (2, 1, 1)

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
_UNSEEN = np.iinfo(np.int32).max  # smallest-thread sentinel of an untouched byte


@dataclass(frozen=True)
class OwnerMap:
    """Per buffer byte: ``NONE``, ``ANY`` or the linear id of the one thread touching it,
    kept as runs: bytes ``[starts[k], starts[k + 1])`` (the last run up to ``size``) all have
    owner ``values[k]``. Its memory grows with the elements the accesses touch, never with
    the buffer's bytes; ``owners`` expands it per byte (for small buffers only)."""

    starts: I64  # bytes, strictly increasing, starts[0] == 0
    values: I32  # owner of each run; thread id x + y*bx + z*bx*by
    size: int  # bytes
    exact: bool  # False when the budget forced the fallback to ANY
    first_access: int | None  # first point with an access (None: no access in the range)
    last_access: int | None

    @staticmethod
    def uniform(
        size: int, owner: int, exact: bool, first: int | None, last: int | None
    ) -> OwnerMap:
        """Every byte with the same owner: one run."""
        return OwnerMap(
            np.zeros(1, np.int64), np.full(1, owner, np.int32), size, exact, first, last
        )

    @property
    def owners(self) -> I32:
        """One entry per byte (``size`` entries): for tests and small buffers."""
        lengths = np.diff(np.append(self.starts, self.size))
        expanded: I32 = np.repeat(self.values, lengths).astype(np.int32)
        return expanded

    def at(self, positions: I64) -> I32:
        """The owners of the bytes at ``positions`` (each in ``[0, size)``)."""
        found: I32 = self.values[np.searchsorted(self.starts, positions, side="right") - 1]
        return found


def owners_agree(first: OwnerMap, first_base: int, later: OwnerMap, later_base: int) -> bool:
    """Rule (b) on the bytes two placed buffers share: ``first`` at arena byte ``first_base``
    and ``later`` at ``later_base``; each shared byte is untouched by one of them or touched
    by one and the same thread in both. Work grows with the runs in the shared bytes."""
    lo = max(first_base, later_base)
    hi = min(first_base + first.size, later_base + later.size)
    if lo >= hi:
        return True
    cuts = [np.array([lo], np.int64)]
    for runs, base in ((first, first_base), (later, later_base)):
        arena = runs.starts + base
        cuts.append(arena[(arena > lo) & (arena < hi)])
    bounds = distinct(np.concatenate(cuts))  # every run boundary inside [lo, hi)
    a = first.at(bounds - first_base)
    b = later.at(bounds - later_base)
    ok = (a == NONE) | (b == NONE) | ((a == b) & (a != ANY))
    return bool(ok.all())


@dataclass(frozen=True)
class BlockSpan:
    """Bytes one access touches in block ``b``: ``[lo + s, hi + s)``, ``s = sum(c * b[var])``.

    Exact: an affine index over a box of integer variables reaches its extremes at corners.
    """

    block_coeffs: tuple[tuple[str, int], ...]  # (blockIdx var, bytes per unit), nonzero only
    lo: int  # bytes, in block (0, 0, 0)
    hi: int  # bytes, half-open


def byte_owners(
    request: PlanRequest,
    buffer_index: int,
    *,
    before: int | None = None,
    budget: int = DEFAULT_BUDGET,
) -> OwnerMap:
    """The owner of every byte of ``request.buffers[buffer_index]``, as runs.

    Only accesses at points ``< before`` count when ``before`` is given. A buffer without
    access patterns may be touched by any thread anywhere in its lifetime: every byte is
    ``ANY``, ``first_access`` its start and ``last_access`` its last point (before ``before``).
    """
    buffer = request.buffers[buffer_index]
    size = buffer.size
    if not buffer.accesses:
        last = buffer.end - 1 if before is None else min(buffer.end, before) - 1
        if last < buffer.start:
            return OwnerMap.uniform(size, NONE, True, None, None)
        return OwnerMap.uniform(size, ANY, True, buffer.start, last)
    accesses = [a for a in buffer.accesses if before is None or a.at < before]
    if not accesses:
        return OwnerMap.uniform(size, NONE, True, None, None)
    first = min(a.at for a in accesses)
    last = max(a.at for a in accesses)
    if any(enumeration_size(request, a) > budget for a in accesses):
        return OwnerMap.uniform(size, ANY, False, first, last)
    threads = _threads(request)
    touched = [_element_threads(request, a, size, threads) for a in accesses]
    # Every element boundary of every access, and the buffer's ends, cut the bytes into
    # segments on which each access is constant (one element, or untouched).
    bounds = distinct(
        np.concatenate([[0, size], *(t[0] for t in touched), *(t[1] for t in touched)])
    )
    bounds = bounds[bounds < size] if size else bounds[:1]
    lowest = np.full(bounds.size, _UNSEEN, np.int32)  # smallest thread on each segment
    highest = np.full(bounds.size, -1, np.int32)  # largest
    for lo, hi, low, high in touched:
        if lo.size == 0:
            continue  # the access touches no element inside the buffer
        k = np.searchsorted(lo, bounds, side="right") - 1
        inside = k >= 0
        inside[inside] = bounds[inside] < hi[k[inside]]
        np.minimum(lowest, np.where(inside, low[k], _UNSEEN), out=lowest)
        np.maximum(highest, np.where(inside, high[k], -1), out=highest)
    values = np.where(lowest == highest, lowest, ANY).astype(np.int32)
    values[highest < 0] = NONE
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]  # runs: a new one where the owner changes
    return OwnerMap(bounds[keep].astype(np.int64), values[keep], size, True, first, last)


def enumeration_size(request: PlanRequest, access: Access) -> int:
    """Index tuples owner analysis enumerates for ``access``: threads x blocks x loop values.

    Only variables with a nonzero coefficient count; a broadcast costs nothing (it is ANY).
    """
    if access.index is None:
        return 0
    count = _threads(request)
    grid = _dims(request.grid)
    for var, coeff in access.index.items():
        if coeff == 0 or var in THREAD_VARS:
            continue
        count *= grid[BLOCK_VARS[var]] if var in BLOCK_VARS else access.loops[var]
    return count


def over_budget(request: PlanRequest, *, budget: int = DEFAULT_BUDGET) -> list[str]:
    """Ids of the buffers whose owner map falls back to ANY because an access is too large."""
    return [
        b.id
        for b in request.buffers
        if any(enumeration_size(request, a) > budget for a in b.accesses)
    ]


def budget_diagnostics(request: PlanRequest, *, budget: int = DEFAULT_BUDGET) -> list[Diagnostic]:
    """One warning per buffer whose owner analysis falls back to "any thread"."""
    out: list[Diagnostic] = []
    for b in request.buffers:
        sizes = [enumeration_size(request, a) for a in b.accesses]
        worst = max(sizes, default=0)
        if worst > budget:
            out.append(
                Diagnostic(
                    level="warning",
                    code="owner_budget_exceeded",
                    message=f"owner analysis of {b.id!r} gave up: an access enumerates {worst} "
                    f"(thread, block, loop) tuples, over the budget of {budget}; every byte "
                    "counts as touched by any thread",
                )
            )
    return out


def uses_block_index(request: PlanRequest, buffer_index: int) -> bool:
    """True when some access of the buffer has a nonzero ``blockIdx`` coefficient."""
    return any(
        coeff != 0 and var in BLOCK_VARS
        for a in request.buffers[buffer_index].accesses
        for var, coeff in (a.index or {}).items()
    )


def block_spans(request: PlanRequest, buffer_index: int) -> list[BlockSpan]:
    """Per access of the buffer, the bytes it touches as an affine function of ``blockIdx``.

    A broadcast spans the whole buffer in every block. For footprints: a block touches the
    union of its accesses' spans, so ``block_byte_range`` bounds it.
    """
    buffer = request.buffers[buffer_index]
    block = _block(request)
    spans: list[BlockSpan] = []
    for a in buffer.accesses:
        if a.index is None:
            spans.append(BlockSpan((), 0, buffer.size // a.bytes * a.bytes))
            continue
        lo = hi = a.offset  # elements, in block (0, 0, 0)
        coeffs: list[tuple[str, int]] = []
        for var, coeff in a.index.items():
            if coeff == 0:
                continue
            if var in BLOCK_VARS:
                coeffs.append((var, coeff * a.bytes))
                continue
            extent = block[THREAD_VARS[var]] if var in THREAD_VARS else a.loops[var]
            reach = coeff * (extent - 1)
            lo += min(0, reach)
            hi += max(0, reach)
        spans.append(BlockSpan(tuple(coeffs), lo * a.bytes, (hi + 1) * a.bytes))
    return spans


def block_byte_range(
    request: PlanRequest, buffer_index: int, block: Sequence[int]
) -> tuple[int, int] | None:
    """Bytes ``[lo, hi)`` of the buffer that block ``block`` (x, y, z) touches at all.

    ``None`` when the buffer has no access patterns (any byte may be touched); ``(0, 0)``
    when its accesses touch no byte.
    """
    all_spans = block_spans(request, buffer_index)
    if not all_spans:
        return None
    spans = [s for s in all_spans if s.hi > s.lo]
    if not spans:
        return (0, 0)  # only broadcasts of elements wider than the buffer
    where = dict(zip(("blockIdx.x", "blockIdx.y", "blockIdx.z"), block, strict=False))
    shifted = [
        (s.lo + _shift(s.block_coeffs, where), s.hi + _shift(s.block_coeffs, where)) for s in spans
    ]
    return min(lo for lo, _ in shifted), max(hi for _, hi in shifted)


def _shift(coeffs: Iterable[tuple[str, int]], where: dict[str, int]) -> int:
    return sum(c * where.get(var, 0) for var, c in coeffs)


def _dims(value: Sequence[int] | None) -> tuple[int, int, int]:
    x, y, z = [*(value or ()), 1, 1, 1][:3]
    return (x, y, z)


def _block(request: PlanRequest) -> tuple[int, int, int]:
    return UNKNOWN_BLOCK if request.block is None else _dims(request.block)


def _threads(request: PlanRequest) -> int:
    return math.prod(_block(request))


def _element_threads(
    request: PlanRequest, a: Access, size: int, threads: int
) -> tuple[I64, I64, I32, I32]:
    """The elements ``a`` touches inside ``[0, size // width)``, as byte ranges ``[lo, hi)``
    (sorted, disjoint) with the smallest and the largest thread touching each.

    A broadcast touches every element from every thread: one range, threads 0 to the last.
    Otherwise the arrays hold one entry per distinct element touched (at most the access's
    enumeration size), never one per byte of the buffer.
    """
    width = a.bytes
    n = size // width  # elements; a validated access never reaches past them
    if a.index is None:
        span = np.array([0], np.int64), np.array([n * width], np.int64)
        if n == 0:
            span = np.zeros(0, np.int64), np.zeros(0, np.int64)
        count = span[0].size
        return span[0], span[1], np.zeros(count, np.int32), np.full(count, threads - 1, np.int32)
    block = _block(request)
    grid = _dims(request.grid)
    t = np.arange(threads, dtype=np.int64)
    coords = (t % block[0], t // block[0] % block[1], t // (block[0] * block[1]))
    per_thread = np.zeros(threads, np.int64)  # elements, the thread part of the index
    rest = np.array([a.offset], np.int64)  # distinct block + loop parts, plus the constant
    for var, coeff in a.index.items():
        if coeff == 0:
            continue
        if var in THREAD_VARS:
            per_thread += coeff * coords[THREAD_VARS[var]]
            continue
        extent = grid[BLOCK_VARS[var]] if var in BLOCK_VARS else a.loops[var]
        steps = coeff * np.arange(extent, dtype=np.int64)
        rest = distinct(rest[:, None] + steps[None, :])
    elements = (per_thread[:, None] + rest[None, :]).ravel()
    if elements.size == 0:
        none = np.zeros(0, np.int64)
        return none, none, np.zeros(0, np.int32), np.zeros(0, np.int32)
    owner = np.repeat(np.arange(threads, dtype=np.int32), rest.size)
    order = np.argsort(elements, kind="stable")
    elements, owner = elements[order], owner[order]
    heads = np.flatnonzero(np.diff(elements, prepend=elements[:1] - 1))  # first of each
    unique = elements[heads]
    low = np.minimum.reduceat(owner, heads).astype(np.int32)
    high = np.maximum.reduceat(owner, heads).astype(np.int32)
    return unique * width, (unique + 1) * width, low, high
