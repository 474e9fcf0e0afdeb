"""Small warp-specialised programs for the partition tests: access and arrive/wait helpers,
and a hypothesis strategy drawing random programs of three buffers over two or three
partitions with random syncs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from planner.core.models import Plan, PlanRequest
from planner.validators.program import with_plan_syncs

__all__ = ["THREE", "access", "drawn_buffer", "edge", "programs"]


def access(op: str, at: int, part: str, **more: Any) -> dict[str, Any]:
    """One access of four bytes by every thread of partition ``part``."""
    return {"op": op, "at": at, "bytes": 4, "threads": "all", "partition": part, **more}


def edge(m: str, arrive: int, by: str, wait: int, to: str) -> list[dict[str, Any]]:
    """An arrive by ``by`` at ``arrive`` on mbarrier ``m`` that ``to`` waits for at ``wait``."""
    return [
        {"kind": "mbarrier_arrive", "at": arrive, "mbarrier": m, "partition": by},
        {"kind": "mbarrier_wait", "at": wait, "mbarrier": m, "partition": to},
    ]


def drawn_buffer(
    draw: st.DrawFn,
    n: int,
    span: tuple[int, int],
    names: tuple[str, ...],
    syncs: list[dict[str, Any]],
) -> dict[str, Any]:
    """Buffer ``b{n}`` (``64 * (n + 1)`` bytes) live on ``span`` with one or two accesses
    by drawn partitions: a thread read or write, or a TMA write whose expect_tx and covering
    mbarrier wait (by a drawn partition) go to ``syncs``."""
    s, e = span
    accesses = []
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.integers(s, e - 1))
        part = draw(st.sampled_from(names))
        kind = draw(st.sampled_from(["write", "read", "tma"]))
        if kind == "tma" and at + 1 < e:
            m = f"m{n}"
            wait = draw(st.integers(at + 1, e))
            accesses.append(access("write", at, part, agent="tma", mbarrier=m))
            syncs.append({"kind": "expect_tx", "at": at, "mbarrier": m, "partition": part})
            who = draw(st.sampled_from(names))
            syncs.append({"kind": "mbarrier_wait", "at": wait, "mbarrier": m, "partition": who})
        else:
            accesses.append(access("read" if kind == "tma" else kind, at, part))
    return {"id": f"b{n}", "size": 64 * (n + 1), "start": s, "end": e, "accesses": accesses}


THREE = ("producer", "consumer0", "consumer1")  # named barriers of two of three


@st.composite
def programs(draw: st.DrawFn, names: tuple[str, ...] = ("producer", "consumer")) -> PlanRequest:
    horizon = 9
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    cuts = sorted(draw(st.lists(st.integers(1, horizon - 1), min_size=2, max_size=2, unique=True)))
    spans = [(0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], horizon)]
    if draw(st.booleans()):  # a pair live together
        spans[1] = (max(0, cuts[0] - 1), cuts[1])
    for n, (s, e) in enumerate(spans):
        buffers.append(drawn_buffer(draw, n, (s, e), names, syncs))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["edge", "named", "block"]))
        at = draw(st.integers(1, horizon))
        if kind == "edge":
            wait = draw(st.integers(at + 1, horizon + 1))
            by, to = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            syncs += edge(f"e{at}{wait}", at, by, min(wait, horizon), to)
        elif kind == "named":
            members = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            syncs.append({"kind": "named_barrier", "at": at, "id": 1, "partitions": members})
    barriers = sorted(set(draw(st.lists(st.integers(1, horizon), max_size=1))))
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "barriers": barriers,
            "buffers": buffers,
            "syncs": [s for s in syncs if s["at"] <= horizon],
            "options": {"sync": "existing"},
        }
    )


def drawn_orders(draw: st.DrawFn, names: tuple[str, ...], horizon: int) -> list[dict[str, Any]]:
    """Up to three syncs between partitions, each an arrive/wait edge or a named barrier of
    some of ``names``, at points below ``horizon``."""
    syncs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["edge", "named"]))
        at = draw(st.integers(1, horizon - 1))
        if kind == "edge":
            wait = draw(st.integers(at + 1, horizon))
            by, to = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            syncs += edge(f"e{at}{wait}", at, by, wait, to)
        else:
            members = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            syncs.append({"kind": "named_barrier", "at": at, "id": 1, "partitions": members})
    return syncs


def kernel_as_run(req: PlanRequest, plan: Plan) -> PlanRequest:
    """The kernel as it runs: the request's syncs and barriers, and those the plan adds."""
    return with_plan_syncs(req, plan).model_copy(
        update={"barriers": sorted({*req.barriers, *plan.barriers.required})}
    )
