"""The web page: ``GET /`` and its assets, and ``POST /emit/{kind}``, which turns a request
and its plan into CUDA, MLIR or the SVG memory map."""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.resources import files
from typing import Any, Literal, NoReturn, TypeVar

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from planner.emit import EMITTERS
from planner.errors import RequestError
from planner.io import parse_plan, parse_request
from planner.models import DEFAULT_MAX_BUFFERS
from validators import validate_plan

__all__ = ["router"]

router = APIRouter()
T = TypeVar("T")

_STATIC = files("api") / "static"
_ASSETS = {  # name -> media type; nothing else is served
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "example.json": "application/json",
}
_MEDIA = {
    "cuda": "text/x-cuda; charset=utf-8",
    "mlir": "text/plain; charset=utf-8",
    "svg": "image/svg+xml",
}
_MAX_BODY_BYTES = 32 << 20  # when the app's settings name no limit


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def index() -> HTMLResponse:
    """The page: paste or upload a request, plan it, see the map, download the outputs."""
    return HTMLResponse((_STATIC / "index.html").read_text(encoding="utf-8"))


@router.get("/static/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """One of the page's assets."""
    if name not in _ASSETS:
        raise HTTPException(status_code=404, detail=f"no asset {name!r}")
    return Response((_STATIC / name).read_bytes(), media_type=_ASSETS[name])


@router.post(
    "/emit/{kind}",
    summary="A plan as CUDA C++, MLIR or an SVG memory map",
    response_class=Response,
    responses={
        200: {"content": {"text/plain": {}, "image/svg+xml": {}}},
        422: {"description": "Bad request or plan; `loc` starts with request or plan."},
    },
)
async def post_emit(kind: Literal["cuda", "mlir", "svg"], request: Request) -> Response:
    """The body is ``{"request": ..., "plan": ...}``; the plan must pass the static check
    against the request (so the text describes a safe plan)."""
    settings = getattr(request.app.state, "settings", None)
    limit = int(getattr(settings, "max_body_bytes", _MAX_BODY_BYTES))
    max_buffers = int(getattr(settings, "max_buffers", DEFAULT_MAX_BUFFERS))
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        _refuse_size(int(declared), limit)
    body = await request.body()
    if len(body) > limit:
        _refuse_size(len(body), limit)
    data = _object(body)
    req = _prefixed("request", lambda: parse_request(data["request"], max_buffers=max_buffers))
    plan = _prefixed("plan", lambda: parse_plan(data["plan"]))
    report = validate_plan(req, plan)
    if not report.valid:
        first = report.violations[0]
        raise RequestError.field(
            ("plan",),
            f"the plan fails the static check against the request: {first.code}: {first.message}",
            "invalid_plan",
            None,
        )
    return Response(EMITTERS[kind](req, plan), media_type=_MEDIA[kind])


def _refuse_size(size: int, limit: int) -> NoReturn:
    msg = f"request body of {size} bytes exceeds the limit of {limit} bytes"
    detail = [{"loc": ["body"], "msg": msg, "type": "body_too_large", "input": None}]
    raise HTTPException(status_code=413, detail=detail)


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise RequestError.field((), f"malformed JSON: {exc}", "json_invalid", None) from None
    if not isinstance(data, dict):
        raise RequestError.field((), "expected an object", "dict_type", None)
    for key in ("request", "plan"):
        if not isinstance(data.get(key), dict):
            raise RequestError.field((key,), f"{key} must be an object", "missing", None)
    return data


def _prefixed(prefix: str, parse: Callable[[], T]) -> T:
    """Run ``parse``; its field errors get ``prefix`` in front of their loc."""
    try:
        return parse()
    except RequestError as exc:
        errors = [{**e, "loc": [prefix, *e.get("loc", [])]} for e in exc.errors]
        # parse_plan already starts its locs with "plan".
        for e in errors:
            if e["loc"][:2] == ["plan", "plan"]:
                e["loc"] = e["loc"][1:]
        raise RequestError(errors) from None
