"""Planner errors as HTTP answers, all in FastAPI's ``{"detail": [...]}`` shape.

``HTTP_STATUS`` is the one table from error class to status; every ``PlannerError`` class
is in it. A ``RequestError`` lists its field errors (``loc`` under "body", or naming the
header for ``UnsupportedMediaTypeError``); ``OverloadedError`` (a full queue, a deadline
passed, a solver process that died mid-request) adds ``Retry-After`` and has its reason as
the error ``type``; any other planner error is one error with its ``code`` as ``type``. A
``MemoryError`` (on the event loop or in a worker) is ``out_of_memory``; any other exception
is a 500 ``server_error`` (``api.middleware``). The service never raises the client's
``ServiceError`` family; were one raised there, it would be a server failure.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request, Response
from pydantic import BaseModel, Field

from planner.core import errors as core_errors
from planner.core.errors import (
    FieldError,
    OverloadedError,
    PlannerError,
    RequestError,
    UnsupportedMediaTypeError,
)

__all__ = [
    "HTTP_STATUS",
    "ErrorDetail",
    "ErrorResponse",
    "error_body",
    "register_exception_handlers",
    "status_of",
]

HTTP_STATUS: dict[type[BaseException], int] = {
    core_errors.PlannerError: 500,
    core_errors.RequestError: 422,
    core_errors.FormatError: 422,
    core_errors.PayloadTooLargeError: 413,
    core_errors.UnsupportedMediaTypeError: 415,
    core_errors.InternalError: 500,
    core_errors.MissingExtraError: 501,  # the service lacks an optional package
    core_errors.OverloadedError: 503,
    core_errors.ServiceError: 500,  # the client's errors: the service never raises them
    core_errors.ServiceUnavailableError: 500,
    core_errors.ServiceConnectionError: 500,
    core_errors.UnexpectedResponseError: 500,
    MemoryError: 500,
}

BODY = "body"  # FastAPI's loc prefix for errors in the request body


class ErrorDetail(BaseModel):
    """One error: where (``loc``), what (``msg``), its stable ``type``, and the bad value."""

    loc: list[str | int] = Field(description='Where: the path to the field, "body" first.')
    msg: str = Field(description="What is wrong, naming the value.")
    type: str = Field(description="A stable code for the kind of error.")
    input: Any = Field(default=None, description="The value at fault.")


class ErrorResponse(BaseModel):
    """The body of every 4xx/5xx answer, as FastAPI writes request validation errors."""

    detail: list[ErrorDetail] = Field(description="Every error found (the first 100).")


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


def status_of(exc: BaseException) -> int:
    """The status ``exc`` is answered with: its class's in ``HTTP_STATUS``, or its nearest
    base class's."""
    for cls in type(exc).__mro__:
        if cls in HTTP_STATUS:
            return HTTP_STATUS[cls]
    return 500


def error_body(type_: str, msg: str) -> bytes:
    """A one-error ``detail`` body, for answers made outside a handler."""
    detail = ErrorDetail(loc=[], msg=msg, type=type_)
    return ErrorResponse(detail=[detail]).model_dump_json(exclude_unset=True).encode()


async def _out_of_memory(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MemoryError)
    msg = "the service ran out of memory answering this request"
    return Response(error_body("out_of_memory", msg), status_of(exc), media_type="application/json")


async def _request_error(request: Request, exc: Exception) -> Response:
    # Every RequestError the routes raise comes from reading or parsing the body, hence the
    # "body" prefix; only the content type's error names a header.
    assert isinstance(exc, RequestError)
    prefix = () if isinstance(exc, UnsupportedMediaTypeError) else (BODY,)
    return _json(_field_errors(exc.errors, prefix), status_of(exc))


async def _planner_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, PlannerError)
    detail = ErrorDetail(loc=[], msg=str(exc), type=exc.code)
    return _json(ErrorResponse(detail=[detail]), status_of(exc))


async def _overloaded(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, OverloadedError)
    service = request.app.state.service
    service.metrics.rejections.labels(exc.reason).inc()
    response = _json(
        ErrorResponse(detail=[ErrorDetail(loc=[], msg=str(exc), type=exc.reason)]), status_of(exc)
    )
    response.headers["Retry-After"] = str(service.settings.retry_after)
    return response


def register_exception_handlers(app: FastAPI) -> None:
    """Answer the planner's errors (and ``MemoryError``) with their status and body; FastAPI's
    own handlers stay as they are."""
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(PlannerError, _planner_error)
    app.add_exception_handler(OverloadedError, _overloaded)
    app.add_exception_handler(MemoryError, _out_of_memory)
