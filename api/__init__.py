"""The HTTP service: ``create_app()`` builds it, ``serve()`` runs it under uvicorn."""

from __future__ import annotations

from planner.api.app import create_app

__all__ = ["create_app", "serve"]

RESERVED_FILES = 256  # descriptors besides connections: solver sockets, logs, libraries


def serve(host: str | None = None, port: int | None = None, loop: str | None = None) -> None:
    """Run the service until interrupted: settings from the environment (``PLANNER_*``),
    ``host``, ``port`` and ``loop`` (``auto``, ``asyncio`` or ``uvloop``) overriding theirs;
    ``PLANNER_WORKERS`` uvicorn processes."""
    import uvicorn  # only the server needs it; importing api for create_app does not

    from planner.api.connections import PROTOCOL
    from planner.api.settings import environment_settings

    settings = environment_settings()
    _raise_file_limit(settings.max_connections + RESERVED_FILES)
    uvicorn.run(
        "planner.api.app:create_app",
        factory=True,
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        workers=settings.workers,
        loop=loop if loop is not None else settings.loop,
        http=PROTOCOL,  # httptools, with head and body deadlines and a connection bound
        timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]  # float works
        access_log=False,  # the app writes its own JSON access log
        log_level="info",
    )


def _raise_file_limit(wanted: int) -> None:
    """Let this process open ``wanted`` files (its soft limit, up to the hard one): each
    connection is a descriptor, and one more than the limit stops the server accepting."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
