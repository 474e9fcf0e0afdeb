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

__all__ = ["HORIZON", "fence_programs", "fenced_rings"]

HORIZON = 8
# What an access may be: a generic-proxy write, a thread read, or an async-proxy access.
_KINDS = ["write", "cp.async", "read", "tma_write", "tma_read", "mma"]
_ASYNC = {"cp.async": ("cp.async", "write"), "tma_read": ("tma", "read"), "mma": ("mma", "read")}
# Accesses a wait_group completes, at most: each thread's copy lands on its own, so every one
# doubles the brute force's states twice over.
MAX_COPIES = 1


@st.composite
def fence_programs(
    draw: st.DrawFn, names: tuple[str, ...] = ("producer", "consumer"), sync: str = "none"
) -> PlanRequest:
    """Three buffers one after the other (the middle one sometimes overlapping the first),
    each with one or two accesses; a TMA write comes with its expect_tx and an mbarrier wait
    by a drawn partition inside its lifetime, the other asynchronous accesses (``MAX_COPIES``
    at most) with no wait (sync "none" lets the plan require them); up to three proxy
    fences, each mostly near a generic write (at its point, so before it, or one or two
    points later) and by the writing partition, else anywhere by a drawn one; one or two block
    barriers, mostly where one buffer hands over to the next, and random syncs."""
    cuts = sorted(draw(st.lists(st.integers(2, HORIZON - 2), min_size=2, max_size=2, unique=True)))
    spans = [(0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], HORIZON)]
    if draw(st.booleans()):
        spans[1] = (max(0, cuts[0] - 1), cuts[1])
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    writes: list[tuple[int, str]] = []  # (point, partition) of each generic write
    copies = 0
    for n, (s, e) in enumerate(spans):
        accesses = []
        for _ in range(draw(st.integers(1, 2))):
            at = draw(st.integers(s, e - 1))
            part = draw(st.sampled_from(names))
            kind = draw(st.sampled_from(_KINDS))
            if kind in _ASYNC and copies == MAX_COPIES:
                kind = "write" if kind == "cp.async" else "tma_write"
            copies += kind in _ASYNC
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
                kind = "read" if kind == "read" else "write"
                accesses.append(access(kind, at, part))
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
    barriers = draw(
        st.lists(st.sampled_from([*handovers, *range(1, HORIZON + 1)]), min_size=1, max_size=2)
    )
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


@st.composite
def fenced_rings(draw: st.DrawFn) -> PlanRequest:
    """A producer writes a tile in each trip of a loop over 1 to 4 (a thread write, or a
    ``cp.async`` write with its wait at 2), hands it to the consumer by an arrive/wait
    (2 -> 3), maybe gets the slot back by another (4 -> the next trip's 1); after the loop
    the consumer's epilogue buffer takes its first access at 5 (a TMA write, an ``mma`` read
    or a thread write). Drawn: the loop's trips, proxy fences before or after the write, at
    the loop's end or after it, by either partition, and block barriers at 2, 4 or 5."""
    trips = draw(st.sampled_from([{"trips": 1}, {"trips": 2}, {"max_trips": 2}, {}]))
    writer = draw(st.sampled_from(["threads", "cp.async"]))
    syncs: list[dict[str, Any]] = [
        {"kind": "mbarrier_arrive", "at": 2, "mbarrier": "full", "partition": "producer"},
        {"kind": "mbarrier_wait", "at": 3, "mbarrier": "full", "partition": "consumer"},
    ]
    if draw(st.booleans()):
        syncs += [
            {"kind": "mbarrier_arrive", "at": 4, "mbarrier": "empty", "partition": "consumer"},
            {"kind": "mbarrier_wait", "at": 1, "mbarrier": "empty", "partition": "producer"},
        ]
    if writer == "cp.async":
        tile_write = access("write", 1, "producer", agent="cp.async")
        syncs.append({"kind": "wait_group", "at": 2, "group": "cp.async", "partition": "producer"})
    else:
        tile_write = access("write", 1, "producer")
    reader = draw(st.sampled_from(["tma", "mma", "threads"]))
    if reader == "tma":
        first = access("write", 5, "consumer", agent="tma", mbarrier="landed")
        syncs += [
            {"kind": "expect_tx", "at": 5, "mbarrier": "landed", "partition": "consumer"},
            {"kind": "mbarrier_wait", "at": 6, "mbarrier": "landed", "partition": "consumer"},
        ]
    elif reader == "mma":
        first = access("read", 5, "consumer", agent="mma")
        syncs.append({"kind": "wait_group", "at": 6, "group": "wgmma", "partition": "consumer"})
    else:
        first = access("write", 5, "consumer")
    spots = [(1, "producer"), (2, "producer"), (2, "consumer"), (4, "producer")]
    spots += [(5, "producer"), (5, "consumer"), (3, "producer")]
    for at, by in draw(st.lists(st.sampled_from(spots), max_size=2, unique=True)):
        syncs.append({"kind": "fence_proxy_async", "at": at, "partition": by})
    barriers = draw(st.lists(st.sampled_from([2, 4, 5]), max_size=2, unique=True))
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": "producer", "threads": [0, 128]},
                {"id": "consumer", "threads": [128, 256]},
            ],
            "loops": [{"start": 1, "end": 5, **trips}],
            "barriers": sorted(barriers),
            "buffers": [
                {
                    "id": "tile",
                    "size": 256,
                    "start": 1,
                    "end": 5,
                    "accesses": [tile_write, access("read", 3, "consumer")],
                },
                {
                    "id": "out",
                    "size": 256,
                    "start": 5,
                    "end": 7,
                    "accesses": [first, access("read", 6, "consumer")],
                },
            ],
            "syncs": syncs,
            "options": {"sync": "existing"},
        }
    )
