"""The application factory: ``uvicorn api.app:create_app --factory``."""

from __future__ import annotations

from fastapi import FastAPI

from api.errors import register_exception_handlers
from api.routes import VERSION, router
from api.settings import Settings

__all__ = ["create_app"]


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app with the planner's routes and error handlers; ``settings`` default to
    ``Settings()``."""
    app = FastAPI(
        title="alloc-planner",
        version=VERSION,
        description="Plans the offsets of a GPU kernel's shared-memory buffers and proves "
        "the plan safe.",
    )
    app.state.settings = settings if settings is not None else Settings()
    app.include_router(router)
    register_exception_handlers(app)
    return app
