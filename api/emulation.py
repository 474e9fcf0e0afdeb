"""The one place the service calls the CPU emulator (``validators.emulator``)."""

from __future__ import annotations

from planner.client import EmulatorReport, EmulatorViolation
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate as run_emulator

__all__ = ["emulate"]


def emulate(request: PlanRequest, plan: Plan) -> EmulatorReport:
    """Run the emulator on ``plan``: every race and clobber it finds, in its order."""
    report = run_emulator(request, plan)
    return EmulatorReport(
        violations=[EmulatorViolation(code=v.code, message=v.message) for v in report.violations]
    )
