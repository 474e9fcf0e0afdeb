"""The unrolled route's parts: the exact model on pairs, certificates, solver names it cannot
run, one-trip loops, arms across trips, nested trip counts. Every plan goes through the
static validator and the brute force over every unrolled execution."""

from __future__ import annotations

import json
from typing import Any

import planner
from planner.core.io import parse_request
from planner.core.models import UNKNOWN_TRIPS, Plan, PlanRequest
from tests.support.loops_brute import check
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _plan(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    problems, peak = check(request, plan)
    assert not problems, problems[:3]
    assert plan.lower_bound == peak
    return request, plan


def _example(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    data.update(changes)
    return data


# Seven buffers with live ranges on which every gap-filling fit reaches 23 bytes; the peak of
# live bytes is 17 and CP-SAT on the conflicting pairs finds it.
GAP: dict[str, Any] = {
    "alignment": 1,
    "barriers": [4],
    "buffers": [
        {"id": "b0", "size": 9, "start": 4, "end": 5},
        {"id": "b1", "size": 9, "start": 10, "end": 11},
        {"id": "b2", "size": 4, "ranges": [[6, 7], [10, 11]]},
        {"id": "b3", "size": 7, "ranges": [[7, 9], [9, 10]]},
        {"id": "b4", "size": 3, "start": 4, "end": 10},
        {"id": "b5", "size": 5, "start": 1, "end": 7},
        {"id": "b6", "size": 7, "start": 8, "end": 9},
    ],
    "options": {"sync": "none", "time_limit": 2.0},
}


def test_exact_model_on_pairs_closes_the_greedy_gap() -> None:
    _, greedy = _plan({**GAP, "options": {**GAP["options"], "solver": "greedy"}})
    assert greedy.arena_bytes > 17
    assert greedy.status == "feasible"
    _, plan = _plan(GAP)
    assert plan.solver.name == "exact:cpsat-pairs"
    assert plan.arena_bytes == plan.lower_bound == 17
    assert plan.status == "optimal"
    assert min(t.arena_bytes for t in plan.solver.tried[:-1]) == greedy.arena_bytes


def test_over_capacity_gives_a_certificate_from_the_unrolled_peak() -> None:
    _, plan = _plan(_example("loop_tiled_gemm.json", capacity=6000, target=None))
    assert plan.status == "infeasible"
    assert plan.certificate is not None
    assert plan.certificate.live_bytes == 8192 > plan.certificate.capacity
    assert sorted(plan.certificate.buffers) == ["As", "Bs"]
    assert plan.certificate.point == 1


def test_interval_only_solver_names_get_the_fits_and_say_so() -> None:
    data = _example("branch_scratch.json")
    data["options"] = {**data["options"], "solver": "size/skyline"}
    _, plan = _plan(data)
    assert "solver_not_applicable" in {d.code for d in plan.diagnostics}
    assert plan.solver.name.startswith("greedy:")


def test_a_loop_of_one_trip_has_no_back_edge() -> None:
    _, plan = _plan(
        _example("loop_triton_backedge.json", loops=[{"start": 1, "end": 6, "trips": 1}])
    )
    assert plan.barriers.required == [3]


ARMS_IN_A_LOOP: dict[str, Any] = {
    "loops": [{"start": 0, "end": 4, "trips": 8}],
    "branches": [{"arms": [[1, 2], [2, 3]]}],
    "buffers": [
        {"id": "x", "size": 64, "start": 1, "end": 2},
        {"id": "y", "size": 64, "start": 2, "end": 3},
    ],
    "options": {"sync": "none"},
}


def test_arms_of_one_branch_meet_across_trips() -> None:
    # In one trip x and y never run together; x in one trip and y in the next do, so their
    # shared bytes need a barrier the arms cannot provide: one outside the branch, in the body.
    _, plan = _plan(ARMS_IN_A_LOOP)
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["x"] == offsets["y"]
    assert plan.arena_bytes == 64
    assert len(plan.barriers.required) == 1
    assert plan.barriers.required[0] in (0, 3)
    # Without the loop the arms are exclusive: no barrier at all.
    _, once = _plan({**ARMS_IN_A_LOOP, "loops": []})
    assert once.arena_bytes == 64
    assert once.barriers.required == []


def test_nested_loops_multiply_executions() -> None:
    request = parse_request(
        {
            "loops": [{"start": 0, "end": 10, "trips": 4}, {"start": 2, "end": 6, "trips": None}],
            "buffers": [{"id": "a", "size": 8, "start": 0, "end": 10}],
        }
    )
    assert request.executions_at(1) == 4
    assert request.executions_at(3) == 4 * UNKNOWN_TRIPS
    assert request.executions_at(10) == 1
