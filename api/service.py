"""What one app holds (settings, solver pool, plan cache, metrics) and the work the routes
hand to the pool: parsing, planning, checking and emitting, all CPU-bound."""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

import planner
from planner.api.cache import PlanCache
from planner.api.emulation import emulate
from planner.api.limits import (
    cap_time_limit,
    check_element_count,
    check_emulation_budget,
    check_emulation_span,
)
from planner.api.metrics import Metrics
from planner.api.pool import SolverPool
from planner.api.settings import Settings
from planner.client import CheckReport
from planner.core.errors import RequestError
from planner.core.io import parse_model, parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit import EMITTERS
from planner.pipeline.warm import ensure_warm

__all__ = [
    "CheckBody",
    "EmitBody",
    "Service",
    "Solved",
    "check",
    "check_limits",
    "emit",
    "parse_capped",
    "parse_check",
    "parses_inline",
    "solve",
    "warm_up",
]

INLINE_PARSE_BYTES = 64 << 10  # bodies up to this are parsed on the event loop (< 1 ms)...
# ...when they hold at most this many JSON objects: a body of 20 000 empty objects is 64 KiB,
# and its 80 000 field errors take pydantic half a second to list.
INLINE_PARSE_OBJECTS = 512
CHECK_ARRAYS = (("request", "buffers"), ("plan", "placements"))  # counted before validation


def parses_inline(body: bytes) -> bool:
    """Whether parsing ``body`` is cheap enough for the event loop, whatever it holds."""
    return len(body) <= INLINE_PARSE_BYTES and body.count(b"{") <= INLINE_PARSE_OBJECTS


def warm_up() -> None:
    """Load the compiled kernels and the exact solvers now (~0.3 s, or seconds to build them
    after a fresh install), not in a compiler's first request."""
    ensure_warm(planner.plan)


@dataclass
class Service:
    """The per-app state the routes share."""

    settings: Settings
    pool: SolverPool
    cache: PlanCache
    metrics: Metrics

    @classmethod
    def create(cls, settings: Settings) -> Service:
        """Fresh pool, cache and metrics sized by ``settings``."""
        return cls(
            settings=settings,
            pool=SolverPool(
                settings.solver_workers,
                settings.queue_size,
                settings.solver_pool,
                initializer=warm_up,
                pin=settings.pin_workers,
                max_rss=settings.worker_max_rss,
            ),
            cache=PlanCache(settings.cache_size, settings.cache_bytes),
            metrics=Metrics(),
        )


@dataclass(frozen=True)
class Solved:
    """A plan as the wire carries it, and what the metrics want to know about it."""

    body: bytes  # the plan's JSON
    key: str  # its request_sha256
    status: str
    solver: str
    seconds: float


def parse_capped(body: bytes, settings: Settings) -> PlanRequest:
    """The request in ``body`` with its time limit capped by the server's maximum; its
    buffers are counted before any is validated."""
    check_element_count(body, settings.max_buffers)
    request = parse_request(body, max_buffers=settings.max_buffers)
    return cap_time_limit(request, settings.max_time_limit)


def solve(request: PlanRequest | bytes, settings: Settings) -> Solved:
    """Parse (when given bytes) and plan; runs on a solver thread."""
    started = time.perf_counter()
    if isinstance(request, bytes):
        request = parse_capped(request, settings)
    result = planner.plan(request, max_buffers=settings.max_buffers)
    return Solved(
        body=result.model_dump_json().encode(),
        key=result.request_sha256,
        status=result.status,
        solver=result.solver.name,
        seconds=time.perf_counter() - started,
    )


def sweep_body(body: bytes, settings: Settings) -> bytes:
    """Parse a ``/sweep`` body and answer it (``planner.sweep``); runs on a solver thread.
    Each configuration's request is held to the server's buffer limit."""
    from planner.core.models.sweep import SweepRequest
    from planner.sweeps import run_sweep

    check_element_count(body, settings.max_buffers, (("request", "buffers"),))
    return run_sweep(parse_model(SweepRequest, body)).model_dump_json().encode()


class CheckBody(BaseModel):
    """The body of ``POST /validate``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: PlanRequest = Field(description="The request the plan is for.")
    plan: Plan = Field(description="The plan to check.")
    emulate: bool = Field(
        default=False, description="Also run the CPU emulator on the kernel's accesses."
    )


class EmitBody(BaseModel):
    """The body of ``POST /emit/{kind}``: a request and a plan of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: PlanRequest = Field(description="The request the plan is for.")
    plan: Plan = Field(description="The plan to print; it must pass the static check.")


def parse_check(body: bytes | CheckBody, settings: Settings) -> CheckBody:
    """A ``/validate`` body, parsed and within the limits (``check_limits``)."""
    if isinstance(body, CheckBody):
        parsed = body
    else:
        check_element_count(body, settings.max_buffers, CHECK_ARRAYS)
        parsed = parse_model(CheckBody, body, context={"max_buffers": settings.max_buffers})
    check_limits(parsed, settings)
    return parsed


def check_limits(parsed: CheckBody, settings: Settings) -> None:
    """Raise ``RequestError`` when emulating ``parsed`` would pass the service's budgets:
    before any emulation starts."""
    if parsed.emulate:
        check_emulation_span(parsed.request, parsed.plan)
        check_emulation_budget(parsed.request, parsed.plan, settings.max_access_instances)


def check(body: bytes | CheckBody, settings: Settings) -> CheckReport:
    """Parse a ``/validate`` body (unless given parsed) and run the static check, then the
    emulator if asked."""
    parsed = parse_check(body, settings)
    static = planner.validate(parsed.request, parsed.plan)
    emulated = emulate(parsed.request, parsed.plan) if parsed.emulate else None
    valid = static.valid and (emulated is None or emulated.valid)
    return CheckReport(valid=valid, static=static, emulator=emulated)


def emit(body: bytes, kind: str, settings: Settings) -> str:
    """Parse an ``/emit`` body, check the plan against the request (so the text describes a
    safe plan) and write it as ``kind``: CUDA, MLIR or SVG."""
    parsed = parse_model(EmitBody, body, context={"max_buffers": settings.max_buffers})
    report = planner.validate(parsed.request, parsed.plan)
    if not report.valid:
        first = report.violations[0]
        raise RequestError.field(
            ("plan",),
            f"the plan fails the static check against the request: {first.code}: {first.message}",
            "invalid_plan",
            None,
        )
    return EMITTERS[kind](parsed.request, parsed.plan)
