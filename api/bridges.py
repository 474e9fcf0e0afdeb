"""The bridges over HTTP (docs/bridges.md): ``POST /mlir``, an MLIR module in, the module
rewritten onto one planned arena out, with each kernel's plan; ``POST /triton``, a Triton
kernel's TTGIR in, Triton's own plan judged and ours beside it. Each needs its extra on the
server (``mlir``, ``triton``): without it the answer is 501 naming the extra."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.api.body import read_body
from planner.api.routes import ServiceDep
from planner.api.settings import Settings
from planner.core.errors import RequestError
from planner.core.models import Plan

__all__ = [
    "MlirAnswer",
    "MlirBody",
    "MlirKernel",
    "TritonAnswer",
    "TritonBody",
    "TritonVerdict",
    "router",
]

router = APIRouter()

_EXAMPLE_MODULE = """module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%out: memref<64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      %a = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
      %b = memref.alloc() : memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %f, %a[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %x = memref.load %a[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %x, %b[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      %y = memref.load %b[%c0] : memref<64xf32, #gpu.address_space<workgroup>>
      memref.store %y, %out[%c0] : memref<64xf32>
      gpu.return
    }
  }
}
"""


class MlirBody(BaseModel):
    """An MLIR module (text) whose kernels' workgroup buffers are to be planned."""

    model_config = ConfigDict(extra="forbid")

    module: str = Field(
        min_length=1,
        description="The module as MLIR text: gpu.func kernels, or func.func kernels inside a "
        "gpu.module or an IREE executable, with memref.alloc/alloca in "
        "#gpu.address_space<workgroup>.",
    )
    target: str | None = Field(
        default=None,
        description='Device profile for the capacity and launch figures (e.g. "sm_80"). '
        "Default: the one the module names, if any.",
    )
    time_limit: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="Seconds each kernel's plan may take (capped by the service's limit). "
        "Default 5.",
    )


class MlirKernel(BaseModel):
    """One kernel function of the module."""

    name: str = Field(description="The function's symbol.")
    status: str = Field(
        description='"rewritten" (planned and rewritten), "unchanged" (no workgroup buffer) '
        'or "skipped" (left as it was; reason says why).'
    )
    reason: str | None = Field(
        default=None, description="Why the function was left as it was, naming the operation."
    )
    buffers: int = Field(description="Workgroup buffers planned.")
    compiler_bytes: int = Field(description="Bytes of the buffers as the module allocated them.")
    arena_bytes: int = Field(description="Bytes of the planned arena (dynamic shared memory).")
    lower_bound: int = Field(description="Bytes no plan of these buffers can do with.")
    barriers_existing: int = Field(description="gpu.barrier operations the kernel had.")
    barriers_inserted: int = Field(description="gpu.barrier operations the rewrite added.")
    plan: Plan | None = Field(default=None, description="The plan, when one was made.")


class MlirAnswer(BaseModel):
    """The rewritten module and each kernel's result."""

    module: str = Field(description="The module, rewritten where a kernel was planned.")
    kernels: list[MlirKernel] = Field(description="Every kernel function, in module order.")


def mlir_job(body: bytes, settings: Settings) -> MlirAnswer:
    """Parse the body, plan and rewrite its module; runs on a solver worker."""
    from planner.bridges.mlir import plan_module

    try:
        parsed = MlirBody.model_validate_json(body)
    except ValidationError as exc:
        raise RequestError.from_validation(exc) from None
    limit = min(parsed.time_limit, settings.max_time_limit)
    result = plan_module(parsed.module, target=parsed.target, time_limit=limit)
    kernels = []
    for k in result.kernels:
        fields: dict[str, Any] = k.as_dict()
        fields.pop("request")
        fields["plan"] = k.plan
        kernels.append(MlirKernel(**fields))
    return MlirAnswer(module=result.module, kernels=kernels)


@router.post(
    "/mlir",
    summary="Plan the workgroup buffers of an MLIR module and rewrite it onto one arena",
    response_model=MlirAnswer,
    responses={
        422: {"description": "The body or its module is invalid; the errors name the field."},
        501: {"description": "The server lacks the mlir extra (iree-base-compiler)."},
        503: {"description": "The solver queue is full or the request timed out."},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The module and how to plan it, as application/json.",
            "content": {
                "application/json": {
                    "schema": MlirBody.model_json_schema(),
                    "example": {"module": _EXAMPLE_MODULE, "target": "sm_80"},
                }
            },
        }
    },
)
async def post_mlir(request: Request, service: ServiceDep) -> Response:
    """Each kernel the bridge reads exactly is planned and rewritten (one
    ``gpu.dynamic_shared_memory``, a ``memref.view`` per buffer, barriers the plan needs);
    any other is left as it was, with the reason."""
    from planner.bridges._plans import need

    need("mlir", "POST /mlir")
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    answer = await service.pool.run(
        settings.request_timeout,
        mlir_job,
        body,
        settings,
        cancelled=request.is_disconnected,
        large=True,
    )
    return Response(answer.model_dump_json(), media_type="application/json")


class TritonBody(BaseModel):
    """A Triton kernel's TTGIR and the CUDA target it was compiled for."""

    model_config = ConfigDict(extra="forbid")

    ttgir: str = Field(
        min_length=1,
        description="The kernel's TTGIR as Triton prints it before lowering (asm['ttgir']).",
    )
    target: str = Field(description='The CUDA target, e.g. "sm_80" or "cuda:90".')
    emulate: bool = Field(
        default=True, description="Also run the CPU emulator on Triton's plan. Default true."
    )
    time_limit: float = Field(
        default=5.0,
        gt=0,
        le=3600,
        description="Seconds our plan may take (capped by the service's limit). Default 5.",
    )


class TritonVerdict(BaseModel):
    """The validators' verdict on Triton's plan."""

    valid: bool = Field(description="True when neither validator finds a violation.")
    static: list[str] = Field(description='The static check\'s violations, "code: message".')
    emulated: list[str] = Field(description="The emulator's races and clobbers.")
    emulation_run: bool = Field(description="Whether the emulator ran.")


class TritonAnswer(BaseModel):
    """Triton's plan of one kernel, judged, and ours of the same request."""

    name: str = Field(description="The kernel's name.")
    target: str = Field(description="The target as given.")
    modeled: bool = Field(description="False when the bridge cannot model the kernel exactly.")
    reason: str | None = Field(default=None, description="Why the kernel is not modelled.")
    buffers: int = Field(description="Shared buffers: local_alloc results and scratch.")
    triton_bytes: int = Field(description="Shared memory Triton gives the kernel (ttg.shared).")
    triton_barriers: int = Field(description="Barrier operations after Triton's barrier pass.")
    triton_verdict: TritonVerdict | None = Field(
        default=None, description="The validators' verdict on Triton's plan."
    )
    ours_bytes: int | None = Field(
        default=None, description="Our arena for the same request, Triton's barriers kept."
    )
    ours_inserted: int | None = Field(
        default=None, description="Barriers our plan adds to Triton's."
    )
    lower_bound: int | None = Field(default=None, description="Bytes no plan can do with.")
    alone_bytes: int | None = Field(
        default=None, description="Our arena without Triton's barrier pass at all."
    )
    alone_barriers: int | None = Field(
        default=None, description="Barriers that plan needs for reuse between buffers."
    )
    notes: list[str] = Field(description="What the reader assumed, e.g. about async copies.")


def triton_job(body: bytes, settings: Settings) -> TritonAnswer:
    """Parse the body and check Triton's plan of its kernel; runs on a solver worker."""
    from planner.bridges.triton import check_ttgir

    try:
        parsed = TritonBody.model_validate_json(body)
    except ValidationError as exc:
        raise RequestError.from_validation(exc) from None
    limit = min(parsed.time_limit, settings.max_time_limit)
    report = check_ttgir(parsed.ttgir, parsed.target, time_limit=limit, emulation=parsed.emulate)
    return TritonAnswer.model_validate(report.as_dict())


@router.post(
    "/triton",
    summary="Check Triton's shared-memory plan of a kernel and plan the same request",
    response_model=TritonAnswer,
    responses={
        422: {"description": "The body, its TTGIR or its target is invalid."},
        501: {"description": "The server lacks the triton extra."},
        503: {"description": "The solver queue is full or the request timed out."},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The TTGIR and its target, as application/json.",
            "content": {"application/json": {"schema": TritonBody.model_json_schema()}},
        }
    },
)
async def post_triton(request: Request, service: ServiceDep) -> Response:
    """Triton's offsets and barriers judged by the static validator and the emulator; a
    kernel the bridge cannot model exactly is reported as such, never guessed."""
    from planner.bridges._plans import need

    need("triton", "POST /triton")
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    answer = await service.pool.run(
        settings.request_timeout,
        triton_job,
        body,
        settings,
        cancelled=request.is_disconnected,
        large=True,
    )
    return Response(answer.model_dump_json(), media_type="application/json")
