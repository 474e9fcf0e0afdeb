"""The HTTP endpoints: ``POST /plan``, ``POST /sweep``, ``POST /validate``, ``GET /healthz``,
``GET /targets``, ``GET /metrics``.

What a request can be refused for (its content type, its size, its buffer count, its
emulation budget) is refused here, on the event loop, before it is queued for a worker.
"""

from __future__ import annotations

import hashlib
import time
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field

from planner.api.body import read_body
from planner.api.docs import (
    CHECK_BODY,
    PLAN_BODY,
    PLAN_EXAMPLE,
    SWEEP_BODY,
    check_responses,
    plan_responses,
    simple_responses,
    sweep_responses,
)
from planner.api.limits import check_buffer_count
from planner.api.service import (
    CheckBody,
    Service,
    check,
    parse_capped,
    parse_check,
    parses_inline,
    solve,
    sweep_body,
)
from planner.api.settings import Settings
from planner.client import CheckReport
from planner.core.install import available
from planner.core.io import request_sha256
from planner.core.models import Plan, PlanRequest
from planner.core.models.sweep import SweepResult
from planner.core.targets import STATIC_SMEM_LIMIT, TARGETS

__all__ = ["PLAN_EXAMPLE", "VERSION", "Health", "Target", "get_service", "get_settings", "router"]

try:
    VERSION = _dist_version("alloc-planner")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"

router = APIRouter()


async def get_service(request: Request) -> Service:
    """The pool, cache, metrics and settings ``create_app`` built (async: FastAPI would run
    a plain function on a worker thread, a hop per request)."""
    service = request.app.state.service
    assert isinstance(service, Service)
    return service


async def get_settings(request: Request) -> Settings:
    """The settings ``create_app`` was built with."""
    return (await get_service(request)).settings


ServiceDep = Annotated[Service, Depends(get_service)]


EXTRAS = ("exact", "gpu", "compare", "mlir", "triton")  # optional parts /healthz reports


class Health(BaseModel):
    """Liveness answer."""

    status: Literal["ok"] = Field(default="ok", description='Always "ok" when answered.')
    version: str = Field(description="The installed version of the planner.")
    extras: list[str] = Field(
        description='Optional parts installed: "exact" (CP-SAT), "gpu" (the CUDA harness), '
        '"compare" (the bench\'s side-by-side allocators), "mlir" (POST /mlir), "triton" '
        "(planner triton)."
    )


class Target(BaseModel):
    """One device profile (docs/design.md, Device profiles); bytes unless named otherwise."""

    name: str = Field(description='The name a request\'s "target" gives, e.g. "sm_90".')
    devices: str = Field(description="The devices of this profile.")
    max_smem_per_block: int = Field(description="Dynamic shared memory per block, opt-in.")
    smem_per_sm: int = Field(description="Shared memory per multiprocessor.")
    reserved_per_block: int = Field(description="Bytes the system reserves per block.")
    max_blocks_per_sm: int = Field(description="Resident blocks per multiprocessor at most.")
    static_smem_limit: int = Field(
        description="Above this a kernel needs dynamic shared memory and the opt-in."
    )
    base_alignment: int = Field(
        description="Largest alignment of the dynamic shared-memory base a plan may assume."
    )
    vendor: str = Field(description='"nvidia" or "amd".')
    tma: bool = Field(description="Whether the device has TMA (swizzled tensor tiles).")


@router.get("/healthz", response_model=Health, responses=simple_responses())
async def healthz() -> Health:
    """Liveness: the service answers, and which version it is."""
    return Health(version=VERSION, extras=[x for x in EXTRAS if available(x)])


@router.get("/targets", response_model=list[Target], responses=simple_responses())
async def targets() -> list[Target]:
    """The device profiles a request's ``target`` may name, with their shared-memory limits."""
    return [
        Target(
            name=p.name,
            devices=p.devices,
            max_smem_per_block=p.max_smem_per_block,
            smem_per_sm=p.smem_per_sm,
            reserved_per_block=p.reserved_per_block,
            max_blocks_per_sm=p.max_blocks_per_sm,
            static_smem_limit=STATIC_SMEM_LIMIT,
            base_alignment=p.base_alignment,
            vendor=p.vendor,
            tma=p.tma,
        )
        for p in TARGETS.values()
    ]


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format.",
            "content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            **simple_responses()[200],
        }
    },
)
async def metrics(service: ServiceDep) -> Response:
    """Requests by route and status, latency, solver outcomes and time, cache, pool."""
    service.metrics.pool_admitted.set(service.pool.admitted)
    return Response(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)


@router.post(
    "/plan",
    response_model=Plan,
    responses=plan_responses(),
    openapi_extra=PLAN_BODY,
    summary="Plan the offsets of a kernel's shared-memory buffers",
)
async def post_plan(request: Request, service: ServiceDep) -> Response:
    """Plan a version-1 request; the body is the plan, byte for byte what the library gives.

    Repeats are served from a cache keyed by ``request_sha256`` (``X-Plan-Cache: hit``).
    """
    started = time.perf_counter()
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    digest = hashlib.blake2b(body, digest_size=32).digest()
    key = service.cache.key_of(digest)  # a byte-identical repeat is found without parsing
    cached = service.cache.get(key) if key is not None else None
    job: bytes | PlanRequest = body  # a worker process parses the bytes (faster than a pickle)
    if cached is None and parses_inline(body):
        parsed = parse_capped(body, settings)
        key = request_sha256(parsed)
        service.cache.link(digest, key)
        cached = service.cache.get(key)
        if service.pool.kind == "threads":
            job = parsed
    elif cached is None:
        # Parsing a large body (or one of many objects, each of which may be an error) takes
        # long enough to stall the event loop: a worker does it. A scan of the bytes refuses
        # one that surely has too many buffers first.
        check_buffer_count(body, settings.max_buffers)
    service.metrics.cache.labels("hit" if cached is not None else "miss").inc()
    if cached is not None:
        ms = (time.perf_counter() - started) * 1e3
        return _plan_response(cached, "hit", f"cache;dur={ms:.3f}")
    solved = await service.pool.run(
        settings.request_timeout,
        solve,
        job,
        settings,
        cancelled=request.is_disconnected,
        large=not parses_inline(body),
    )
    service.cache.link(digest, solved.key)
    service.metrics.solves.labels(solved.status, solved.solver).inc()
    service.metrics.solve_time.observe(solved.seconds)
    service.cache.put(solved.key, solved.body)
    return _plan_response(solved.body, "miss", f"plan;dur={solved.seconds * 1e3:.3f}")


def _plan_response(body: bytes, cache: str, timing: str) -> Response:
    headers = {"X-Plan-Cache": cache, "Server-Timing": timing}
    return Response(body, media_type="application/json", headers=headers)


@router.post(
    "/validate",
    response_model=CheckReport,
    responses=check_responses(),
    openapi_extra=CHECK_BODY,
    summary="Check a plan: every violation, statically and (optionally) by emulation",
)
async def post_validate(request: Request, service: ServiceDep) -> Response:
    """The static check of a plan for a request (docs/design.md, Static check) and, with
    ``"emulate": true``, the CPU emulator's run of the kernel's accesses; every violation."""
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    job: bytes | CheckBody = body
    if parses_inline(body):
        # Small enough to parse here: its limits (buffers, emulation budget) are refused
        # before it is queued. A larger body is checked by the worker, before it emulates.
        parsed = parse_check(body, settings)
        job = body if service.pool.kind == "processes" else parsed
    report = await service.pool.run(
        settings.request_timeout,
        check,
        job,
        settings,
        cancelled=request.is_disconnected,
        large=not parses_inline(body),
    )
    return Response(report.model_dump_json(), media_type="application/json")


@router.post(
    "/sweep",
    response_model=SweepResult,
    responses=sweep_responses(),
    openapi_extra=SWEEP_BODY,
    summary="Answer a request with parameters for many configurations and targets",
)
async def post_sweep(request: Request, service: ServiceDep) -> Response:
    """Per configuration of a request with parameters, on each target: fits or not, the
    arena, the lower bound, the occupancy, and the plan when asked (docs/sweeps.md)."""
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    answer = await service.pool.run(
        settings.request_timeout,
        sweep_body,
        body,
        settings,
        cancelled=request.is_disconnected,
        large=True,
    )
    return Response(answer, media_type="application/json")
