"""What both bridges share: a compiler's own placement as a plan the validators can judge,
the verdict of those validators, and the check that an optional extra is installed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planner.core.errors import MissingExtraError
from planner.core.install import available, install_hint
from planner.core.io import request_sha256
from planner.core.models import (
    Barriers,
    GraphStats,
    Launch,
    Placement,
    Plan,
    PlanRequest,
    SolverInfo,
)
from planner.core.targets import launch_figures
from planner.validators import validate_plan
from planner.validators.emulator import emulate

__all__ = ["Verdict", "foreign_plan", "judge", "need"]


def need(extra: str, feature: str) -> None:
    """Raise ``MissingExtraError`` when the extra's package is not installed."""
    if not available(extra):
        raise MissingExtraError(feature, extra, install_hint(extra))


def foreign_plan(request: PlanRequest, offsets: dict[str, int], name: str) -> Plan:
    """A compiler's placement as a plan: every buffer at the offset the compiler gave it, the
    request's barriers and no other (sync "existing" semantics)."""
    placements = [
        Placement(id=b.id, offset=offsets[b.id], size=b.size, memory="shared")
        for b in request.buffers
    ]
    arena = max((p.offset + p.size for p in placements), default=0)
    naive = sum(b.size for b in request.buffers)
    capacity = request.effective_capacity
    status = "infeasible" if capacity is not None and arena > capacity else "feasible"
    return Plan(
        name=request.name,
        status=status,
        arena_bytes=arena,
        lower_bound=0,
        naive_bytes=naive,
        capacity=capacity,
        placements=placements,
        barriers=Barriers(existing=sorted(set(request.barriers)), inserted=[], required=[]),
        launch=Launch(
            **launch_figures(request.profile, arena, naive, request.stated_base_alignment)
        ),
        solver=SolverInfo(name=name, proved_optimal=False, bound=0, gap=0.0, tried=[]),
        graph=GraphStats(buffers=len(placements), live_edges=0, hazard_edges=0, components=0),
        request_sha256=request_sha256(request),
    )


@dataclass
class Verdict:
    """The validators' verdict on one plan: every violation, by code and message."""

    valid: bool
    static: list[str] = field(default_factory=list)  # "code: message"
    emulated: list[str] = field(default_factory=list)
    emulation_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "static": self.static,
            "emulated": self.emulated,
            "emulation_run": self.emulation_run,
        }


def judge(request: PlanRequest, plan: Plan, *, emulation: bool = True) -> Verdict:
    """The static check, then (when asked) the CPU emulator on the same plan."""
    report = validate_plan(request, plan)
    static = [f"{v.code}: {v.message}" for v in report.violations]
    emulated: list[str] = []
    run = False
    if emulation:
        result = emulate(request, plan)
        run = True
        emulated = [f"{v.code}: {v.message}" for v in result.violations]
    return Verdict(
        valid=not static and not emulated, static=static, emulated=emulated, emulation_run=run
    )
