"""The full plan of a request at offsets chosen elsewhere (a sweep, a symbolic plan)."""

from __future__ import annotations

from collections.abc import Sequence

from planner.core.io import request_sha256
from planner.core.models import Plan, PlanRequest
from planner.pipeline.facade import plan as plan_one

__all__ = ["pinned_plan"]


def pinned_plan(request: PlanRequest, offsets: Sequence[int]) -> Plan:
    """The full plan of ``request`` with its buffers at ``offsets`` (barriers, launch figures,
    the static check): the request is planned with every buffer pinned there, and the plan
    names the request as given."""
    data = request.model_dump(mode="json", exclude_defaults=False)
    for b, offset in zip(data["buffers"], offsets, strict=True):
        b["offset"] = int(offset)
    options = dict(data.get("options") or {})
    options["solver"] = "greedy"
    data["options"] = options
    placed = plan_one(data)
    return placed.model_copy(update={"request_sha256": request_sha256(request)})
