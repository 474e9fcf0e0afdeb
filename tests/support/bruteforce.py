"""Brute force for small instances: the exact optimum, to check the exact methods against."""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt

from planner.core.graph import InterferenceGraph
from planner.core.models import PlanRequest
from planner.validators import validate_plan
from tests.support.plans import plan_from_offsets

__all__ = ["assert_valid_offsets", "brute_force", "conflict", "pins_clash"]


def conflict(g: InterferenceGraph, i: int, j: int) -> bool:
    """Whether buffers ``i`` and ``j`` are occupied at a common point."""
    return bool(g.start[i] < g.occupied_end[j] and g.start[j] < g.occupied_end[i])


def _overlap(g: InterferenceGraph, i: int, x: int, j: int, y: int) -> bool:
    return x < y + int(g.size[j]) and y < x + int(g.size[i])


def pins_clash(g: InterferenceGraph) -> bool:
    """Whether two conflicting pinned buffers share a byte: then nothing can be planned."""
    pins = [i for i in range(g.n) if g.pinned[i] >= 0]
    return any(
        conflict(g, i, j) and _overlap(g, i, int(g.pinned[i]), j, int(g.pinned[j]))
        for i, j in itertools.combinations(pins, 2)
    )


def brute_force(g: InterferenceGraph) -> int | None:
    """Smallest arena (bytes), by first fit over every order of the free buffers around the
    pinned ones; None when pinned buffers clash.

    Exact: take an optimal plan and place its buffers by first fit in order of offset; by
    induction each lands at or below its offset there, so some order reaches the optimum.
    """
    if pins_clash(g):
        return None
    pinned = {i: int(g.pinned[i]) for i in range(g.n) if g.pinned[i] >= 0}
    free = [i for i in range(g.n) if g.pinned[i] < 0]
    best: int | None = None
    for order in itertools.permutations(free):
        offsets = dict(pinned)
        for i in order:
            align = int(g.alignment[i])
            x = 0  # bytes; raised past each clash, to the next aligned byte
            while True:
                tops = [
                    offsets[j] + int(g.size[j])
                    for j in offsets
                    if conflict(g, i, j) and _overlap(g, i, x, j, offsets[j])
                ]
                if not tops:
                    break
                x = -(-max(tops) // align) * align
            offsets[i] = x
        arena = max((offsets[i] + int(g.size[i]) for i in offsets), default=0)
        best = arena if best is None else min(best, arena)
    return best if best is not None else 0


def assert_valid_offsets(
    request: PlanRequest, g: InterferenceGraph, offsets: npt.NDArray[np.int64] | None
) -> None:
    """``offsets`` (bytes, request order) are aligned, keep the pins and pass the validator."""
    assert offsets is not None
    assert offsets.dtype == np.int64
    assert (offsets % g.alignment == 0).all()
    pinned = g.pinned >= 0
    assert (offsets[pinned] == g.pinned[pinned]).all()
    report = validate_plan(request, plan_from_offsets(request, g, offsets))
    assert report.valid, report.violations
