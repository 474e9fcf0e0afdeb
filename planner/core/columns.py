"""The request's buffers as columns: one array per field, read once per request.

Every layer that works on arrays (the interference graph, the static check, the plan's
figures) wants the same per-buffer values. Reading them off the buffer models costs a
Python call per buffer and field, and at 300 buffers that is a tenth of a plan's time, so
they are read once per request object and shared (read-only) by every reader.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.models import PlanRequest
from planner.core.patterns import access_span

__all__ = ["BufferColumns", "columns"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BufferColumns:
    """Per buffer, in request order (arrays are read-only: every reader shares them)."""

    start: I64  # program point
    end: I64  # program point, one past the last live
    size: I64  # bytes, as declared
    alignment: I64  # bytes (``PlanRequest.alignment_of``)
    pinned: I64  # bytes: the pinned offset, or -1
    first_access: I64  # program point (``patterns.access_span``)
    access_end: I64  # program point: the last access + 1


def columns(request: PlanRequest) -> BufferColumns:
    """The request's columns, read on the first call for this request object."""
    key = id(request)
    with _LOCK:
        held = _HELD.get(key)
    if held is not None and held[0]() is request:
        return held[1]
    found = _read(request)
    with _LOCK:
        _HELD[key] = (weakref.ref(request, _forget(key)), found)
    return found


def _read(request: PlanRequest) -> BufferColumns:
    bufs = request.buffers
    n = len(bufs)

    def column(values: Iterator[int]) -> I64:
        array = np.fromiter(values, dtype=np.int64, count=n)
        array.flags.writeable = False
        return array

    # (first access, last access) per buffer, flat: one pass, no list of a million tuples
    spans = np.fromiter((v for b in bufs for v in access_span(b)), dtype=np.int64, count=2 * n)
    first_access, access_end = spans[0::2].copy(), spans[1::2] + 1
    first_access.flags.writeable = False
    access_end.flags.writeable = False
    return BufferColumns(
        start=column(b.start for b in bufs),
        end=column(b.end for b in bufs),
        size=column(b.size for b in bufs),
        alignment=column(request.alignment_of(b) for b in bufs),
        pinned=column(-1 if b.offset is None else b.offset for b in bufs),
        first_access=first_access,
        access_end=access_end,
    )


def _forget(key: int) -> Callable[[weakref.ref[PlanRequest]], None]:
    """Drop the columns of the request ``key`` names once that request is gone (before its
    id can name another)."""

    def drop(_: weakref.ref[PlanRequest]) -> None:
        with _LOCK:
            _HELD.pop(key, None)

    return drop


# Requests are frozen models: their buffers never change, so their columns never do. Keyed
# by id, each entry holding a weak reference to its request (the models do not hash cheaply).
_HELD: dict[int, tuple[weakref.ref[PlanRequest], BufferColumns]] = {}
_LOCK = threading.Lock()
