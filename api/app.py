"""The application factory: ``uvicorn api.app:create_app --factory``."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from planner.api import bridges, web
from planner.api.docs import add_body_schemas
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
    pool = app.state.service.pool
    await pool.start()
    restore = _drain_on_stop_signals(pool.drain)
    try:
        yield
    finally:
        restore()
        pool.shutdown()
        sys.setswitchinterval(previous)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _drain_on_stop_signals(drain: Callable[[], None]) -> Callable[[], None]:
    """Call ``drain`` on the event loop as soon as a stop signal arrives, then the server's
    own handler (uvicorn's: stop accepting, let running requests finish, then shut down).
    Without it, requests queued behind long solves would wait for them before the answer
    every request gets at shutdown anyway. Returns what puts the handlers back; a no-op off
    the main thread (an app under a test client), where signals cannot be handled."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def on_signal(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(drain)
        handler: Any = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)
        else:  # no server handler: the signal does what it did before
            signal.signal(sig, handler)
            signal.raise_signal(sig)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)

    def restore() -> None:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is on_signal and handler is not None:
                signal.signal(sig, handler)

    return restore


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
    app.include_router(bridges.router)
    add_docs(app)
    add_body_schemas(app)
    register_exception_handlers(app)
    logger = configure_access_log(settings.access_log)
    app.add_middleware(HostGuard, allowed=settings.allowed_hosts.split(","))
    app.add_middleware(RequestMiddleware, metrics=service.metrics, logger=logger)  # outermost
    return app
