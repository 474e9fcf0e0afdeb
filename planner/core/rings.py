"""Rings: buffers with copies (docs/design.md, Rings).

A ring of ``k`` copies is one contiguous buffer of ``k`` slots, ``stride`` bytes apart (the
size rounded up to the alignment), live over the ring's lifetime: slot ``t mod k`` is the one
trip ``t`` of the loop uses. The ring holds every slot across the loop, as any buffer live
across a loop boundary is live over the whole body, so no other buffer takes a slot's bytes
while the loop runs; the slots' own round-robin reuse is the kernel's pipeline protocol. Once
the depths are chosen a ring request is an ordinary request (``expand``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

from planner.core.models import Buffer, PlanRequest

__all__ = ["choices", "expand", "stride", "weight"]


def stride(request: PlanRequest, buffer: Buffer) -> int:
    """Bytes from one slot to the next: the size rounded up to the buffer's alignment."""
    align = request.alignment_of(buffer)
    return -(-buffer.size // align) * align


def weight(request: PlanRequest, copies: Mapping[str, int]) -> int:
    """Sum of priority * copies over the rings: what the planner maximises."""
    total = 0
    for i in request.rings:
        b = request.buffers[i]
        assert b.copies is not None
        total += b.copies.priority * copies[b.id]
    return total


def choices(request: PlanRequest) -> Iterator[dict[str, int]]:
    """Every combination of depths, ring by ring in request order, each from min to max."""
    ids, axes = [], []
    for i in request.rings:
        b = request.buffers[i]
        assert b.copies is not None
        ids.append(b.id)
        axes.append(range(b.copies.min, b.copies.max + 1))
    for combo in itertools.product(*axes):
        yield dict(zip(ids, combo, strict=True))


def expand(request: PlanRequest, copies: Mapping[str, int]) -> PlanRequest:
    """The ordinary request with each ring one buffer of ``copies * stride`` bytes."""
    buffers = list(request.buffers)
    for i in request.rings:
        b = buffers[i]
        size = copies[b.id] * stride(request, b)
        buffers[i] = b.model_copy(update={"size": size, "copies": None})
    data = request.model_dump(mode="json")
    data["buffers"] = [b.model_dump(mode="json") for b in buffers]
    return PlanRequest.model_validate(data, strict=True)
