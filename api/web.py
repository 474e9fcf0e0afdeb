"""The web page: ``GET /`` and its assets, and ``POST /emit/{kind}``, which turns a request
and its plan into CUDA, MLIR or the SVG memory map."""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from planner.api.body import read_body
from planner.api.docs import EMIT_BODY, emit_responses
from planner.api.routes import ServiceDep
from planner.api.service import emit

__all__ = ["router"]

router = APIRouter()

_STATIC = files("planner.api") / "static"
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
    responses=emit_responses(),
    openapi_extra=EMIT_BODY,
)
async def post_emit(
    kind: Literal["cuda", "mlir", "svg"], request: Request, service: ServiceDep
) -> Response:
    """The body is ``{"request": ..., "plan": ...}``; the plan must pass the static check
    against the request (so the text describes a safe plan). Read with the size limit of
    ``/plan``; parsed, checked and written by a solver worker."""
    settings = service.settings
    body = await read_body(request, settings.max_body_bytes)
    text = await service.pool.run(
        settings.request_timeout, emit, body, kind, settings, cancelled=request.is_disconnected
    )
    return Response(text, media_type=_MEDIA[kind])
