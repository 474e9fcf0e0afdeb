"""Run a coroutine on each event loop the server may use: asyncio's own and uvloop's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

LOOPS = ["asyncio", "uvloop"]


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function for ``name``; skips the test where uvloop is not installed."""
    if name == "asyncio":
        return asyncio.new_event_loop
    uvloop = pytest.importorskip("uvloop")
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_on(name: str, coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a fresh loop of kind ``name``."""
    with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
        return runner.run(coro)
