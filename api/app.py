"""The application factory: ``uvicorn api.app:create_app --factory``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from planner.api import web
from planner.api.docs_ui import add_docs
from planner.api.errors import register_exception_handlers
from planner.api.hosts import HostGuard
from planner.api.middleware import RequestMiddleware, configure_access_log
from planner.api.routes import VERSION, router
from planner.api.service import Service, warm_up
from planner.api.settings import Settings, environment_settings

__all__ = ["create_app"]


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Pay the first plan's cost at start-up, not in a compiler's request: here, and in each
    # worker process as it starts.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(app.state.settings.switch_interval)
    await run_in_threadpool(warm_up)
    await app.state.service.pool.start()
    try:
        yield
    finally:
        app.state.service.pool.shutdown()
        sys.setswitchinterval(previous)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app with the planner's routes, error handlers and request middleware; its own
    pool, cache and metrics. ``settings`` default to the environment's."""
    settings = settings if settings is not None else environment_settings()
    app = FastAPI(
        title="alloc-planner",
        version=VERSION,
        description="Plans the offsets of a GPU kernel's shared-memory buffers and proves "
        "the plan safe.",
        lifespan=_lifespan,
        docs_url=None,  # api.docs_ui serves /docs from installed files, not a CDN
        redoc_url=None,
    )
    service = Service.create(settings)
    app.state.service = service
    app.state.settings = settings
    app.include_router(router)
    app.include_router(web.router)
    add_docs(app)
    register_exception_handlers(app)
    logger = configure_access_log(settings.access_log)
    app.add_middleware(HostGuard, allowed=settings.allowed_hosts.split(","))
    app.add_middleware(RequestMiddleware, metrics=service.metrics, logger=logger)  # outermost
    return app
