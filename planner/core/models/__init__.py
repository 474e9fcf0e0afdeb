"""Data types: the request and the plan (docs/design.md, Wire format)."""

from planner.core.models.control import MAX_LOOP_DEPTH, MAX_PATHS, UNKNOWN_TRIPS
from planner.core.models.plan import (
    Barriers,
    Certificate,
    Diagnostic,
    Footprint,
    GraphStats,
    Inval,
    Launch,
    ParetoPoint,
    Placement,
    Plan,
    SolverAttempt,
    SolverInfo,
    Status,
)
from planner.core.models.report import ValidationReport, Violation, ViolationCode
from planner.core.models.request import (
    DEFAULT_MAX_BUFFERS,
    MAX_POINT,
    MAX_SIZE,
    Access,
    Branch,
    Buffer,
    Loop,
    Options,
    PlanRequest,
)
from planner.core.models.sync import Sync

__all__ = [
    "DEFAULT_MAX_BUFFERS",
    "MAX_LOOP_DEPTH",
    "MAX_PATHS",
    "MAX_POINT",
    "MAX_SIZE",
    "UNKNOWN_TRIPS",
    "Access",
    "Barriers",
    "Branch",
    "Buffer",
    "Certificate",
    "Diagnostic",
    "Footprint",
    "GraphStats",
    "Inval",
    "Launch",
    "Loop",
    "Options",
    "ParetoPoint",
    "Placement",
    "Plan",
    "PlanRequest",
    "SolverAttempt",
    "SolverInfo",
    "Status",
    "Sync",
    "ValidationReport",
    "Violation",
    "ViolationCode",
]
