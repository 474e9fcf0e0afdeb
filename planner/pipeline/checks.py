"""The static check every plan passes before it leaves, and whose fault a failure is."""

from __future__ import annotations

from planner.core.errors import InternalError, RequestError
from planner.core.models import Plan, PlanRequest, ValidationReport
from planner.validators import validate_plan

__all__ = ["checked", "raise_for"]


def checked(req: PlanRequest, result: Plan) -> Plan:
    """``result`` when it passes the static validator; else the caller's error or ours."""
    report = validate_plan(req, result)
    if not report.valid:
        raise_for(req, report)
    return result


def raise_for(req: PlanRequest, report: ValidationReport) -> None:
    """A violation between two pinned buffers is the caller's; anything else is ours."""
    pinned = {b.id: i for i, b in enumerate(req.buffers) if b.offset is not None}
    mine = [v for v in report.violations if not set(v.buffers) <= set(pinned) or not v.buffers]
    if not mine:
        v = report.violations[0]
        index = max(pinned[ident] for ident in v.buffers)
        raise RequestError.field(
            ("buffers", index, "offset"),
            f"pinned buffers {' and '.join(v.buffers)} cannot share bytes under sync "
            f"{req.options.sync!r}: {v.message}",
            "pinned_conflict",
            req.buffers[index].offset,
        )
    details = "; ".join(f"{v.code}: {v.message}" for v in mine[:5])
    raise InternalError(f"the planner built a plan that fails its static check: {details}")
