"""Small warp-specialised programs where generic-proxy writes meet async-proxy accesses: a
hypothesis strategy drawing three buffers over two or three partitions with thread and
``cp.async`` writes, TMA writes and reads and ``mma`` reads, proxy fences at drawn points by
drawn partitions (none, before or after a write, by the writer or by another partition) and
random syncs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from planner.core.models import PlanRequest
from tests.support.partition_programs import access, drawn_orders

__all__ = ["HORIZON", "fence_programs"]

HORIZON = 8
# What an access may be: a generic-proxy write, a thread read, or an async-proxy access.
_KINDS = ["write", "cp.async", "read", "tma_write", "tma_read", "mma"]
_ASYNC = {"cp.async": ("cp.async", "write"), "tma_read": ("tma", "read"), "mma": ("mma", "read")}


@st.composite
def fence_programs(
    draw: st.DrawFn, names: tuple[str, ...] = ("producer", "consumer"), sync: str = "none"
) -> PlanRequest:
    """Three buffers one after the other (the middle one sometimes overlapping the first),
    each with one or two accesses; a TMA write comes with its expect_tx and an mbarrier wait
    by a drawn partition inside its lifetime, the other asynchronous accesses with no wait
    (sync "none" lets the plan require them); up to three proxy fences, each mostly near a
    generic write (at its point, so before it, or one or two points later) and by the writing
    partition, else anywhere by a drawn one; up to two block barriers, mostly where one
    buffer hands over to the next, and random syncs."""
    cuts = sorted(draw(st.lists(st.integers(2, HORIZON - 2), min_size=2, max_size=2, unique=True)))
    spans = [(0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], HORIZON)]
    if draw(st.booleans()):
        spans[1] = (max(0, cuts[0] - 1), cuts[1])
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    writes: list[tuple[int, str]] = []  # (point, partition) of each generic write
    for n, (s, e) in enumerate(spans):
        accesses = []
        for _ in range(draw(st.integers(1, 2))):
            at = draw(st.integers(s, e - 1))
            part = draw(st.sampled_from(names))
            kind = draw(st.sampled_from(_KINDS))
            if kind == "tma_write" and at + 1 < e:
                m = f"m{n}"
                accesses.append(access("write", at, part, agent="tma", mbarrier=m))
                syncs.append({"kind": "expect_tx", "at": at, "mbarrier": m, "partition": part})
                wait = {"kind": "mbarrier_wait", "at": draw(st.integers(at + 1, e)), "mbarrier": m}
                syncs.append({**wait, "partition": draw(st.sampled_from(names))})
            elif kind in _ASYNC:
                agent, op = _ASYNC[kind]
                accesses.append(access(op, at, part, agent=agent))
            else:
                accesses.append(access("read" if kind == "read" else "write", at, part))
            if kind in ("write", "cp.async"):
                writes.append((at, part))
        buffers.append(
            {"id": f"b{n}", "size": 64 * (n + 1), "start": s, "end": e, "accesses": accesses}
        )
    for _ in range(draw(st.integers(0, 3))):
        if writes and draw(st.sampled_from([True, True, True, False])):
            at, by = draw(st.sampled_from(writes))
            at += draw(st.sampled_from([0, 1, 1, 2]))
            if not draw(st.sampled_from([True, True, True, False])):
                by = draw(st.sampled_from(names))
        else:
            at, by = draw(st.integers(1, HORIZON)), draw(st.sampled_from(names))
        syncs.append({"kind": "fence_proxy_async", "at": min(at, HORIZON), "partition": by})
    syncs += drawn_orders(draw, names, HORIZON)
    # Block barriers: mostly where one buffer hands over to the next, so that many pairs
    # are ordered but for their fences.
    handovers = [*cuts, *cuts, *cuts]
    barriers = draw(st.lists(st.sampled_from([*handovers, *range(1, HORIZON + 1)]), max_size=2))
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "barriers": sorted(set(barriers)),
            "buffers": buffers,
            "syncs": syncs,
            "options": {"sync": sync},
        }
    )
