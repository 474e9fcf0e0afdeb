"""The HTTP endpoints: ``POST /plan`` and ``GET /healthz``."""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Annotated, Any, Literal, NoReturn

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

import planner
from api.errors import BODY, ErrorResponse
from api.settings import Settings
from planner.errors import RequestError
from planner.io import parse_request
from planner.models import Plan, PlanRequest

__all__ = ["VERSION", "Health", "get_settings", "router"]

try:
    VERSION = _dist_version("alloc-planner")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0+unknown"

router = APIRouter()


def get_settings(request: Request) -> Settings:
    """The settings ``create_app`` was built with."""
    settings = request.app.state.settings
    assert isinstance(settings, Settings)
    return settings


class Health(BaseModel):
    """Liveness answer."""

    status: Literal["ok"] = "ok"
    version: str


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Liveness: the service answers, and which version it is."""
    return Health(version=VERSION)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every ``#/$defs/X`` replaced by X itself.

    Embedded in an OpenAPI operation, ``#/$defs/...`` would resolve against the document root
    and break /docs; the request models are not recursive, so inlining terminates.
    """
    defs: dict[str, Any] = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: resolve(v) for k, v in node.items() if k != "$ref"}
                return {**resolve(defs[ref.removeprefix("#/$defs/")]), **rest}
            return {k: resolve(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


# DESIGN section 3's example; tests plan it, so the docs never show a request that fails.
PLAN_EXAMPLE: dict[str, Any] = {
    "name": "gemm_smem_epilogue",
    "target": "sm_90",
    "capacity": 232448,
    "alignment": 16,
    "block": [128, 1, 1],
    "grid": [132, 1, 1],
    "barriers": [4, 9],
    "buffers": [
        {
            "id": "A_s",
            "size": 8192,
            "start": 0,
            "end": 6,
            "alignment": 128,
            "accesses": [
                {
                    "op": "write",
                    "at": 1,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 4},
                },
                {
                    "op": "read",
                    "at": 3,
                    "bytes": 2,
                    "index": {"threadIdx.x": 32, "k": 1},
                    "loops": {"k": 32},
                },
            ],
        },
        {"id": "C_s", "size": 16384, "start": 6, "end": 9},
    ],
    "options": {"solver": "auto", "time_limit": 10.0, "sync": "insert"},
}

# The body is read raw (see post_plan), so FastAPI cannot derive its schema; declare it.
_PLAN_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A version-1 plan request (DESIGN section 3). Any content type is "
        "parsed as JSON.",
        "content": {
            "application/json": {
                "schema": _inline_refs(PlanRequest.model_json_schema()),
                "example": PLAN_EXAMPLE,
            }
        },
    }
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    413: {"model": ErrorResponse, "description": "The body exceeds the size limit."},
    422: {
        "model": ErrorResponse,
        "description": "Bad request: malformed JSON, a schema error or a semantic one; "
        "`loc` names the field, `input` holds the value.",
    },
    500: {"model": ErrorResponse, "description": "The plan failed the planner's own check."},
}


async def _read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        _refuse_size(int(declared), limit)
    chunks: list[bytes] = []
    size = 0  # bytes
    # Streamed, so a body without Content-Length cannot fill memory before it is refused.
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            _refuse_size(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _refuse_size(size: int, limit: int) -> NoReturn:
    msg = f"request body of at least {size} bytes exceeds the limit of {limit} bytes"
    detail = [{"loc": [BODY], "msg": msg, "type": "body_too_large", "input": None}]
    raise HTTPException(status_code=413, detail=detail)


def _plan_body(body: bytes, max_buffers: int) -> tuple[Plan, float]:
    """Parse and plan (CPU-bound, run in a worker thread); returns the plan and its ms."""
    started = time.perf_counter()
    request = parse_request(body, max_buffers=max_buffers)
    result = planner.plan(request, max_buffers=max_buffers)
    return result, (time.perf_counter() - started) * 1e3


@router.post(
    "/plan",
    response_model=Plan,
    responses=_ERRORS,
    openapi_extra=_PLAN_REQUEST_BODY,
    summary="Plan the offsets of a kernel's shared-memory buffers",
)
async def post_plan(
    request: Request, settings: Annotated[Settings, Depends(get_settings)]
) -> Response:
    """Plan a version-1 request; the body is the plan, byte for byte what the library gives."""
    body = await _read_body(request, settings.max_body_bytes)
    if not body.strip():
        # An empty body is a missing request, not malformed JSON: say so plainly.
        raise RequestError.field(
            (), "request body is empty; send a plan request as JSON", "missing", None
        )
    result, ms = await run_in_threadpool(_plan_body, body, settings.max_buffers)
    return Response(
        result.model_dump_json(),
        media_type="application/json",
        headers={"Server-Timing": f"plan;dur={ms:.3f}"},
    )
