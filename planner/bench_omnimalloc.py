"""``planner bench --omnimalloc NAME``: OmniMalloc's allocators in the same table.

OmniMalloc (PyPI ``omnimalloc``, the ``compare`` extra) places buffers with half-open
lifetimes and no alignment. Each instance is handed over on the occupied intervals of its
interference graph (so the problems are the same), planned ``repeat`` times (best time
kept; ``THREADS`` search threads where it takes them), and its offsets are checked here:
pins kept, no shared byte between conflicting buffers, offsets aligned. Its plan is
"proved" only when it meets the lower bound.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import time
from types import ModuleType
from typing import Any

import numpy as np

from planner.bench import BenchRow, Instance
from planner.core.graph import InterferenceGraph, build_graph
from planner.validators._disjoint import any_clash

__all__ = ["MAX_THREADS", "MODULE", "THREADS", "allocator_names", "load", "run_allocator"]

MODULE = "omnimalloc"
# Search threads for the allocators that take them: SuperMalloc's portfolio races its
# branching orders on threads, and it is published with 6; fewer slow it down sharply.
THREADS = 6
MAX_THREADS = 256


def load() -> ModuleType | None:
    """The ``omnimalloc`` module, or None when it is not installed."""
    try:
        return importlib.import_module(MODULE)
    except ImportError:
        return None


def allocator_names(module: ModuleType) -> list[str]:
    """Names of the allocators the installed OmniMalloc offers."""
    return [str(name) for name in module.available_allocators()]


def _allocator(module: ModuleType, name: str, time_limit: float, threads: int) -> Any:
    """The allocator ``name``, given the time limit and ``threads`` search threads where it
    takes them."""
    allocator = module.allocators.BaseAllocator.resolve(name)
    params = inspect.signature(type(allocator)).parameters
    kwargs: dict[str, Any] = {}
    if "timeout" in params:
        kwargs["timeout"] = time_limit
    if "num_threads" in params:
        kwargs["num_threads"] = threads
    return type(allocator)(**kwargs) if kwargs else allocator


def _violations(g: InterferenceGraph, offsets: list[int]) -> int:
    """Pins moved, misaligned offsets and pairs of conflicting buffers sharing a byte (the
    pairs are listed only when the compiled sweep finds that some exist)."""
    bad = 0
    for i in range(g.n):
        pinned = int(g.pinned[i])
        bad += (pinned >= 0 and offsets[i] != pinned) or offsets[i] % int(g.alignment[i]) != 0
    lo = np.asarray(offsets, dtype=np.int64)
    if not any_clash(lo, lo + g.size, g.start, g.occupied_end, g.occupied_end):
        return bad
    for a, b in g.edges():
        if offsets[a] < offsets[b] + int(g.size[b]) and offsets[b] < offsets[a] + int(g.size[a]):
            bad += 1
    return bad


def run_allocator(
    module: ModuleType, name: str, instance: Instance, *, threads: int = THREADS
) -> BenchRow:
    """Plan ``instance`` with OmniMalloc's allocator ``name`` (``threads`` search threads
    where it takes them) and check its offsets."""
    request = instance.request
    g = build_graph(request)
    allocations = [
        module.Allocation(
            i,
            int(g.size[i]),
            int(g.start[i]),
            int(g.occupied_end[i]),
            offset=int(g.pinned[i]) if g.pinned[i] >= 0 else None,
        )
        for i in range(g.n)
    ]
    best = float("inf")
    placed: Any = ()
    for _ in range(max(1, instance.repeat)):
        allocator = _allocator(module, name, request.options.time_limit, threads)
        gc.collect()  # as before each of the planner's runs (``planner.bench``)
        t0 = time.perf_counter()
        placed = module.allocate(allocations, allocator=allocator)
        best = min(best, time.perf_counter() - t0)
    by_id = {int(a.id): int(a.offset) for a in placed}
    offsets = [by_id[i] for i in range(g.n)]
    arena = max((o + int(s) for o, s in zip(offsets, g.size, strict=True)), default=0)
    lower = g.lower_bound.bytes
    bad = _violations(g, offsets)
    capacity = request.effective_capacity
    fits = bad == 0 and (capacity is None or arena <= capacity)
    proved = bad == 0 and arena <= lower
    return BenchRow(
        instance=instance.name,
        buffers=g.n,
        lower_bound=lower,
        arena_bytes=arena,
        gap=(arena - lower) / lower if lower else 0.0,
        status=("optimal" if proved else "feasible") if fits else "unknown",
        winner=f"{MODULE}:{name}" + ("" if threads == THREADS else f":{threads}"),
        time_ms=best * 1000.0,
        valid=bad == 0,
        violations=bad,
        proved=proved,
        bound=lower,
        first_ms=best * 1000.0 if fits else None,
        proof_ms=best * 1000.0 if proved else None,
        optimum=instance.optimum,
    )
