"""alloc-planner: plans where every temporary buffer of a GPU kernel lives in shared memory.

>>> import planner
>>> p = planner.plan({"buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]})
>>> p.arena_bytes
64
"""

from __future__ import annotations

from planner.client import AsyncClient, Client
from planner.core.errors import (
    FormatError,
    InternalError,
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

__all__ = [
    "AsyncClient",
    "Client",
    "FormatError",
    "InternalError",
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
