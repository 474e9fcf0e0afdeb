"""The application factory: ``uvicorn api.app:create_app --factory``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

import planner
from api import web
from api.errors import register_exception_handlers
from api.routes import VERSION, router
from api.settings import Settings

__all__ = ["create_app"]


# Two 1-byte buffers aligned to 4: greedy cannot prove its 5 bytes optimal, so the exact
# methods run too and their compiled kernels are loaded (or built, on a fresh install).
WARM_UP = {
    "name": "warm-up",
    "options": {"time_limit": 1.0},
    "buffers": [
        {"id": "a", "size": 1, "start": 0, "end": 2, "alignment": 4},
        {"id": "b", "size": 1, "start": 0, "end": 2, "alignment": 4},
    ],
}


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The first plan in a process loads the compiled kernels (~0.2 s, or seconds to build
    # them after a fresh install); pay it at start-up, not in a compiler's request.
    await run_in_threadpool(planner.plan, WARM_UP)
    yield


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app with the planner's routes and error handlers; ``settings`` default to
    ``Settings()``."""
    app = FastAPI(
        title="alloc-planner",
        version=VERSION,
        description="Plans the offsets of a GPU kernel's shared-memory buffers and proves "
        "the plan safe.",
        lifespan=_lifespan,
    )
    app.state.settings = settings if settings is not None else Settings()
    app.include_router(router)
    app.include_router(web.router)
    register_exception_handlers(app)
    return app
