"""Hypothesis strategies for random planning requests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from planner.core.models import PlanRequest


@st.composite
def request_dicts(
    draw: st.DrawFn,
    *,
    max_buffers: int = 12,
    horizon: int = 16,
    pins: bool = True,
    sync: str | None = None,
    capacity: bool = True,
    max_new: bool = True,
) -> dict[str, Any]:
    """A valid request: random lifetimes, sizes, alignments, barriers, pins and policy."""
    n = draw(st.integers(0, max_buffers))
    buffers: list[dict[str, Any]] = []
    for i in range(n):
        start = draw(st.integers(0, horizon - 1))
        end = draw(st.integers(start + 1, horizon))
        buf: dict[str, Any] = {
            "id": f"b{i}",
            "size": draw(st.integers(1, 64)),
            "start": start,
            "end": end,
            "alignment": draw(st.sampled_from([None, 1, 4, 16])),
        }
        buffers.append(buf)
    if pins and buffers:
        # Pin a few buffers on disjoint address ranges so pins never clash with each other.
        chosen = draw(st.lists(st.sampled_from(range(n)), max_size=3, unique=True))
        base = 0
        for i in chosen:
            align = buffers[i]["alignment"] or 1
            base = (base + align - 1) // align * align
            buffers[i]["offset"] = base
            base += buffers[i]["size"]
    top = max((b["end"] for b in buffers), default=0)
    request: dict[str, Any] = {
        "buffers": buffers,
        "barriers": draw(st.lists(st.integers(0, top), max_size=4)),
        "options": {
            "sync": sync or draw(st.sampled_from(["existing", "insert", "none"])),
            "time_limit": 2.0,  # seconds: room for the exact methods' budgets on a busy machine
        },
    }
    if request["options"]["sync"] == "insert" and draw(st.booleans()):
        request["options"]["barrier_candidates"] = draw(st.lists(st.integers(0, top), max_size=5))
    if max_new and request["options"]["sync"] == "insert" and draw(st.booleans()):
        request["options"]["max_new_barriers"] = draw(st.integers(0, 3))
    if capacity and draw(st.booleans()):
        request["capacity"] = draw(st.integers(1, 400))
    return request


def requests(**kwargs: Any) -> st.SearchStrategy[PlanRequest]:
    """Validated requests."""
    return request_dicts(**kwargs).map(PlanRequest.model_validate)
