"""alloc-planner: plans where every temporary buffer of a GPU kernel lives in shared memory.

>>> import planner
>>> p = planner.plan({"buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]})
>>> p.arena_bytes
64
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    from planner.sweeps import sweep, triton_prune
    from planner.symbolic import symbolic_plan

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
    "bind",
    "plan",
    "sweep",
    "symbolic_plan",
    "triton_prune",
    "validate",
]


def bind(request: dict[str, Any] | str | bytes, config: dict[str, int]) -> PlanRequest:
    """The ordinary request of one configuration of a request with ``params``
    (docs/design.md, Parameters); a parameter left out takes its default. Raises
    ``RequestError`` naming the field and the value."""
    from planner.core.params import parse_template

    return parse_template(request).bind(config)


def __getattr__(name: str) -> object:
    # The clients load with their first use: a process that plans in-house never builds
    # their wire models.
    if name in ("AsyncClient", "Client"):
        from planner import client

        return getattr(client, name)
    if name in ("sweep", "triton_prune"):
        # Sweeps load with their first use, like the clients.
        from planner import sweeps

        return getattr(sweeps, name)
    if name == "symbolic_plan":
        from planner import symbolic

        return symbolic.symbolic_plan
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
