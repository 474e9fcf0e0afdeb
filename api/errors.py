"""Planner errors as HTTP answers, all in FastAPI's ``{"detail": [...]}`` shape.

Each error class maps to one status: ``RequestError`` (and ``FormatError``) to 422, every
other ``PlannerError`` (``InternalError``) to 500, the pool's ``OverloadedError`` (a full
queue, a deadline passed, a solver process that died mid-request) to 503 with ``Retry-After``
and its reason as the error ``type``, a ``MemoryError`` (on the event loop or in a worker) to
500 ``out_of_memory``. A body over the size limit is a 413 and one not declared JSON a 415, both
raised where the body is read; any other exception is a 500 ``server_error``
(``api.middleware``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response
from pydantic import BaseModel

from planner.api.pool import OverloadedError
from planner.core.errors import FieldError, PlannerError, RequestError

__all__ = ["ErrorDetail", "ErrorResponse", "error_body", "register_exception_handlers"]

BODY = "body"  # FastAPI's loc prefix for errors in the request body


class ErrorDetail(BaseModel):
    """One error: where (``loc``), what (``msg``), its stable ``type``, and the bad value."""

    loc: list[str | int]
    msg: str
    type: str
    input: Any = None


class ErrorResponse(BaseModel):
    """The body of every 4xx/5xx answer, as FastAPI writes request validation errors."""

    detail: list[ErrorDetail]


def _field_errors(
    errors: list[FieldError], prefix: tuple[str | int, ...] = (BODY,)
) -> ErrorResponse:
    """The planner's field errors with ``loc`` under ``prefix``; ``input`` always present."""
    return ErrorResponse(
        detail=[
            ErrorDetail(
                loc=[*prefix, *err.get("loc", ())],
                msg=str(err.get("msg", "invalid")),
                type=str(err.get("type", "value_error")),
                input=err.get("input"),
            )
            for err in errors
        ]
    )


def _json(body: ErrorResponse, status_code: int) -> Response:
    # pydantic, not JSONResponse: pydantic's JSON parser accepts NaN, so an echoed input may be
    # NaN, which json.dumps(allow_nan=False) refuses and pydantic writes as null.
    return Response(
        body.model_dump_json(exclude_unset=True),
        status_code=status_code,
        media_type="application/json",
    )


def error_body(type_: str, msg: str) -> bytes:
    """A one-error ``detail`` body, for answers made outside a handler."""
    detail = ErrorDetail(loc=[], msg=msg, type=type_)
    return ErrorResponse(detail=[detail]).model_dump_json(exclude_unset=True).encode()


async def _out_of_memory(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MemoryError)
    msg = "the service ran out of memory answering this request"
    return Response(error_body("out_of_memory", msg), 500, media_type="application/json")


async def _request_error(request: Request, exc: Exception) -> Response:
    # Every RequestError the routes raise comes from parsing the body, hence the "body" prefix.
    assert isinstance(exc, RequestError)
    return _json(_field_errors(exc.errors), 422)


async def _planner_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PlannerError)
    detail = ErrorDetail(loc=[], msg=str(exc), type=exc.code)
    return _json(ErrorResponse(detail=[detail]), 500)


async def _overloaded(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OverloadedError)
    service = request.app.state.service
    service.metrics.rejections.labels(exc.reason).inc()
    response = _json(
        ErrorResponse(detail=[ErrorDetail(loc=[], msg=str(exc), type=exc.reason)]), 503
    )
    response.headers["Retry-After"] = str(service.settings.retry_after)
    return response


def register_exception_handlers(app: FastAPI) -> None:
    """Map each planner error class to its status; FastAPI's own handlers stay as they are."""
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(PlannerError, _planner_error)
    app.add_exception_handler(OverloadedError, _overloaded)
    app.add_exception_handler(MemoryError, _out_of_memory)
