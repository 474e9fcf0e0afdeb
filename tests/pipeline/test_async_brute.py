"""Random small programs with asynchronous accesses: the static check and the emulator, two
implementations of docs/design.md, Asynchronous accesses, agree on every placement, and every
plan the planner makes passes both."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Placement, Plan
from planner.validators.emulator import emulate

SIZE = 16  # bytes per buffer
WRITERS = ("threads", "cp.async", "tma")
READERS = ("threads", "mma", "tma")


@st.composite
def programs(draw: st.DrawFn) -> dict[str, Any]:
    """Two or three buffers one after another (or overlapping), each written at its start and
    read at its last point by a drawn agent, with the syncs that cover them and drawn barriers
    and fences."""
    n = draw(st.integers(2, 3))
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    at = 0
    for i in range(n):
        start = at
        length = draw(st.integers(2, 4))
        end = start + length
        write = {"op": "write", "at": start, "bytes": 4, "threads": "all"}
        read = {"op": "read", "at": end - 1, "bytes": 4, "threads": "all"}
        writer, reader = draw(st.sampled_from(WRITERS)), draw(st.sampled_from(READERS))
        if writer != "threads":
            done = draw(st.integers(start + 1, end))
            write["agent"] = writer
            if writer == "tma":
                write["mbarrier"] = f"m{i}"
                syncs.append({"kind": "expect_tx", "at": start, "mbarrier": f"m{i}"})
                syncs.append({"kind": "mbarrier_wait", "at": done, "mbarrier": f"m{i}"})
            else:
                syncs.append({"kind": "wait_group", "at": done, "group": "cp.async"})
        accesses = [write]
        if end - 1 > start:
            if reader != "threads":
                read["agent"] = reader
                group = "wgmma" if reader == "mma" else "bulk"
                syncs.append({"kind": "wait_group", "at": end, "group": group})
            accesses.append(read)
        buffers.append(
            {"id": f"b{i}", "size": SIZE, "start": start, "end": end, "accesses": accesses}
        )
        at = end - draw(st.integers(0, 1))  # the next one may start at this one's last point
    horizon = max(b["end"] for b in buffers)
    barriers = draw(st.lists(st.integers(0, horizon), max_size=3, unique=True))
    fences = draw(st.lists(st.integers(0, horizon), max_size=2, unique=True))
    syncs += [{"kind": "fence_proxy_async", "at": f} for f in fences]
    return {
        "block": [4],
        "barriers": sorted(barriers),
        "syncs": syncs,
        "buffers": buffers,
        "options": {"sync": draw(st.sampled_from(["existing", "insert"])), "time_limit": 2.0},
    }


def _placed(plan: Plan, offsets: list[int]) -> Plan:
    placements = [
        Placement(id=p.id, offset=o, size=p.size)
        for p, o in zip(plan.placements, offsets, strict=True)
    ]
    arena = max(o + SIZE for o in offsets)
    launch = plan.launch.model_copy(update={"dynamic_smem_bytes": arena})
    return plan.model_copy(
        update={"placements": placements, "arena_bytes": arena, "launch": launch}
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.lists(st.sampled_from([0, SIZE]), min_size=3, max_size=3))
def test_static_check_and_emulator_agree(data: dict[str, Any], offsets: list[int]) -> None:
    try:
        request = parse_request(data)
        plan = planner.plan(request)
    except RequestError:
        return  # a wait outside a range, a buffer that cannot reuse its own bytes
    assert planner.validate(request, plan).valid
    assert emulate(request, plan).valid
    moved = _placed(plan, offsets[: len(request.buffers)])
    static = planner.validate(request, moved)
    emulated = emulate(request, moved)
    assert static.valid == emulated.valid, (
        [v.message for v in static.violations],
        [v.message for v in emulated.violations],
    )
