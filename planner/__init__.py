"""alloc-planner: plans where every temporary buffer of a GPU kernel lives in shared memory.

>>> import planner
>>> p = planner.plan({"buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]})
>>> p.arena_bytes
64
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.core.errors import (
    FormatError,
    InternalError,
    MissingExtraError,
    OverloadedError,
    PayloadTooLargeError,
    PlannerError,
    RequestError,
    ServiceConnectionError,
    ServiceError,
    ServiceUnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
)
from planner.core.models import Plan, PlanRequest, ValidationReport
from planner.pipeline import plan, validate

if TYPE_CHECKING:
    from planner.client import AsyncClient, Client

__all__ = [
    "AsyncClient",
    "Client",
    "FormatError",
    "InternalError",
    "MissingExtraError",
    "OverloadedError",
    "PayloadTooLargeError",
    "Plan",
    "PlanRequest",
    "PlannerError",
    "RequestError",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceUnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "ValidationReport",
    "plan",
    "validate",
]


def __getattr__(name: str) -> object:
    # The clients load with their first use: a process that plans in-house never builds
    # their wire models.
    if name in ("AsyncClient", "Client"):
        from planner import client

        return getattr(client, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
