"""Spilling (``overflow: "spill"``) requests with loops, branches or ranges: the buffers to
move are chosen on the unrolled program's peak, the workspace gets the barriers its own
loops need, and every plan is safe on every execution (the shared and the global arena
checked apart, under the barriers of both)."""

from __future__ import annotations

import random
from typing import Any

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from tests.support.loops_brute import check, random_request


def _apart(plan: Plan) -> Plan:
    """The plan with the global workspace moved above the shared arena: one address space
    in which the brute force sees both arenas, never one against the other."""
    base = plan.arena_bytes + 1024
    return plan.model_copy(
        update={
            "placements": [
                p.model_copy(update={"offset": p.offset + base}) if p.memory == "global" else p
                for p in plan.placements
            ]
        }
    )


def _spilled(req: PlanRequest) -> Plan:
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    problems, _ = check(req, _apart(plan))
    assert not problems, problems[:3]
    return plan


def test_a_loop_body_buffer_spilled_keeps_its_back_edge_barrier() -> None:
    # Two buffers of one loop body that cannot share bytes within a trip; capacity for one.
    data: dict[str, Any] = {
        "name": "spill_in_loop",
        "capacity": 256,
        "loops": [{"start": 1, "end": 5, "trips": 8}],
        "buffers": [
            {"id": "a", "size": 256, "start": 1, "end": 4},
            {"id": "b", "size": 128, "start": 2, "end": 5},
        ],
        "options": {"sync": "insert", "overflow": "spill", "time_limit": 2.0},
    }
    req = parse_request(data)
    plan = _spilled(req)
    assert plan.spilled == ["b"]
    assert plan.arena_bytes == 256
    assert plan.global_bytes == 128
    # b in the workspace reuses its own bytes in the next trip: a barrier in the body.
    points = set(plan.barriers.existing) | set(plan.barriers.inserted)
    assert any(1 <= p < 5 for p in points)
    assert plan.barriers.executions == sum(req.executions_at(p) for p in points)


def test_random_loop_requests_spill_safely() -> None:
    rng = random.Random(77)
    spilled = 0
    for _ in range(150):
        data = random_request(rng)
        try:
            roomy = planner.plan(parse_request(data))
        except RequestError:
            continue
        assert planner.validate(data, roomy).valid
        if not parse_request(data).has_control_flow or roomy.arena_bytes < 16:
            continue
        data["capacity"] = roomy.arena_bytes * 2 // 3 // 8 * 8
        data["options"] = {**data["options"], "overflow": "spill"}
        req = parse_request(data)
        plan = _spilled(req)
        if plan.spilled:
            spilled += 1
            assert plan.arena_bytes <= data["capacity"] or plan.status == "infeasible"
    assert spilled >= 20


def test_max_new_barriers_bounds_both_arenas_together() -> None:
    # 'c' (spilled) reuses its own bytes between its ranges: a barrier in [4, 8] whatever the
    # placement. 'a' and 'b' share after 'a' ends: a barrier in [7, 15]. One at 7 or 8 does
    # both, within the cap of 1; planned apart, the arenas took one each.
    data: dict[str, Any] = {
        "capacity": 256,
        "buffers": [
            {"id": "a", "size": 1, "ranges": [[1, 7]]},
            {"id": "b", "size": 1, "start": 15, "end": 18},
            {"id": "c", "size": 4096, "ranges": [[0, 4], [8, 15]]},
        ],
        "options": {"overflow": "spill", "max_new_barriers": 1},
    }
    req = parse_request(data)
    plan = _spilled(req)
    assert plan.spilled == ["c"]
    assert len(plan.barriers.inserted) == 1
    assert 4 <= plan.barriers.inserted[0] <= 8
    assert plan.arena_bytes == 1
