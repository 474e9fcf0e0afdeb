"""Hypothesis strategies over the whole wire format: loops, branches, ranges, access
patterns, pins, spilling, caps, barrier candidates, every solver name and sync policy.

The requests are drawn near the edges of what the models accept, so that many are valid and
some are not: a fuzzer over them expects a plan the static validator accepts, or a
``RequestError`` whose every error names a field.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from planner.core.dtypes import DTYPES
from planner.core.solver_names import SOLVER_NAMES
from planner.core.targets import TARGETS

__all__ = ["wire_requests"]

SIZES = [1, 2, 3, 4, 8, 16, 24, 64, 100, 256, 1024, 4096]  # bytes
WIDTHS = [1, 2, 4, 8, 16]  # bytes per element
TRIPS = [1, 2, 3, None]
TIME_LIMITS = [0.2, 0.3, 0.5]  # seconds: every plan within the test's budget


@st.composite
def _loops(draw: st.DrawFn, horizon: int) -> list[dict[str, Any]]:
    """None, one, two disjoint, or two nested loops inside ``[0, horizon)``."""
    shape = draw(st.sampled_from(["none", "one", "two", "nested"]))
    if shape == "none" or horizon < 4:
        return []

    def loop(lo: int, hi: int) -> dict[str, Any]:
        s = draw(st.integers(lo, hi - 1))
        e = draw(st.integers(s + 1, hi))
        return {"start": s, "end": e, "trips": draw(st.sampled_from(TRIPS))}

    if shape == "one":
        return [loop(0, horizon)]
    if shape == "two":
        middle = draw(st.integers(1, horizon - 1))
        return [loop(0, middle), loop(middle, horizon)]
    outer = loop(0, horizon)
    if outer["end"] - outer["start"] < 2:
        return [outer]
    return [outer, loop(outer["start"], outer["end"])]


@st.composite
def _branches(draw: st.DrawFn, horizon: int) -> list[dict[str, Any]]:
    """None, or one branch of one to three contiguous arms."""
    if horizon < 3 or not draw(st.booleans()):
        return []
    arms = draw(st.integers(1, 3))
    cuts = sorted(
        draw(st.lists(st.integers(0, horizon), min_size=arms + 1, max_size=arms + 1, unique=True))
    )
    spans = [[cuts[k], cuts[k + 1]] for k in range(arms)]
    return [{"arms": spans}]


@st.composite
def _access(
    draw: st.DrawFn,
    points: list[int],
    size: int,
    block: list[int] | None,
    grid: list[int] | None,
) -> dict[str, Any]:
    """One access at a live point: a broadcast, or an affine index over threads, blocks and
    one loop variable, usually inside the buffer."""
    width = draw(st.sampled_from([w for w in WIDTHS if w <= size] or [1]))
    if draw(st.integers(0, 39)) == 0:
        width = draw(st.sampled_from(WIDTHS))  # sometimes wider than the buffer
    access: dict[str, Any] = {
        "op": draw(st.sampled_from(["read", "write"])),
        "at": draw(st.sampled_from(points)),
        "bytes": width,
    }
    if draw(st.integers(0, 3)) == 0:
        access["threads"] = "all"
        return access
    elements = max(1, size // width)
    index: dict[str, int] = {}
    loops: dict[str, int] = {}
    if block is not None and draw(st.integers(0, 3)):
        index["threadIdx.x"] = draw(st.sampled_from([0, 1, 1, 2, -1]))
    if block is not None and len(block) > 1 and draw(st.booleans()):
        index["threadIdx.y"] = draw(st.sampled_from([0, 1, 4]))
    if grid is not None and draw(st.integers(0, 3)) == 0:
        index["blockIdx.x"] = draw(st.sampled_from([0, 1, 2]))
    if draw(st.booleans()):
        index["i"] = draw(st.sampled_from([1, 2, 4]))
        loops["i"] = draw(st.integers(1, 4))
    if not index:
        index["threadIdx.x" if block is not None else "i"] = 0
        if block is None:
            loops["i"] = 1
    reach = 0  # elements the index spans beyond its least value
    low = 0
    for var, coeff in index.items():
        extent = {
            "threadIdx.x": block[0] if block is not None else 1,
            "threadIdx.y": block[1] if block is not None and len(block) > 1 else 1,
            "blockIdx.x": grid[0] if grid is not None else 1,
        }.get(var) or loops[var]
        span = coeff * (extent - 1)
        reach += abs(span)
        low += min(0, span)
    room = elements - 1 - reach
    if room >= 0 and draw(st.integers(0, 49)):
        access["offset"] = -low + draw(st.integers(0, room))
    elif room < 0 and draw(st.integers(0, 3)):
        return {**access, "threads": "all"}  # the index cannot fit: a broadcast instead
    else:
        access["offset"] = -low + draw(st.integers(-1, 2))  # sometimes outside
    access["index"] = index
    if loops:
        access["loops"] = loops
    return access


@st.composite
def _buffer(
    draw: st.DrawFn,
    k: int,
    horizon: int,
    block: list[int] | None,
    grid: list[int] | None,
) -> dict[str, Any]:
    size = draw(st.sampled_from(SIZES))
    buf: dict[str, Any] = {"id": f"b{k}", "size": size}
    if draw(st.integers(0, 3)) == 0 and horizon >= 3:
        cuts = sorted(
            set(draw(st.lists(st.integers(0, horizon), min_size=2, max_size=6, unique=True)))
        )
        pairs = [[cuts[j], cuts[j + 1]] for j in range(0, len(cuts) - 1, 2)]
        buf["ranges"] = pairs
        lifetimes = pairs
    else:
        s = draw(st.integers(0, horizon - 1))
        e = draw(st.integers(s + 1, min(horizon, s + 8)))
        buf["start"], buf["end"] = s, e
        lifetimes = [[s, e]]
    points = [p for s, e in lifetimes for p in range(s, e)]
    if draw(st.booleans()):
        buf["accesses"] = draw(st.lists(_access(points, size, block, grid), min_size=1, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        buf["alignment"] = draw(st.sampled_from([1, 2, 4, 16, 128]))
    if draw(st.integers(0, 6)) == 0:
        fitting = sorted(d for d, t in DTYPES.items() if size % t.bytes == 0)
        buf["dtype"] = draw(st.sampled_from(fitting))
    return buf


@st.composite
def wire_requests(draw: st.DrawFn, *, max_buffers: int = 6) -> dict[str, Any]:
    """A request over the whole wire format, usually valid."""
    horizon = draw(st.integers(2, 20))
    block = draw(st.sampled_from([None, None, [1], [2], [4], [32], [4, 2]]))
    grid = draw(st.sampled_from([None, None, [1], [2], [3]]))
    n = draw(st.integers(1, max_buffers))
    buffers = [draw(_buffer(k, horizon, block, grid)) for k in range(n)]
    top = max(b["end"] if "end" in b else b["ranges"][-1][1] for b in buffers)
    # Pins on disjoint address ranges, so that pins seldom clash.
    base = 0
    for b in buffers:
        if draw(st.integers(0, 5)) == 0:
            align = max(b.get("alignment") or 1, DTYPES[b["dtype"]].bytes if "dtype" in b else 1)
            base = (base + align - 1) // align * align
            b["offset"] = base
            base += b["size"]
    options: dict[str, Any] = {
        "solver": draw(st.sampled_from(SOLVER_NAMES)),
        "sync": draw(st.sampled_from(["existing", "insert", "none"])),
        "time_limit": draw(st.sampled_from(TIME_LIMITS)),
    }
    if draw(st.booleans()):
        options["overflow"] = "spill"
    if draw(st.integers(0, 2)) == 0:
        options["barrier_candidates"] = draw(st.lists(st.integers(0, top), max_size=4))
    if draw(st.integers(0, 2)) == 0:
        options["max_new_barriers"] = draw(st.integers(0, 3))
    if grid is not None and draw(st.booleans()):
        options["shrink"] = True
    if draw(st.integers(0, 4)) == 0:
        options["pareto"] = True
    request: dict[str, Any] = {
        "name": draw(st.sampled_from(["kernel", "k", "gemm_epilogue"])),
        "buffers": buffers,
        "barriers": draw(st.lists(st.integers(0, top), max_size=4)),
        "options": options,
    }
    loops = draw(_loops(top))
    if loops:
        request["loops"] = loops
    branches = draw(_branches(top))
    if branches:
        request["branches"] = branches
    if block is not None:
        request["block"] = block
    if grid is not None:
        request["grid"] = grid
    if draw(st.booleans()):
        request["capacity"] = draw(st.sampled_from([16, 64, 256, 1024, 4096, 65536]))
    elif draw(st.integers(0, 3)) == 0:
        request["target"] = draw(st.sampled_from(sorted(TARGETS)))
    if draw(st.integers(0, 3)) == 0:
        request["alignment"] = draw(st.sampled_from([1, 4, 16]))
    return request
