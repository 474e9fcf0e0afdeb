"""The HTTP service: ``create_app()`` builds it, ``serve()`` runs it under uvicorn."""

from __future__ import annotations

from planner.api.app import create_app

__all__ = ["create_app", "serve"]


def serve(host: str | None = None, port: int | None = None, loop: str | None = None) -> None:
    """Run the service until interrupted: settings from the environment (``PLANNER_*``),
    ``host``, ``port`` and ``loop`` (``auto``, ``asyncio`` or ``uvloop``) overriding theirs;
    ``PLANNER_WORKERS`` uvicorn processes."""
    import uvicorn  # only the server needs it; importing api for create_app does not

    from planner.api.settings import environment_settings

    settings = environment_settings()
    uvicorn.run(
        "planner.api.app:create_app",
        factory=True,
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        workers=settings.workers,
        loop=loop if loop is not None else settings.loop,
        access_log=False,  # the app writes its own JSON access log
        log_level="info",
    )
