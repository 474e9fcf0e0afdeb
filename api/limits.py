"""The service's limits on one request, beyond the body size and the buffer count that
parsing enforces: a buffer count read from the raw bytes before parsing, the count of the
buffers array before its elements are validated, the solve-time cap and the
access-enumeration budget of the emulator."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from planner.core.errors import RequestError
from planner.core.models import Plan, PlanRequest
from planner.validators.cost import EmulationCost, emulation_cost
from planner.validators.emulator import DEFAULT_MAX_BLOCKS

__all__ = [
    "EMULATION_MAX_SPAN",
    "buffers_at_least",
    "cap_time_limit",
    "check_buffer_count",
    "check_element_count",
    "check_emulation_budget",
    "check_emulation_span",
]

# Bytes of arena the emulator shadows, 12 bytes of state each: 16 MiB is 72 times the largest
# shared memory of any target (232448 bytes), so only a broken or synthetic plan reaches it.
EMULATION_MAX_SPAN = 1 << 24

# An object whose first key is "id" with a string value, once JSON whitespace is removed (or
# as json.dumps writes it). In a body that parses as a request every occurrence is a buffer:
# inside a JSON string a quote is escaped (a backslash before it, whitespace removed or not),
# so none starts or ends within one; only buffers have an "id"; and an object is counted once
# however often it repeats a key.
_BUFFER_STARTS = (b'{"id":"', b'{"id": "')
_WHITESPACE = b" \t\n\r"


def buffers_at_least(body: bytes, enough: int | None = None) -> int:
    """At most the number of buffers of the request in ``body`` if it parses, from a scan of
    the bytes (no parse: a few ``bytes.count`` passes, and one ``bytes.translate`` when some
    buffer may have other whitespace); it may stop once the count passes ``enough``.

    It counts the buffers whose first key is ``id`` (as every serializer that writes a
    buffer's fields in the documented order does) and is 0 where a repeated ``buffers`` key
    (the last one wins) could hide some: when ``buffers`` is named more than once, or a key
    may spell it with ``\\u00..`` escapes.
    """
    if body.count(b'"buffers"') != 1 or b"\\u00" in body:
        return 0
    count = sum(body.count(start) for start in _BUFFER_STARTS)
    if (enough is None or count <= enough) and count < body.count(b'"id"'):
        count = body.translate(None, _WHITESPACE).count(_BUFFER_STARTS[0])
    return count


def check_buffer_count(body: bytes, max_buffers: int) -> None:
    """Raise ``RequestError`` at ``buffers`` when the raw ``body`` surely holds more than
    ``max_buffers`` buffers; never for a request within the limit (parsing checks exactly)."""
    if body.count(b'"id"') <= max_buffers:  # every counted buffer holds one: the fast answer
        return
    count = buffers_at_least(body, enough=max_buffers)
    if count > max_buffers:
        raise RequestError.field(
            ("buffers",),
            f"at least {count} buffers exceed the limit of {max_buffers}",
            "too_many_buffers",
            count,
        )


def check_element_count(
    body: bytes, max_buffers: int, arrays: Sequence[tuple[str, ...]] = (("buffers",),)
) -> None:
    """Raise ``RequestError`` at an array of ``arrays`` (paths of object keys in ``body``)
    that holds more than ``max_buffers`` elements, whatever they are: before any element is
    validated, so that a body of a million ``{}`` gets one error, not four million.

    No array holds more elements than the body has commas, plus one: below that the answer
    is immediate; above it the body is read as plain JSON (a few ms a megabyte, on whatever
    thread parses it anyway). Malformed JSON is left to the parser, which says where.
    """
    if body.count(b",") < max_buffers:
        return
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return
    for path in arrays:
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, list) and len(value) > max_buffers:
            raise RequestError.field(
                path,
                f"{len(value)} {path[-1]} exceed the limit of {max_buffers}",
                "too_many_buffers",
                len(value),
            )


def cap_time_limit(request: PlanRequest, max_time_limit: float) -> PlanRequest:
    """The request with ``options.time_limit`` lowered to the server's maximum if above it.

    The plan answers the capped request: its ``request_sha256`` covers the capped value.
    """
    if request.options.time_limit <= max_time_limit:
        return request
    options = request.options.model_copy(update={"time_limit": max_time_limit})
    return request.model_copy(update={"options": options})


def check_emulation_budget(request: PlanRequest, plan: Plan, budget: int) -> EmulationCost:
    """Raise ``RequestError`` at ``emulate`` when emulating ``plan`` may cost more than
    ``budget`` units (``validators.cost``: (thread, byte) accesses over every path of the
    control flow and every emulated block, an upper bound); else the cost."""
    cost = emulation_cost(request, plan, DEFAULT_MAX_BLOCKS)
    if cost.total > budget:
        share = ""
        if cost.costliest:
            share = (
                f"; the accesses of buffer {cost.costliest!r} cost {cost.costliest_units} of them"
            )
        raise RequestError.field(
            ("emulate",),
            f"emulating this request may enumerate {cost.total} (thread, byte) accesses over "
            f"{cost.paths} path{'s' if cost.paths != 1 else ''} of its control flow and "
            f"{cost.blocks} block{'s' if cost.blocks != 1 else ''}, over the limit of {budget} "
            f"(PLANNER_MAX_ACCESS_INSTANCES){share}",
            "emulation_budget_exceeded",
            True,
        )
    return cost


def check_emulation_span(request: PlanRequest, plan: Plan, limit: int = EMULATION_MAX_SPAN) -> None:
    """Raise ``RequestError`` at ``plan.placements`` when the shared placements span more
    bytes than the emulator shadows."""
    sizes = {b.id: b.size for b in request.buffers}
    shared = [p for p in plan.placements if p.memory == "shared"]
    lo = min([0, *(p.offset for p in shared)])
    hi = max([0, *(p.offset + max(p.size, sizes.get(p.id, 0)) for p in shared)])
    if hi - lo > limit:
        raise RequestError.field(
            ("plan", "placements"),
            f"the shared placements span {hi - lo} bytes, over the {limit} bytes the emulator "
            "shadows",
            "emulation_budget_exceeded",
            hi - lo,
        )
