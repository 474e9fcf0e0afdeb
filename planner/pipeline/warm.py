"""A small instance that runs every planning method, and a once-per-process warm-up on it.

The exact methods load their compiled code on it before their first clocked run
(``solvers.auto``), so a process's first plan is the same as its later ones; the service
plans it at start-up (``ensure_warm``), so no compiler's request waits for the loading."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from planner.core.install import available
from planner.solvers.auto import WARM_UP_BUFFERS

__all__ = ["WARM_UP", "ensure_warm", "warm_up_requests"]

WARM_UP: list[dict[str, Any]] = [
    {
        "name": f"warm-up-{solver}",
        "barriers": [1],
        "options": {"solver": solver, "time_limit": 1.0, "sync": sync},
        "buffers": [
            {"id": f"b{i}", "size": size, "start": start, "end": end, "alignment": align}
            for i, (size, start, end, align) in enumerate(WARM_UP_BUFFERS)
        ],
    }
    for solver, sync in (("search", "existing"), ("cpsat", "insert"))
]


def warm_up_requests(*, compiled_only: bool = False) -> list[dict[str, Any]]:
    """The warm-up requests this installation can plan: CP-SAT's only with the exact extra,
    and never with ``compiled_only`` (CP-SAT has no compiled kernels of the planner's own;
    the exact methods load it off the request's clock when a request needs it)."""
    wanted = available("exact") and not compiled_only
    return [r for r in WARM_UP if r["options"]["solver"] != "cpsat" or wanted]


_lock = threading.RLock()
_done: set[bool] = set()  # the compiled_only values warmed up in this process
_running = {"now": False}


def ensure_warm(plan: Callable[[dict[str, Any]], object], *, compiled_only: bool = False) -> None:
    """Plan the warm-up requests with ``plan`` once per process (``compiled_only``: only those
    that load compiled kernels); other threads wait for it, and the warm-up's own plans pass
    straight through."""
    if compiled_only in _done or False in _done:
        return
    with _lock:
        if compiled_only in _done or False in _done or _running["now"]:
            return
        _running["now"] = True
        try:
            for request in warm_up_requests(compiled_only=compiled_only):
                plan(request)
        finally:
            _running["now"] = False
        _done.add(compiled_only)
