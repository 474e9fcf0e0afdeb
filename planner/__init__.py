"""alloc-planner: plans where every temporary buffer of a GPU kernel lives in shared memory.

>>> import planner
>>> p = planner.plan({"buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]})
>>> p.arena_bytes
64
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from planner.client import AsyncClient, Client
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

# Loaded on first use, so that ``solvers`` and ``validators``, which use planner's modules,
# can be imported first: the pipeline imports them in turn.
_LAZY = {
    "plan": "planner.pipeline",
    "validate": "planner.pipeline",
    "Client": "planner.client",
    "AsyncClient": "planner.client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'planner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
