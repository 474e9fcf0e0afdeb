"""The web page: ``GET /`` and its assets; ``GET /examples`` and ``GET /examples/{name}``,
the shipped example requests the page loads; and ``POST /emit/{kind}``, which turns a request
and its plan into CUDA, MLIR or the SVG memory map."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Path, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from planner.api.body import read_body
from planner.api.docs import EMIT_BODY, emit_responses, example_responses, simple_responses
from planner.api.errors import error_body
from planner.api.routes import ServiceDep
from planner.api.service import emit
from planner.catalog import is_request_file

__all__ = ["Example", "router"]

router = APIRouter()

_STATIC = files("planner.api") / "static"
_ASSETS = {  # name -> media type; nothing else is served
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_EXAMPLES = files("planner") / "examples"  # shipped in the wheel (package data)
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


class Example(BaseModel):
    """One shipped example request."""

    name: str = Field(description="The file's name without .json: what /examples/{name} takes.")
    title: str = Field(description="The request's own name.")
    buffers: int = Field(description="Buffers in the request.")
    target: str | None = Field(description="The request's device profile; null when it has none.")
    sync: str = Field(
        description='The request\'s options.sync: "existing", "insert" or "none" ("insert" when '
        "it gives none)."
    )


@cache
def _examples() -> dict[str, tuple[Example, bytes]]:
    """Every shipped JSON request by name, read once (the files ship with the package)."""
    out: dict[str, tuple[Example, bytes]] = {}
    for entry in sorted(_EXAMPLES.iterdir(), key=lambda e: e.name):
        if not (entry.name.endswith(".json") and is_request_file(entry.name)):
            continue
        text = entry.read_bytes()
        data: dict[str, Any] = json.loads(text)
        name = entry.name.removesuffix(".json")
        info = Example(
            name=name,
            title=str(data.get("name", name)),
            buffers=len(data.get("buffers", [])),
            target=data.get("target"),
            sync=str(data.get("options", {}).get("sync", "insert")),
        )
        out[name] = (info, text)
    return out


@router.get("/examples", response_model=list[Example], responses=simple_responses())
async def examples() -> list[Example]:
    """The example requests shipped with the planner, by file name."""
    return [info for info, _ in _examples().values()]


@router.get("/examples/{name}", response_class=Response, responses=example_responses())
async def example(
    name: Annotated[
        str,
        Path(
            description="An example's name, as /examples lists it.",
            pattern=r"^[A-Za-z0-9_.-]+$",
            max_length=200,
        ),
    ],
) -> Response:
    """One shipped example request, byte for byte as in the package."""
    found = _examples().get(name)
    if found is None:
        msg = f"no example {name!r}; GET /examples lists them"
        return Response(error_body("not_found", msg), 404, media_type="application/json")
    return Response(found[1], media_type="application/json")


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
