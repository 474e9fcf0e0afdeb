"""The every-arm rule at any depth: a reuse across a branch is protected when each arm holds
a barrier or a branch whose every arm does (nested branches, inside loops). Checked on a
hand-made kernel and against the brute force over every execution of small random programs
with nested branches (tests/loops_nested.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.pipeline.program import build_program
from tests.support.control_flow import plan_at, planned_programs
from tests.support.loops_brute import check
from tests.support.loops_nested import random_nested


def _request(sync: str, barriers: list[int]) -> dict[str, Any]:
    # A loop over [2, 10) whose body is an if/else; the if arm holds another if/else from its
    # first point. ``c`` covers the body: its back edge meets the first point of every path.
    return {
        "name": "nested_branch_at_loop_start",
        "barriers": barriers,
        "loops": [{"start": 2, "end": 10, "trips": 4}],
        "branches": [{"arms": [[2, 6], [6, 10]]}, {"arms": [[2, 4], [4, 6]]}],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2},
            {"id": "c", "size": 64, "start": 2, "end": 10},
            {"id": "d", "size": 64, "start": 10, "end": 12},
        ],
        "options": {"sync": sync, "time_limit": 2.0},
    }


def _checked(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    req = parse_request(data)
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    problems, _ = check(req, plan)
    assert not problems, problems[:3]
    return req, plan


def test_barriers_in_every_arm_of_the_inner_branch_protect_the_back_edge() -> None:
    # 2 opens the inner if arm, 4 its else arm, 6 the outer else arm: every path.
    req, plan = _checked(_request("existing", [2, 4, 6]))
    assert plan.barriers.required == [2, 4, 6]
    for dropped in (2, 4, 6):
        kept = [p for p in (2, 4, 6) if p != dropped]
        with pytest.raises(RequestError) as caught:
            planner.plan(parse_request(_request("existing", kept)))
        assert caught.value.errors[0]["type"] == "unprotected_reuse"
        broken = plan.model_copy(
            update={"barriers": plan.barriers.model_copy(update={"existing": kept})}
        )
        assert not planner.validate(req.model_copy(update={"barriers": kept}), broken).valid


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_the_planner_places_one_barrier_per_path(sync: str) -> None:
    _, plan = _checked(_request(sync, []))
    assert plan.arena_bytes == 64
    run = plan.barriers.inserted if sync == "insert" else plan.barriers.required
    assert {2, 4, 6} <= set(run)


def _brute_conflicts(req: PlanRequest) -> set[tuple[str, str]]:
    """Every buffer at offset 0 under the request's barriers: the brute force reports every
    pair that may not share bytes."""
    problems, _ = check(req, plan_at(req, {b.id: 0 for b in req.buffers}))
    pairs = set()
    for line in problems:
        words = line.split()
        a, b = (words[1], words[2]) if words[0] == "overlap" else (words[1], words[3])
        pairs.add((min(a, b), max(a, b)))
    return pairs


def _planner_conflicts(req: PlanRequest) -> set[tuple[str, str]]:
    """Pairs live together on some path, or in sequence with no barrier of the request on
    every path between them (a buffer with itself: its reuse across an iteration)."""
    prog = build_program(req)
    h = prog.hazards
    ids = [b.id for b in req.buffers]
    open_ = ~prog.protected(sorted(set(req.barriers)))
    pairs = {(ids[a], ids[b]) for a, b in prog.live_pairs}
    for a, b in zip(h.a[open_].tolist(), h.b[open_].tolist(), strict=True):
        pairs.add((min(ids[a], ids[b]), max(ids[a], ids[b])))
    return pairs


@pytest.mark.parametrize("seed", [1, 2])
def test_conflicts_are_exactly_those_of_the_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(120):
        req = parse_request(random_nested(rng))
        assert _planner_conflicts(req) == _brute_conflicts(req), req.model_dump_json()


def test_random_nested_programs_plan_safely() -> None:
    planned = 0
    for data, req, plan in planned_programs(random_nested, 20262, 120):
        planned += 1
        assert planner.validate(req, plan).valid, data
        problems, peak = check(req, plan)
        assert not problems, (data, problems[:3])
        if req.options.sync != "existing":
            assert plan.lower_bound == peak, data
    assert planned >= 100
