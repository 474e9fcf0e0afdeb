"""What a buffer's access patterns say without enumerating threads: its first and last access,
and the slice of it one thread block touches (docs/design.md, Per-block footprints).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.core.models import Access, Buffer, PlanRequest
from planner.core.models.request import BLOCK_VARS, THREAD_VARS

__all__ = ["BlockSlice", "access_span", "block_slice"]


def access_span(buffer: Buffer) -> tuple[int, int]:
    """``(first_access, last_access)``: program points; without patterns the whole lifetime."""
    if not buffer.accesses:
        return buffer.start, buffer.end - 1
    points = [a.at for a in buffer.accesses]
    return min(points), max(points)


@dataclass(frozen=True)
class BlockSlice:
    """Block ``(bx, by, bz)`` touches bytes ``[base, base + size)`` of the declared buffer,
    ``base = sum(coefficients[v] * v) + constant`` (bytes)."""

    size: int  # bytes
    coefficients: dict[str, int]  # blockIdx variable -> bytes per block
    constant: int  # bytes


def _extent(request: PlanRequest, var: str, access: Access) -> int:
    if var in THREAD_VARS:
        assert request.block is not None  # the request checked it
        return request.block[THREAD_VARS[var]]
    return access.loops[var]


def block_slice(request: PlanRequest, buffer: Buffer) -> BlockSlice | None:
    """The per-block slice of a buffer whose accesses all step with ``blockIdx`` alike.

    None when the buffer has no patterns, a broadcast access, no ``blockIdx`` term that moves
    between blocks, or accesses whose per-block strides (bytes) differ: then every block may
    touch any byte of it and the whole declaration is needed.
    """
    if not buffer.accesses or request.grid is None:
        return None
    strides: dict[str, int] | None = None
    lows: list[int] = []
    highs: list[int] = []
    widths: list[int] = []
    for access in buffer.accesses:
        if access.index is None:
            return None
        width = access.bytes
        mine = {
            var: coeff * width
            for var, coeff in access.index.items()
            if var in BLOCK_VARS and coeff != 0 and request.grid[BLOCK_VARS[var]] > 1
        }
        if strides is None:
            strides = mine
        elif mine != strides:
            return None
        lo = hi = access.offset  # elements, over one block
        for var, coeff in access.index.items():
            if var in BLOCK_VARS:
                continue
            span = coeff * (_extent(request, var, access) - 1)
            lo += min(0, span)
            hi += max(0, span)
        lows.append(lo * width)
        highs.append((hi + 1) * width)
        widths.append(width)
    if not strides:
        return None
    # Keep every element at a multiple of its width from the slice's base.
    unit = math.lcm(*widths)
    constant = min(lows) // unit * unit
    return BlockSlice(max(highs) - constant, dict(sorted(strides.items())), constant)
