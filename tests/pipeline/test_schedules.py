"""Plans are safe under every schedule the request allows: loops that may run zero times,
loops of one trip, broadcasts without ``block``, and both validators reject the racy plans
that the planner once returned for them."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_plan, parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from tests.support.schedules import TooManyExecutionsError, races, trip_counts

BROADCAST = {"bytes": 4, "threads": "all"}
# Two buffers each written and read by every thread, one after the other (no block).
BROADCASTS: dict[str, Any] = {
    "buffers": [
        {
            "id": "a",
            "size": 64,
            "start": 0,
            "end": 2,
            "accesses": [
                {"op": "write", "at": 0, **BROADCAST},
                {"op": "read", "at": 1, **BROADCAST},
            ],
        },
        {
            "id": "b",
            "size": 64,
            "start": 2,
            "end": 4,
            "accesses": [
                {"op": "write", "at": 2, **BROADCAST},
                {"op": "read", "at": 3, **BROADCAST},
            ],
        },
    ],
    "options": {"sync": "insert"},
}
# a before a loop whose count is known only at run time, b after it; the only barrier is in
# the body.
ZERO_TRIPS: dict[str, Any] = {
    "loops": [{"start": 2, "end": 4, "trips": None}],
    "barriers": [3],
    "buffers": [
        {"id": "a", "size": 64, "start": 0, "end": 2},
        {"id": "b", "size": 64, "start": 4, "end": 6},
    ],
    "options": {"sync": "existing"},
}


def _codes(req: PlanRequest, plan: Plan) -> tuple[set[str], set[str]]:
    static: set[str] = {v.code for v in validate_plan(req, plan).violations}
    emulated: set[str] = {v.code for v in emulate(req, plan).violations}
    return static, emulated


def _at_offsets(plan: Plan, offsets: dict[str, int], **barriers: list[int]) -> Plan:
    data = plan.model_dump()
    for p in data["placements"]:
        p["offset"] = offsets[p["id"]]
    data["arena_bytes"] = max(p["offset"] + p["size"] for p in data["placements"])
    data["barriers"].update(barriers)
    data["diagnostics"] = []
    return parse_plan(data)


def test_broadcasts_without_block_get_their_barrier() -> None:
    req = parse_request(BROADCASTS)
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    shared = {p.id: p.offset for p in plan.placements}
    if shared["a"] == shared["b"]:
        assert plan.barriers.inserted == [2]
    assert "thread_local_alias" not in {d.code for d in plan.diagnostics}
    assert races(req, plan) == []


def test_both_validators_reject_broadcasts_sharing_bytes_without_a_barrier() -> None:
    req = parse_request(BROADCASTS)
    racy = _at_offsets(planner.plan(req), {"a": 0, "b": 0}, inserted=[], required=[])
    static, emulated = _codes(req, racy)
    assert "missing_barrier" in static
    assert "race" in emulated
    assert emulate(req, racy).threads == 2  # never one thread unless the request says so
    assert races(req, racy)


def test_a_block_of_one_thread_is_one_thread() -> None:
    req = parse_request({**BROADCASTS, "block": [1]})
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    assert plan.arena_bytes == 64
    assert plan.barriers.inserted == []
    assert _codes(req, plan) == (set(), set())
    assert races(req, plan) == []


def test_a_barrier_in_a_loop_that_may_run_zero_times_protects_nothing_across_it() -> None:
    req = parse_request(ZERO_TRIPS)
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["a"] != offsets["b"]  # the barrier at 3 may not run: no reuse
    assert races(req, plan) == []
    racy = _at_offsets(plan, {"a": 0, "b": 0}, required=[3])
    static, emulated = _codes(req, racy)
    assert "missing_barrier" in static
    assert "race" in emulated
    assert races(req, racy)


@pytest.mark.parametrize(
    "loop", [{"min_trips": 1}, {"trips": 3}, {"min_trips": 1, "max_trips": 4}, {"trips": 1}]
)
def test_a_loop_known_to_run_protects_the_reuse_across_it(loop: dict[str, Any]) -> None:
    req = parse_request({**ZERO_TRIPS, "loops": [{"start": 2, "end": 4, **loop}]})
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    assert plan.arena_bytes == 64
    assert plan.barriers.required == [3]
    assert races(req, plan) == []


def test_barrier_executions_count_the_stated_bounds() -> None:
    data = {**ZERO_TRIPS, "options": {"sync": "existing"}}
    for loop, runs in (
        ({"trips": 7}, 7),
        ({"max_trips": 9}, 9),
        ({"min_trips": 2}, 1000),
        ({"min_trips": 4000}, 4000),
        ({}, 1000),
    ):
        req = parse_request({**data, "loops": [{"start": 2, "end": 4, **loop}]})
        plan = planner.plan(req)
        assert validate_plan(req, plan).valid
        assert plan.barriers.executions == runs, loop


@pytest.mark.parametrize(
    ("loop", "field", "kind"),
    [
        ({"trips": 2, "min_trips": 1}, "min_trips", "trips_and_bounds"),
        ({"trips": 2, "max_trips": 3}, "max_trips", "trips_and_bounds"),
        ({"min_trips": 5, "max_trips": 3}, "max_trips", "trips_bounds_reversed"),
        ({"max_trips": 0}, "max_trips", "greater_than_equal"),
        ({"min_trips": -1}, "min_trips", "greater_than_equal"),
    ],
)
def test_rejects_contradictory_trip_counts(loop: dict[str, Any], field: str, kind: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request({**ZERO_TRIPS, "loops": [{"start": 2, "end": 4, **loop}]})
    errors = info.value.errors
    assert any(e["loc"] == ["loops", 0, field] and e["type"] == kind for e in errors), errors


def test_a_loop_of_one_trip_needs_no_back_edge_in_planner_and_validator() -> None:
    # y takes x's bytes after the barrier at 3; the body runs once, so nothing comes back.
    data = {
        "loops": [{"start": 1, "end": 5, "trips": 1}],
        "barriers": [3],
        "buffers": [
            {"id": "x", "size": 256, "start": 1, "end": 3},
            {"id": "y", "size": 256, "start": 3, "end": 5},
        ],
        "options": {"sync": "existing"},
    }
    for loop in ({"trips": 1}, {"max_trips": 1}):
        req = parse_request({**data, "loops": [{"start": 1, "end": 5, **loop}]})
        plan = planner.plan(req)
        assert plan.arena_bytes == 256
        assert plan.barriers.required == [3]
        assert _codes(req, plan) == (set(), set())
        assert races(req, plan) == []
    # Two trips: the same placement needs a barrier between y's last access and x's next first.
    req = parse_request({**data, "loops": [{"start": 1, "end": 5, "trips": 2}]})
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    assert races(req, plan) == []
    racy = _at_offsets(plan, {"x": 0, "y": 0}, required=[3])
    static, emulated = _codes(req, racy)
    assert "missing_barrier" in static
    assert "race" in emulated
    assert races(req, racy)


def test_trip_counts_cover_zero_to_three_within_the_bounds() -> None:
    def counts(loop: dict[str, Any]) -> list[int]:
        return trip_counts(
            parse_request({**ZERO_TRIPS, "loops": [{"start": 2, "end": 4, **loop}]}), 0
        )

    assert counts({}) == [0, 1, 2, 3]
    assert counts({"min_trips": 1}) == [1, 2, 3]
    assert counts({"max_trips": 1}) == [0, 1]
    assert counts({"trips": 2}) == [2]
    assert counts({"trips": 9}) == [3]


TRIPS: list[dict[str, Any]] = [
    {},
    {"trips": None},
    {"trips": 1},
    {"trips": 2},
    {"trips": 5},
    {"min_trips": 1},
    {"max_trips": 1},
    {"min_trips": 0, "max_trips": 2},
]


def _loops(rng: random.Random, horizon: int) -> list[dict[str, Any]]:
    shape = rng.choice(["one", "one", "nested", "two", "none"])
    if shape == "one":
        s = rng.randint(0, horizon - 2)
        return [{"start": s, "end": rng.randint(s + 1, horizon), **rng.choice(TRIPS)}]
    if shape == "nested":
        s = rng.randint(0, horizon - 4)
        e = rng.randint(s + 3, horizon)
        s2 = rng.randint(s, e - 2)
        e2 = rng.randint(s2 + 1, e - 1 if s2 == s else e)
        return [
            {"start": s, "end": e, **rng.choice(TRIPS)},
            {"start": s2, "end": e2, **rng.choice(TRIPS)},
        ]
    if shape == "two":
        m = rng.randint(1, horizon - 1)
        return [
            {"start": 0, "end": m, **rng.choice(TRIPS)},
            {"start": m, "end": horizon, **rng.choice(TRIPS)},
        ]
    return []


def _accesses(rng: random.Random, ranges: list[list[int]], size: int, threads: int) -> list[Any]:
    """Accesses at some points of the ranges: broadcasts, loop-indexed (every thread the same
    elements) or, with a block that fits, one element per thread."""
    patterns: list[dict[str, Any]] = [
        {"bytes": 4, "threads": "all"},
        {"bytes": 4, "index": {"i": 1}, "loops": {"i": size // 4}},
    ]
    if 0 < threads <= size // 4:
        patterns.append({"bytes": 4, "index": {"threadIdx.x": 1}})
    out: list[Any] = []
    for s, e in ranges:
        for at in sorted({s, rng.randint(s, e - 1), e - 1}):
            op = "write" if at == s else rng.choice(["read", "write"])
            out.append({"op": op, "at": at, **rng.choice(patterns)})
    return out


def random_schedule_request(rng: random.Random) -> dict[str, Any]:
    """A small program: loops of every kind of trip count, maybe a branch, 2 to 4 buffers of
    4 to 12 bytes (with ranges, broadcasts or none, some pinned), maybe a block, random
    barriers and policy."""
    horizon = rng.randint(4, 8)
    data: dict[str, Any] = {"alignment": 4, "loops": _loops(rng, horizon)}
    if rng.random() < 0.3:
        s = rng.randint(0, horizon - 2)
        m = rng.randint(s + 1, horizon - 1)
        data["branches"] = [{"arms": [[s, m], [m, rng.randint(m + 1, horizon)]]}]
    threads = rng.choice([2, 3]) if rng.random() < 0.4 else 0
    if threads:
        data["block"] = [threads]
    buffers: list[dict[str, Any]] = []
    for k in range(rng.randint(2, 4)):
        size = rng.choice([4, 8, 12])
        s = rng.randint(0, horizon - 1)
        e = rng.randint(s + 1, horizon)
        item: dict[str, Any] = {"id": f"b{k}", "size": size}
        ranges = [[s, e]]
        if rng.random() < 0.25 and e + 1 < horizon:
            ranges.append([rng.randint(e + 1, horizon - 1), horizon])
            item["ranges"] = ranges
        else:
            item.update(start=s, end=e)
        if rng.random() < 0.6:
            item["accesses"] = _accesses(rng, ranges, size, threads)
        if rng.random() < 0.15:
            item["offset"] = rng.choice([0, 16])  # pinned by the caller
        buffers.append(item)
    data["buffers"] = buffers
    data["barriers"] = sorted(rng.sample(range(horizon), rng.randint(0, 2)))
    sync = rng.choice(["insert", "insert", "existing", "none"])
    data["options"] = {"sync": sync, "time_limit": 1.0}
    return data


def _declared(data: dict[str, Any], offsets: dict[str, int], aliases: list[list[str]]) -> set[str]:
    """The static check's codes for the plan of ``data`` moved to ``offsets``, with no new
    barrier and ``aliases`` declared by the caller."""
    req = parse_request(data)
    plan = _at_offsets(planner.plan(req), offsets, inserted=[], required=[])
    plan = plan.model_copy(update={"aliases": aliases})
    codes: set[str] = {v.code for v in validate_plan(req, plan).violations}
    return codes


def _thread_writes(index: dict[str, int], offset: int = 0) -> list[dict[str, Any]]:
    return [{"op": "write", "at": 0, "bytes": 4, "index": index, "offset": offset}]


def test_aliases_declared_by_the_caller_are_checked_not_trusted() -> None:
    plain = {
        **BROADCASTS,
        "buffers": [{k: v for k, v in b.items() if k != "accesses"} for b in BROADCASTS["buffers"]],
    }
    assert "bad_alias" in _declared(plain, {"a": 0, "b": 0}, [["a", "b"]])
    assert "bad_alias" in _declared(BROADCASTS, {"a": 0, "b": 0}, [["a", "b"]])  # no block
    write = _thread_writes({"threadIdx.x": 1})
    own: dict[str, Any] = {"id": "a", "size": 16, "start": 0, "end": 2, "accesses": write}
    later: dict[str, Any] = {**own, "id": "b", "start": 2, "end": 4}
    later["accesses"] = [{**write[0], "at": 2}]
    same = {"block": [4], "buffers": [own, later], "options": {"sync": "insert"}}
    assert _declared(same, {"a": 0, "b": 0}, [["a", "b"]]) == set()
    # b's thread t writes the element a's thread 3 - t wrote: another thread, a race.
    later["accesses"] = [{**write[0], "at": 2, "index": {"threadIdx.x": -1}, "offset": 3}]
    assert "bad_alias" in _declared(same, {"a": 0, "b": 0}, [["a", "b"]])


@pytest.mark.slow
@settings(
    max_examples=int(os.environ.get("SCHEDULE_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(st.randoms(use_true_random=False))
def test_every_plan_is_race_free_under_every_schedule(rng: random.Random) -> None:
    data = random_schedule_request(rng)
    try:
        req = parse_request(data)
        plan = planner.plan(req)
    except (ValidationError, RequestError):
        assume(False)
        return
    assert validate_plan(req, plan).valid, (data, plan.model_dump())
    try:
        found = races(req, plan)
    except TooManyExecutionsError:
        assume(False)
        return
    assert found == [], (data, plan.model_dump(), found[:3])
