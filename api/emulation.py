"""The one place the service calls the CPU emulator (``validators.emulator``), when installed."""

from __future__ import annotations

import importlib
from typing import Any

from planner.client import EmulatorReport, EmulatorViolation
from planner.errors import RequestError
from planner.models import Plan, PlanRequest

__all__ = ["emulate"]

_MODULE = "validators.emulator"


def emulate(request: PlanRequest, plan: Plan) -> EmulatorReport:
    """Run the emulator on ``plan``; ``RequestError`` at ``emulate`` when it is not available."""
    try:
        module = importlib.import_module(_MODULE)
    except ImportError:
        raise RequestError.field(
            ("emulate",),
            "emulate true is not available: this installation has no emulator",
            "emulator_unavailable",
            True,
        ) from None
    report = module.emulate(request, plan)
    return EmulatorReport(
        violations=[
            EmulatorViolation(code=str(_field(v, "code")), message=str(_field(v, "message")))
            for v in _field(report, "violations")
        ]
    )


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)
