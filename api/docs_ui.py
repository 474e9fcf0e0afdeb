"""``/docs``: Swagger UI served from the installed ``swagger-ui-bundle`` package, never from a
CDN, so the page works on a machine without internet (most compiler CI).

Only the files the page loads are served: the bundle also ships a demo page that loads a
remote URL, an OAuth redirect page and source maps, none of which the docs need.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

__all__ = ["ASSETS", "DOCS_FILES", "add_docs"]

ASSETS = "/docs/assets"  # where the Swagger UI files are served
DOCS_FILES = {  # name -> media type: what the page loads, and nothing else
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}


def _assets_dir() -> Path:
    import swagger_ui_bundle

    return Path(str(swagger_ui_bundle.swagger_ui_path))


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs`` with Swagger UI's own files; the app must be built with
    ``docs_url=None`` and ``redoc_url=None`` (FastAPI's pages load from a CDN)."""
    directory = _assets_dir()
    title = f"{app.title} - API"

    @app.get(ASSETS + "/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        if name not in DOCS_FILES:
            raise HTTPException(status_code=404, detail=f"no docs asset {name!r}")
        return FileResponse(directory / name, media_type=DOCS_FILES[name])

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )
