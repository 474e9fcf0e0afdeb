"""Random small programs with asynchronous accesses and few or no syncs, under sync "insert"
and "none": the waits the plan lists, the refusals, and the static check's ``missing_wait``
agree with a direct reading of docs/design.md (Asynchronous accesses, Sync policies) written
here point by point: an access is complete when a wait of its group runs after its issue, in
the same loops and arms, by the end of its range, leaving its group no longer in flight; the
plan's wait for an access that none completes is at the first such point."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.validators.emulator import emulate

HORIZON = 12
# Loop and branch shapes: (loops as (start, end), branch arms as (start, end)).
SHAPES: list[tuple[list[tuple[int, int]], list[tuple[int, int]]]] = [
    ([], []),
    ([(2, 7)], []),
    ([(2, 8), (4, 6)], []),
    ([], [(6, 8), (8, 10)]),
    ([(1, 11)], [(5, 7), (7, 9)]),
]
GROUPS = {"cp.async": ("cp.async", "write"), "bulk": ("tma", "read"), "wgmma": ("mma", "read")}
GROUP_OF = {agent_op: group for group, agent_op in GROUPS.items()}

Access = tuple[int, str, int]  # (issue point, group, end of its range)


def _scope(p: int, shape: int) -> tuple[frozenset[int], frozenset[int]]:
    loops, arms = SHAPES[shape]
    return (
        frozenset(k for k, (s, e) in enumerate(loops) if s <= p < e),
        frozenset(k for k, (s, e) in enumerate(arms) if s <= p < e),
    )


def _covered(
    a: Access, waits: list[tuple[int, str, int]], issues: list[Access], shape: int
) -> bool:
    """Whether a wait ``(at, group, pending)`` completes ``a``: of its group, in its scope,
    after the issue and by its range's end, with fewer than ``pending`` of the group's issue
    points of that scope between."""
    at, group, end = a
    here = _scope(at, shape)
    for w, g, pending in waits:
        if g != group or not at < w <= end or _scope(w, shape) != here:
            continue
        later = {p for p, h, _ in issues if h == group and at < p < w and _scope(p, shape) == here}
        if len(later) >= pending:
            return True
    return False


def _first_point(a: Access, shape: int) -> int | None:
    at, _, end = a
    return next((p for p in range(at + 1, end + 1) if _scope(p, shape) == _scope(at, shape)), None)


@st.composite
def programs(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    """Two to four buffers, each inside one scope of a drawn shape (the whole program, a loop
    body, an arm), with one or two asynchronous accesses and maybe a thread write, and
    zero to two wait_groups of the request."""
    shape = draw(st.integers(0, len(SHAPES) - 1))
    loops, arms = SHAPES[shape]
    regions = [(0, HORIZON), *loops, *arms]
    buffers: list[dict[str, Any]] = []
    for i in range(draw(st.integers(2, 4))):
        lo, hi = draw(st.sampled_from(regions))
        start = draw(st.integers(lo, hi - 1))
        end = draw(st.integers(start + 1, hi))
        accesses: list[dict[str, Any]] = []
        if draw(st.booleans()):
            accesses.append({"op": "write", "at": start, "bytes": 4, "threads": "all"})
        for _ in range(draw(st.integers(1, 2))):
            agent, op = GROUPS[draw(st.sampled_from(list(GROUPS)))]
            # Mostly before the range's last point, which leaves a point for a wait.
            at = draw(st.integers(start, max(start, end - 1 - draw(st.integers(0, 1)))))
            accesses.append({"op": op, "at": at, "bytes": 4, "threads": "all", "agent": agent})
        buffers.append(
            {"id": f"b{i}", "size": 16, "start": start, "end": end, "accesses": accesses}
        )
    top = max(b["end"] for b in buffers)  # a sync past every lifetime is refused
    syncs = [
        {
            "kind": "wait_group",
            "at": draw(st.integers(1, top)),
            "group": draw(st.sampled_from(list(GROUPS))),
            "pending": draw(st.integers(0, 1)),
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    data = {
        "target": "sm_90",
        "block": [4],
        "syncs": syncs,
        "loops": [{"start": s, "end": e, "trips": 2} for s, e in loops],
        "branches": [{"arms": [list(arm) for arm in arms]}] if arms else [],
        "buffers": buffers,
        "options": {"sync": draw(st.sampled_from(["insert", "none"])), "time_limit": 2.0},
    }
    return data, shape


def _accesses(data: dict[str, Any]) -> list[Access]:
    return [
        (a["at"], GROUP_OF[a["agent"], a["op"]], b["end"])
        for b in data["buffers"]
        for a in b["accesses"]
        if "agent" in a
    ]


def _refusals(data: dict[str, Any]) -> set[str]:
    """The error types the request is refused with; none when it is taken."""
    try:
        parse_request(data)
    except RequestError as error:
        return {e["type"] for e in error.errors}
    return set()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_waits_and_missing_wait_agree_with_a_direct_check(
    drawn: tuple[dict[str, Any], int], pick: st.DataObject
) -> None:
    data, shape = drawn
    issues = _accesses(data)
    given_waits = [(s["at"], s["group"], s["pending"]) for s in data["syncs"]]
    open_ = [a for a in issues if not _covered(a, given_waits, issues, shape)]
    expected = {(_first_point(a, shape), a[1]) for a in open_}
    pointless = any(p is None for p, _ in expected)  # an open access with no point for a wait
    refused = _refusals(data)
    if refused:
        assert ("uncovered_async_access" in refused) == pointless
        return
    assert not pointless
    request = parse_request(data)
    try:
        plan = planner.plan(request)
    except RequestError:
        return  # a buffer that reuses its own bytes with no barrier point left
    origin = "inserted" if data["options"]["sync"] == "insert" else "required"
    assert {(w.at, w.kind) for w in plan.waits} == expected
    assert {w.origin for w in plan.waits} <= {origin}
    assert planner.validate(request, plan).valid
    assert emulate(request, plan).valid
    # Keep a drawn subset of the plan's waits: missing_wait exactly when an access is left
    # open, for the static check and the emulator alike.
    kept = [w for w in plan.waits if pick.draw(st.booleans())]
    broken = plan.model_copy(update={"waits": kept})
    running = given_waits + [(w.at, w.kind, 0) for w in kept]
    left = any(not _covered(a, running, issues, shape) for a in issues)
    static = {v.code for v in planner.validate(request, broken).violations}
    emulated = {v.code for v in emulate(request, broken).violations}
    assert ("missing_wait" in static) == left
    assert ("missing_wait" in emulated) == left
