"""``/docs``: Swagger UI served from the installed ``swagger-ui-bundle`` package, never from a
CDN, so the page works on a machine without internet (most compiler CI)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS", "add_docs"]

ASSETS = "/docs/assets"  # where the Swagger UI files are served


def _assets_dir() -> Path:
    import swagger_ui_bundle

    return Path(str(swagger_ui_bundle.swagger_ui_path))


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs`` with Swagger UI's own files; the app must be built with
    ``docs_url=None`` and ``redoc_url=None`` (FastAPI's pages load from a CDN)."""
    app.mount(ASSETS, StaticFiles(directory=_assets_dir()), name="docs-assets")
    title = f"{app.title} - API"

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=title,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )
