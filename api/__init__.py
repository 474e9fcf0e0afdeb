"""The HTTP service: ``create_app()`` builds it, ``serve()`` runs it under uvicorn."""

from __future__ import annotations

from api.app import create_app

__all__ = ["create_app", "serve"]


def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Run the service until interrupted; a fresh app from the factory, default settings."""
    import uvicorn  # only the server needs it; importing api for create_app does not

    uvicorn.run("api.app:create_app", factory=True, host=host, port=port)
