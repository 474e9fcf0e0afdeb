"""Warm-up requests that run every planning method, and a once-per-process warm-up on them.

Nothing needs it for its plans: compiled kernels load on their first call with the request's
clock paused (``planner.core._jit``), and the exact methods run once on a small instance
before their first clocked run (``solvers.auto``). The service plans these requests at
start-up and ``planner warm`` after an install, so every kernel is compiled and loaded
before a compiler's request arrives."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from planner.core._jit import compiled
from planner.core.install import available
from planner.solvers.auto import WARM_UP_BUFFERS
from planner.solvers.greedy import DENSE_DEGREE, SKYLINE_MAX_BUFFERS

__all__ = ["DENSE_WARM_UP_BUFFERS", "WARM_UP", "ensure_warm", "warm_up_requests"]

WARM_UP: list[dict[str, Any]] = [
    {
        "name": f"warm-up-{solver}",
        "barriers": [1],
        # No gap tolerated, so that the exact methods run whatever gap greedy leaves.
        "options": {"solver": solver, "time_limit": 1.0, "sync": sync, "gap_tolerance": 0},
        "buffers": [
            {"id": f"b{i}", "size": size, "start": start, "end": end, "alignment": align}
            for i, (size, start, end, align) in enumerate(WARM_UP_BUFFERS)
        ],
    }
    for solver, sync in (("search", "existing"), ("cpsat", "insert"))
]


def _greedy_warm_up(
    name: str, sync: str, buffers: int, lifetime: Callable[[int], tuple[int, int]]
) -> dict[str, Any]:
    """A greedy request of ``buffers`` buffers, buffer ``i`` living ``lifetime(i)`` (start,
    end); a few sizes and alignments."""
    return {
        "name": name,
        "options": {"solver": "greedy", "time_limit": 10.0, "sync": sync},
        "buffers": [
            {
                "id": f"b{i}",
                "size": 16 * (1 + i % 7),
                "start": lifetime(i)[0],
                "end": lifetime(i)[1],
                "alignment": 1 << (i % 3) * 2,
            }
            for i in range(buffers)
        ],
    }


# Large enough for what only large requests run: neighbour lists, the portfolio on threads,
# the static check's compiled pre-sweep. Staggered lifetimes.
LARGE_WARM_UP_BUFFERS = 2048
WARM_UP.append(
    _greedy_warm_up(
        "warm-up-large", "insert", LARGE_WARM_UP_BUFFERS, lambda i: (i // 4, i // 4 + 2 + i % 5)
    )
)
# Dense (model-like: past SKYLINE_MAX_BUFFERS buffers, each meeting at least DENSE_DEGREE
# others): the greedy fits run on the segment tree (``solvers.greedy.uses_tree``), which the
# requests above never reach. Every buffer lives across point 64, so each meets all the others.
DENSE_WARM_UP_BUFFERS = max(SKYLINE_MAX_BUFFERS, DENSE_DEGREE) + 64
WARM_UP.append(
    _greedy_warm_up(
        "warm-up-dense", "none", DENSE_WARM_UP_BUFFERS, lambda i: (i % 64, 65 + i % 64 + i % 3)
    )
)


def warm_up_requests() -> list[dict[str, Any]]:
    """The warm-up requests this installation can plan: CP-SAT's only with the exact extra."""
    wanted = available("exact")
    return [r for r in WARM_UP if r["options"]["solver"] != "cpsat" or wanted]


_lock = threading.RLock()
_state = {"done": False, "running": False}


def ensure_warm(plan: Callable[[dict[str, Any]], object]) -> None:
    """Plan the warm-up requests with ``plan`` once per process, every kernel compiled (none
    interpreted); other threads wait for it, and the warm-up's own plans pass straight
    through. Then every object alive leaves the cycle collector's sight (``gc.freeze``): the
    modules, compiled kernels and caches live as long as the process, and a full collection
    during a request then walks only what requests make, where it walked the whole heap (at
    start-up some 150 000 objects: a pause, and the request's code running on cold caches
    after it, 0.8 ms of a 0.4 ms plan)."""
    if _state["done"]:
        return
    with _lock:
        if _state["done"] or _state["running"]:
            return
        _state["running"] = True
        try:
            with compiled():
                for request in warm_up_requests():
                    plan(request)
        finally:
            _state["running"] = False
        gc.collect()  # the warm-up's garbage is not kept
        gc.freeze()
        _state["done"] = True
