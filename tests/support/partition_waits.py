"""Small warp-specialised programs whose asynchronous accesses a wait_group completes: a
hypothesis strategy drawing three buffers over two or three partitions, with ``cp.async``
writes, TMA reads and ``mma`` reads among the thread accesses, random wait_groups (of either
partition, any group, ``pending`` 0 or 1) and random syncs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from planner.core.models import PlanRequest
from tests.support.partition_programs import access, drawn_orders

__all__ = ["AGENTS", "wait_programs"]

# Each asynchronous access a wait_group completes: (agent, op) by its group.
AGENTS = {"cp.async": ("cp.async", "write"), "bulk": ("tma", "read"), "wgmma": ("mma", "read")}
HORIZON = 8


@st.composite
def wait_programs(
    draw: st.DrawFn, names: tuple[str, ...] = ("producer", "consumer"), sync: str = "none"
) -> PlanRequest:
    """Three buffers one after the other (the middle one sometimes overlapping the first),
    each with one or two accesses, at least one asynchronous in the program; wait_groups of
    the request at random points, some covering, some not (sync "none" lets the plan require
    the missing ones)."""
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    cuts = sorted(draw(st.lists(st.integers(2, HORIZON - 2), min_size=2, max_size=2, unique=True)))
    spans = [(0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], HORIZON)]
    if draw(st.booleans()):
        spans[1] = (max(0, cuts[0] - 1), cuts[1])
    groups: list[str] = []
    for n, (s, e) in enumerate(spans):
        accesses = []
        for _ in range(draw(st.integers(1, 2))):
            at = draw(st.integers(s, e - 1))
            part = draw(st.sampled_from(names))
            kind = draw(st.sampled_from(["write", "read", "async", "async"]))
            if kind == "async":
                group = draw(st.sampled_from(sorted(AGENTS)))
                agent, op = AGENTS[group]
                accesses.append(access(op, at, part, agent=agent))
                groups.append(group)
            else:
                accesses.append(access(kind, at, part))
        buffers.append(
            {"id": f"b{n}", "size": 64 * (n + 1), "start": s, "end": e, "accesses": accesses}
        )
    for _ in range(draw(st.integers(0, 2)) if groups else 0):
        syncs.append(
            {
                "kind": "wait_group",
                "at": draw(st.integers(1, HORIZON)),
                "group": draw(st.sampled_from(groups)),
                "pending": draw(st.sampled_from([0, 0, 1])),
                "partition": draw(st.sampled_from(names)),
            }
        )
    syncs += drawn_orders(draw, names, HORIZON)
    barriers = sorted(set(draw(st.lists(st.integers(1, HORIZON), max_size=1))))
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "barriers": barriers,
            "buffers": buffers,
            "syncs": syncs,
            "options": {"sync": sync},
        }
    )
