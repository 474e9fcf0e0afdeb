"""Small warp-specialised programs with a loop (and maybe a branch) for the partition loop
tests: a hypothesis strategy, and the brute force over interleavings run on each path."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import note, reject
from hypothesis import strategies as st
from pydantic import ValidationError

import planner
from planner.core.errors import RequestError
from planner.core.models import Plan, PlanRequest
from planner.core.partition_paths import Path
from planner.validators.emulator import emulate
from tests.support.interleavings import ordered_pairs
from tests.support.partition_programs import access, drawn_buffer, edge

__all__ = ["looped_programs", "path_truth", "planned_under", "tile_and_epilogue"]

_TRIPS: list[dict[str, int]] = [
    {"trips": 1},
    {"trips": 2},
    {"trips": 3},
    {"max_trips": 2},
    {"min_trips": 1, "max_trips": 2},
    {},
]


def tile_and_epilogue(epilogue_write: dict[str, Any]) -> list[dict[str, Any]]:
    """A K loop's tile (points 1-5: the producer writes it at 1, the consumer reads it at 3)
    and the epilogue buffer after it (points 5-7: ``epilogue_write`` at 5, the consumer reads
    it at 6)."""
    return [
        {
            "id": "tile",
            "size": 256,
            "start": 1,
            "end": 5,
            "accesses": [access("write", 1, "producer"), access("read", 3, "consumer")],
        },
        {
            "id": "out",
            "size": 256,
            "start": 5,
            "end": 7,
            "accesses": [epilogue_write, access("read", 6, "consumer")],
        },
    ]


_ASYNC = {"read": ("mma", "read"), "write": ("cp.async", "write")}  # completed by a wait_group


@st.composite
def looped_programs(
    draw: st.DrawFn,
    names: tuple[str, ...] = ("producer", "consumer"),
    waits: bool = False,
    fences: bool = False,
) -> PlanRequest:
    """Three buffers over ``names`` with one loop and maybe one branch, random syncs;
    ``waits``: some thread accesses are ``mma`` reads or ``cp.async`` writes that no
    wait_group of the request covers (sync "insert": the plan adds the waits); ``fences``:
    up to two proxy fences of the request, mostly right after a thread write by its
    partition, else at any point by any partition."""
    horizon = 8
    ls = draw(st.integers(1, 3))
    le = draw(st.integers(ls + 2, min(ls + 3, horizon - 1)))
    loop = {"start": ls, "end": le, **draw(st.sampled_from(_TRIPS))}
    branches: list[dict[str, Any]] = []
    if draw(st.booleans()):
        bs, be = draw(st.sampled_from([(ls, le), (le, horizon), (0, ls)]))
        if be - bs >= 2:
            mid = draw(st.integers(bs + 1, be - 1))
            branches.append({"arms": [[bs, mid], [mid, be]]})
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    for n in range(3):
        s = draw(st.integers(0, horizon - 1))
        e = draw(st.integers(s + 1, min(s + 4, horizon)))
        buffer = drawn_buffer(draw, n, (s, e), names, syncs)
        for a in buffer["accesses"]:
            if waits and a.get("agent") is None and draw(st.booleans()):
                a["agent"], a["op"] = _ASYNC[a["op"]]
        buffers.append(buffer)
    barriers: list[int] = []
    if fences:
        barriers += _drawn_fences(draw, names, buffers, horizon, syncs)
    barriers += draw(st.lists(st.integers(0, horizon), max_size=1))
    back = draw(st.sampled_from(["none", "barrier", "edge"]))  # what orders one trip's end
    if back == "barrier":  # before the next trip's start
        barriers.append(ls)
    elif back == "edge":
        by, to = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        syncs += edge("back", le - 1, by, ls, to)
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["edge", "named", "block"]))
        at = draw(st.integers(0, horizon))
        if kind == "edge":
            wait = draw(st.integers(0, horizon))
            by, to = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            syncs += edge(f"e{at}{wait}", at, by, wait, to)
        elif kind == "named":
            members = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            syncs.append({"kind": "named_barrier", "at": at, "id": 1, "partitions": members})
        else:
            barriers.append(at)
    try:
        return PlanRequest.model_validate(
            {
                "partitions": [
                    {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
                ],
                "loops": [loop],
                "branches": branches,
                "barriers": sorted(set(barriers)),
                "buffers": buffers,
                "syncs": syncs,
                "options": {"sync": "insert" if waits else "existing"},
            }
        )
    except ValidationError:
        reject()


def _drawn_fences(
    draw: st.DrawFn,
    names: tuple[str, ...],
    buffers: list[dict[str, Any]],
    horizon: int,
    syncs: list[dict[str, Any]],
) -> list[int]:
    """Up to two proxy fences into ``syncs``: mostly one point after a thread write, by its
    partition, and then often a block barrier at that point (it runs after the fence): the
    points of those barriers."""
    writes = [
        (a["at"], a["partition"])
        for b in buffers
        for a in b["accesses"]
        if a["op"] == "write" and a.get("agent") is None
    ]
    barriers: list[int] = []
    for _ in range(draw(st.integers(0, 2))):
        if writes and draw(st.sampled_from([True, True, False])):
            at, by = draw(st.sampled_from(writes))
            at = min(at + 1, horizon)
            if draw(st.booleans()):
                barriers.append(at)
        else:
            at, by = draw(st.integers(1, horizon)), draw(st.sampled_from(names))
        syncs.append({"kind": "fence_proxy_async", "at": at, "partition": by})
    return barriers


def path_truth(
    paths: list[Path], n: int
) -> tuple[bool, set[tuple[int, int]], set[tuple[int, int]]]:
    """By the brute force on every path (its proxy fences included): whether every buffer's
    own instances are ordered, the buffer pairs (i, j), i != j, every instance pair of which
    is ordered one way on every path (neither live together), and the pairs live together on
    some path."""
    own = True
    bad: set[tuple[int, int]] = set()
    live: set[tuple[int, int]] = set()
    for path in paths:
        truth = ordered_pairs(path.request)
        bufs = path.request.buffers
        for a, b in itertools.combinations(range(len(path.buffer)), 2):
            if (a, b) in truth or (b, a) in truth:
                continue
            i, j = path.buffer[a], path.buffer[b]
            if bufs[a].start < bufs[b].end and bufs[b].start < bufs[a].end:
                live |= {(i, j), (j, i)}
            if i == j:
                own = False
            else:
                bad |= {(i, j), (j, i)}
    good = {(i, j) for i in range(n) for j in range(n) if i != j and (i, j) not in bad}
    return own, good, live


def planned_under(req: PlanRequest, sync: str) -> tuple[PlanRequest, dict[str, Any], Plan | None]:
    """``req`` under ``sync``, its JSON, and its plan (validated inside ``planner.plan`` and
    by the emulator), or None where no allowed point orders a buffer's own instances."""
    data = req.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("options", {})["sync"] = sync
    req = PlanRequest.model_validate(data)
    note(req.model_dump_json(exclude_defaults=True))
    refused: RequestError | None = None
    try:
        plan = planner.plan(req)  # validated inside: the static check runs on every plan
    except RequestError as err:
        refused = err
    if refused is not None:
        assert [e["type"] for e in refused.errors] == ["unprotected_reuse"]
        return req, data, None
    assert emulate(req, plan).valid
    return req, data, plan
