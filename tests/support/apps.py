"""In-process service apps for the API tests: one built from settings, and a spy on what it
hands to its solver pool."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from planner.api import create_app
from planner.api.settings import Settings


def threads_app(**settings: Any) -> FastAPI:
    """An app whose solver pool runs threads, without an access log."""
    return create_app(Settings(solver_pool="threads", access_log=False, **settings))


def spy_pool(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record every function the app hands to its solver pool."""
    pool = app.state.service.pool
    real = pool.run
    calls: list[object] = []

    async def run(timeout: float, fn: Any, *args: object, **options: Any) -> Any:
        calls.append(fn)
        return await real(timeout, fn, *args, **options)

    monkeypatch.setattr(pool, "run", run)
    return calls
