"""OpenAPI pieces of the routes: request bodies read raw, examples, error answers.

The examples are real: the tests plan ``PLAN_EXAMPLE`` and check that the service answers
``PLAN_RESPONSE_EXAMPLE``, and that ``CHECK_PLAN_EXAMPLE`` passes the check.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from planner.api.errors import ErrorResponse
from planner.api.service import CheckBody, EmitBody
from planner.core.models import PlanRequest
from planner.core.models.sweep import SweepRequest

__all__ = [
    "BODY_MODELS",
    "CHECK_BODY",
    "CHECK_PLAN_EXAMPLE",
    "CHECK_REQUEST_EXAMPLE",
    "EMIT_BODY",
    "PLAN_BODY",
    "PLAN_EXAMPLE",
    "PLAN_RESPONSE_EXAMPLE",
    "SWEEP_BODY",
    "add_body_schemas",
    "body_components",
    "check_responses",
    "emit_responses",
    "example_responses",
    "plan_responses",
    "simple_responses",
    "sweep_responses",
]


# The example of docs/design.md, Wire format; tests plan it, so the docs never show a
# request that fails.
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

PLAN_RESPONSE_EXAMPLE: dict[str, Any] = {
    "name": "gemm_smem_epilogue",
    "status": "optimal",
    "arena_bytes": 16384,
    "lower_bound": 16384,
    "naive_bytes": 24576,
    "capacity": 232448,
    "placements": [
        {"id": "A_s", "offset": 0, "size": 8192, "memory": "shared"},
        {"id": "C_s", "offset": 0, "size": 16384, "memory": "shared"},
    ],
    "barriers": {"existing": [4, 9], "inserted": [], "required": [4]},
    "spilled": [],
    "global_bytes": 0,
    "footprints": [],
    "launch": {
        "dynamic_smem_bytes": 16384,
        "requires_opt_in": False,
        "blocks_per_sm": 13,
        "naive_blocks_per_sm": 9,
    },
    "solver": {
        "name": "greedy:size/best-fit",
        "proved_optimal": True,
        "bound": 16384,
        "gap": 0.0,
        "tried": [{"name": "greedy:size/best-fit", "arena_bytes": 16384}],
        "stopped": "proved",
    },
    "graph": {"buffers": 2, "live_edges": 0, "hazard_edges": 0, "components": 2},
    "diagnostics": [],
    "certificate": None,
    "request_sha256": "0422dd2925f1a68d53512fc2e21462841ddbdb6a8d38151e8f01459b91127226",
    "aliases": [],
    "pareto": [],
}

CHECK_REQUEST_EXAMPLE: dict[str, Any] = {
    "name": "two_phase",
    "alignment": 16,
    "barriers": [4],
    "buffers": [
        {"id": "a", "size": 64, "start": 0, "end": 4},
        {"id": "b", "size": 64, "start": 4, "end": 8},
    ],
    "options": {"sync": "existing"},
}

CHECK_PLAN_EXAMPLE: dict[str, Any] = {
    "name": "two_phase",
    "status": "optimal",
    "arena_bytes": 64,
    "lower_bound": 64,
    "naive_bytes": 128,
    "capacity": None,
    "placements": [
        {"id": "a", "offset": 0, "size": 64, "memory": "shared"},
        {"id": "b", "offset": 0, "size": 64, "memory": "shared"},
    ],
    "barriers": {"existing": [4], "inserted": [], "required": [4]},
    "spilled": [],
    "footprints": [],
    "launch": {"dynamic_smem_bytes": 64, "requires_opt_in": False, "blocks_per_sm": None},
    "solver": {
        "name": "greedy:size/best-fit",
        "proved_optimal": True,
        "bound": 64,
        "gap": 0.0,
        "tried": [{"name": "greedy:size/best-fit", "arena_bytes": 64}],
        "stopped": "proved",
    },
    "graph": {"buffers": 2, "live_edges": 0, "hazard_edges": 0, "components": 2},
    "diagnostics": [],
    "certificate": None,
    "request_sha256": "aa0ee751dabfece164e3606a426e09ac720262ae0d72316b0d11fde8551b7c1e",
}

# The raw-read bodies: FastAPI cannot derive their schema, so it is declared here, each a
# named component (PlanRequest, CheckBody, EmitBody, SweepRequest) beside the models it holds.
BODY_MODELS: tuple[type[BaseModel], ...] = (PlanRequest, CheckBody, EmitBody, SweepRequest)


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def body_components() -> dict[str, Any]:
    """The schemas of the raw-read bodies and of every model they hold, by name, as
    ``components/schemas`` holds them."""
    out: dict[str, Any] = {}
    for model in BODY_MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def add_body_schemas(app: FastAPI) -> None:
    """Put ``body_components`` into the app's OpenAPI document (a component FastAPI already
    made from a response model keeps its own schema)."""
    made = app.openapi

    def openapi() -> dict[str, Any]:
        document = made()
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in body_components().items():
            schemas.setdefault(name, schema)
        return document

    app.openapi = openapi  # type: ignore[method-assign]


PLAN_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A version-1 plan request (docs/design.md, Wire format), sent as "
        "`application/json` (or `application/*+json`); other content types are refused "
        "with 415.",
        "content": {
            "application/json": {
                "schema": _ref(PlanRequest),
                "example": PLAN_EXAMPLE,
            }
        },
    }
}

CHECK_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A request, a plan for it, and whether to run the CPU emulator too.",
        "content": {
            "application/json": {
                "schema": _ref(CheckBody),
                "example": {
                    "request": CHECK_REQUEST_EXAMPLE,
                    "plan": CHECK_PLAN_EXAMPLE,
                    "emulate": False,
                },
            }
        },
    }
}

EMIT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A request and a plan of it; the plan must pass the static check.",
        "content": {
            "application/json": {
                "schema": _ref(EmitBody),
                "example": {"request": CHECK_REQUEST_EXAMPLE, "plan": CHECK_PLAN_EXAMPLE},
            }
        },
    }
}

SWEEP_EXAMPLE: dict[str, Any] = {
    "request": {
        "name": "matmul",
        "alignment": 128,
        "params": {
            "BLOCK_M": {"values": [64, 128]},
            "BLOCK_K": {"values": [32, 64]},
            "STAGES": {"min": 2, "max": 4},
        },
        "buffers": [
            {"id": "A", "size": "STAGES * BLOCK_M * BLOCK_K * 2", "start": 0, "end": 2},
            {"id": "B", "size": "STAGES * BLOCK_K * 128 * 2", "start": 0, "end": 2},
            {"id": "C", "size": "BLOCK_M * 128 * 4", "start": 2, "end": 3},
        ],
        "barriers": [2],
        "options": {"sync": "existing"},
    },
    "product": {"BLOCK_M": [128]},
    "targets": ["sm_80", "sm_90"],
}

SWEEP_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A request with params (docs/design.md, Parameters), the "
        "configurations (a list or a product) and the targets (docs/sweeps.md).",
        "content": {"application/json": {"schema": _ref(SweepRequest), "example": SWEEP_EXAMPLE}},
    }
}

_HEADERS = {
    "X-Request-ID": {
        "description": "The request's id: the caller's X-Request-ID if given, else a new one.",
        "schema": {"type": "string"},
    },
}
_SERVER_TIMING = {
    "Server-Timing": {
        "description": "`plan;dur=<ms>` for a plan computed now, `cache;dur=<ms>` for one "
        "served from the cache.",
        "schema": {"type": "string"},
    }
}
_CACHE = {
    "X-Plan-Cache": {
        "description": "`hit` when the plan came from the cache, `miss` when it was computed.",
        "schema": {"type": "string", "enum": ["hit", "miss"]},
    }
}
_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "string"}}
}


def _errors(*, with_body: bool) -> dict[int | str, dict[str, Any]]:
    errors: dict[int | str, dict[str, Any]] = {
        503: {
            "model": ErrorResponse,
            "description": "Overloaded: the solver queue is full (`queue_full`), the request "
            "passed its deadline (`deadline_exceeded`) or its solver process died "
            "(`worker_died`); retry after `Retry-After` seconds.",
            "headers": {**_HEADERS, **_RETRY_AFTER},
        },
    }
    if with_body:
        errors[413] = {
            "model": ErrorResponse,
            "description": "The body exceeds the size limit; the message names both.",
            "headers": _HEADERS,
        }
        errors[415] = {
            "model": ErrorResponse,
            "description": "The body is not declared JSON: the message names the "
            "Content-Type sent.",
            "headers": _HEADERS,
        }
        errors[422] = {
            "model": ErrorResponse,
            "description": "Bad request: malformed JSON, a schema error, a semantic one or a "
            "limit; `loc` names the field, `input` holds the value (a long one cut to 200 "
            "characters and its length).",
            "headers": _HEADERS,
        }
    errors[500] = {
        "model": ErrorResponse,
        "description": "The plan failed the planner's own check (`internal_error`), the "
        "service ran out of memory (`out_of_memory`), or another failure (`server_error`).",
        "headers": _HEADERS,
    }
    return errors


def plan_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of ``POST /plan``: the plan with its headers, and every error."""
    return {
        200: {
            "description": "The plan, byte for byte what `planner.plan` gives for the request "
            "(its time limit capped by the server's maximum).",
            "headers": {**_HEADERS, **_CACHE, **_SERVER_TIMING},
            "content": {"application/json": {"example": PLAN_RESPONSE_EXAMPLE}},
        },
        **_errors(with_body=True),
    }


def check_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of ``POST /validate``: the report, and every error."""
    return {
        200: {
            "description": "Every violation the static check (and the emulator, when asked) "
            "found; `valid` when there is none.",
            "headers": _HEADERS,
            "content": {
                "application/json": {
                    "example": {
                        "valid": True,
                        "static": {"valid": True, "violations": [], "truncated": False},
                        "emulator": None,
                    }
                }
            },
        },
        **_errors(with_body=True),
    }


def emit_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of ``POST /emit/{kind}``: the text, and every error."""
    return {
        200: {
            "description": "CUDA C++ (`text/x-cuda`), MLIR (`text/plain`) or SVG.",
            "headers": _HEADERS,
            "content": {
                "text/x-cuda": {"schema": {"type": "string"}},
                "text/plain": {"schema": {"type": "string"}},
                "image/svg+xml": {"schema": {"type": "string"}},
            },
        },
        **_errors(with_body=True),
    }


def example_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of ``GET /examples/{name}``: the request as shipped, or why not."""
    return {
        200: {
            "description": "The example request, byte for byte as shipped.",
            "headers": _HEADERS,
            "content": {"application/json": {"schema": _ref(PlanRequest)}},
        },
        404: {
            "model": ErrorResponse,
            "description": "No example has that name (`not_found`); `GET /examples` lists them.",
            "headers": _HEADERS,
        },
        422: {
            "model": ErrorResponse,
            "description": "The name is no file name: letters, digits, `_`, `-` and `.` only.",
            "headers": _HEADERS,
        },
    }


def sweep_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of ``POST /sweep``: one answer per configuration, and every error."""
    return {
        200: {
            "description": "Per configuration: the arena, the lower bound, and per target "
            "whether it fits and the occupancy; byte for byte what `planner.sweep` gives.",
            "headers": _HEADERS,
        },
        **_errors(with_body=True),
    }


def simple_responses() -> dict[int | str, dict[str, Any]]:
    """The answers of a GET endpoint: only 200, with the request id."""
    return {200: {"description": "OK", "headers": _HEADERS}}
