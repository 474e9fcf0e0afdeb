"""``planner.plan`` end to end: properties on random requests and the documented outcomes."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import planner
from planner.core.errors import RequestError
from planner.core.models import PlanRequest
from planner.pipeline.warm import WARM_UP
from planner.validators import validate_plan
from tests.support.strategies import request_dicts


@settings(max_examples=150, deadline=None)
@given(request_dicts(max_buffers=12))
def test_plan_properties(data: dict[str, Any]) -> None:
    request = PlanRequest.model_validate(data)
    plan = planner.plan(data)
    assert validate_plan(request, plan).valid
    assert plan.arena_bytes >= plan.lower_bound
    assert plan.arena_bytes <= plan.naive_bytes or any(
        b.offset is not None for b in request.buffers
    )
    # Same request, same bytes; also from JSON text.
    assert planner.plan(data).model_dump_json() == plan.model_dump_json()
    assert planner.plan(request.model_dump_json()).model_dump_json() == plan.model_dump_json()
    placed = {p.id: p.offset for p in plan.placements}
    for b in request.buffers:
        if b.offset is not None:
            assert placed[b.id] == b.offset
    capacity = request.effective_capacity
    if capacity is not None and plan.arena_bytes > capacity:
        assert plan.status in ("infeasible", "unknown")
    if plan.status == "infeasible":
        cert = plan.certificate
        assert cert is not None
        if cert.reason == "lower_bound":
            assert cert.live_bytes > cert.capacity
        else:
            # The subset alone, planned again, is still proved not to fit.
            subset = [b for b in data["buffers"] if b["id"] in cert.buffers]
            # Barriers past the subset's last point change nothing and are refused: drop them.
            horizon = max(b["end"] for b in subset)
            options = {**data["options"]}
            if options.get("barrier_candidates") is not None:
                options["barrier_candidates"] = [
                    p for p in options["barrier_candidates"] if p <= horizon
                ]
            barriers = [p for p in data.get("barriers", []) if p <= horizon]
            again = planner.plan(
                {**data, "buffers": subset, "barriers": barriers, "options": options}
            )
            assert again.status == "infeasible"
    assert plan.solver.bound >= plan.lower_bound
    if plan.status == "optimal":
        assert plan.solver.proved_optimal
        assert plan.arena_bytes == plan.solver.bound
    opts = request.options
    assert plan.barriers.existing == sorted(set(request.barriers))
    if opts.sync != "insert":
        assert plan.barriers.inserted == []
    if opts.max_new_barriers is not None:
        assert len(plan.barriers.inserted) <= opts.max_new_barriers


def test_epilogue_reuses_tiles_after_a_barrier() -> None:
    request = {
        "barriers": [4],
        "buffers": [
            {"id": "A_s", "size": 8192, "start": 0, "end": 4, "alignment": 128},
            {"id": "B_s", "size": 8192, "start": 0, "end": 4, "alignment": 128},
            {"id": "C_s", "size": 16384, "start": 4, "end": 9},
        ],
        "options": {"sync": "existing"},
    }
    plan = planner.plan(request)
    assert validate_plan(PlanRequest.model_validate(request), plan).valid
    assert plan.arena_bytes == 16384 == plan.lower_bound
    assert plan.status == "optimal"
    assert plan.barriers.required == [4]
    assert plan.naive_bytes == 32768


def test_insert_adds_the_fewest_barriers() -> None:
    # Three sequential phases, each 64 bytes, with no barrier: reuse needs two barriers.
    request = {
        "buffers": [
            {"id": "p0", "size": 64, "start": 0, "end": 2},
            {"id": "p1", "size": 64, "start": 2, "end": 4},
            {"id": "p2", "size": 64, "start": 4, "end": 6},
        ]
    }
    plan = planner.plan(request)
    assert plan.arena_bytes == 64
    assert plan.barriers.inserted == [2, 4]
    assert plan.barriers.required == [2, 4]
    existing = planner.plan({**request, "options": {"sync": "existing"}})
    assert existing.arena_bytes == 192
    assert existing.barriers.inserted == []
    # One barrier lets two of the three phases share: 128 bytes, the best under the cap.
    capped = planner.plan({**request, "options": {"max_new_barriers": 1}})
    assert len(capped.barriers.inserted) == 1
    assert capped.arena_bytes == 128
    only_at_2 = planner.plan({**request, "options": {"barrier_candidates": [2]}})
    assert only_at_2.barriers.inserted == [2]
    assert only_at_2.arena_bytes == 128
    for p, r in ((plan, request), (capped, {**request, "options": {"max_new_barriers": 1}})):
        assert validate_plan(PlanRequest.model_validate(r), p).valid


def test_pareto_lists_every_trade_off() -> None:
    request = {
        "buffers": [
            {"id": f"p{k}", "size": 64, "start": 2 * k, "end": 2 * k + 2} for k in range(3)
        ],
        "options": {"pareto": True},
    }
    plan = planner.plan(request)
    front = [(p.new_barriers, p.arena_bytes) for p in plan.pareto]
    assert front == [(0, 192), (1, 128), (2, 64)]
    req = PlanRequest.model_validate(request)
    for point in plan.pareto:
        assert point.plan.arena_bytes == point.arena_bytes
        assert len(point.plan.barriers.inserted) == point.new_barriers
        assert point.plan.pareto == []
        assert validate_plan(req, point.plan).valid
    assert (len(plan.barriers.inserted), plan.arena_bytes) == front[-1]
    assert planner.plan({**request, "options": {}}).pareto == []
    existing = planner.plan({**request, "options": {"pareto": True, "sync": "existing"}})
    assert [(p.new_barriers, p.arena_bytes) for p in existing.pareto] == [(0, 192)]


@pytest.mark.parametrize("solver", ["greedy", "auto"])
def test_candidates_and_cap_choose_the_smallest_arena(solver: str) -> None:
    # Four phases of 64 bytes; barriers only at 2 and 6: phases 0|1 and 2|3 pair up.
    request: dict[str, Any] = {
        "buffers": [
            {"id": f"p{k}", "size": 64, "start": 2 * k, "end": 2 * k + 2} for k in range(4)
        ],
        "options": {"barrier_candidates": [2, 6], "solver": solver, "pareto": True},
    }
    plan = planner.plan(request)
    assert plan.barriers.inserted == [2, 6]
    assert plan.arena_bytes == 128
    assert [(p.new_barriers, p.arena_bytes) for p in plan.pareto] == [(0, 256), (1, 192), (2, 128)]
    capped = planner.plan({**request, "options": {**request["options"], "max_new_barriers": 1}})
    assert capped.arena_bytes == 192
    assert len(capped.barriers.inserted) == 1


def test_sync_none_lists_what_the_caller_must_guarantee() -> None:
    request = {
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2},
            {"id": "b", "size": 64, "start": 3, "end": 6},
        ],
        "options": {"sync": "none"},
    }
    plan = planner.plan(request)
    assert plan.arena_bytes == 64
    assert plan.barriers.inserted == []
    assert plan.barriers.required == [3]
    assert validate_plan(PlanRequest.model_validate(request), plan).valid


def test_infeasible_has_a_certificate() -> None:
    request = {
        "target": "sm_75",
        "buffers": [
            {"id": "x", "size": 40000, "start": 0, "end": 3},
            {"id": "y", "size": 40000, "start": 1, "end": 4},
        ],
    }
    plan = planner.plan(request)
    assert plan.status == "infeasible"
    assert plan.capacity == 65536
    assert plan.certificate is not None
    assert plan.certificate.buffers == ["x", "y"]
    assert plan.certificate.live_bytes == 80000
    assert plan.certificate.point in (1, 2)
    assert plan.launch.blocks_per_sm == 0


def test_launch_figures_for_a_target() -> None:
    plan = planner.plan(
        {"target": "sm_90", "buffers": [{"id": "t", "size": 65536, "start": 0, "end": 1}]}
    )
    assert plan.launch.requires_opt_in
    assert plan.launch.dynamic_smem_bytes == 65536
    assert plan.launch.blocks_per_sm == 233472 // (65536 + 1024)


def test_named_heuristic_and_unknown_solver() -> None:
    request: dict[str, Any] = {
        "buffers": [{"id": "a", "size": 8, "start": 0, "end": 1}],
        "options": {"solver": "start/first-fit"},
    }
    plan = planner.plan(request)
    assert [t.name for t in plan.solver.tried] == ["greedy:start/first-fit"]
    with pytest.raises(RequestError) as info:
        planner.plan({**request, "options": {"solver": "magic"}})
    assert info.value.errors[0]["loc"] == ["options", "solver"]
    assert info.value.errors[0]["type"] == "unknown_solver"


def test_pinned_conflict_is_the_callers() -> None:
    request = {
        "buffers": [
            {"id": "a", "size": 8, "start": 0, "end": 2, "offset": 0},
            {"id": "b", "size": 8, "start": 2, "end": 4, "offset": 0},
        ],
        "options": {"sync": "existing"},
    }
    with pytest.raises(RequestError) as info:
        planner.plan(request)
    assert info.value.errors[0]["type"] == "pinned_conflict"
    assert info.value.errors[0]["loc"] == ["buffers", 1, "offset"]


def test_hash_ignores_key_order_but_not_content() -> None:
    a = planner.plan({"name": "k", "buffers": [{"id": "a", "size": 8, "start": 0, "end": 1}]})
    b = planner.plan({"buffers": [{"end": 1, "start": 0, "size": 8, "id": "a"}], "name": "k"})
    c = planner.plan({"name": "k", "buffers": [{"id": "a", "size": 9, "start": 0, "end": 1}]})
    assert a.request_sha256 == b.request_sha256 != c.request_sha256


def test_large_random_request_is_valid() -> None:
    rng = np.random.default_rng(1)
    n = 3000
    start = rng.integers(0, 5000, n)
    request = {
        "alignment": 16,
        "options": {"sync": "existing", "solver": "greedy"},
        "barriers": list(range(0, 5100, 50)),
        "buffers": [
            {
                "id": f"b{i}",
                "size": int(rng.integers(1, 4096)),
                "start": int(s),
                "end": int(s + rng.integers(1, 200)),
            }
            for i, s in enumerate(start)
        ],
    }
    plan = planner.plan(request)
    assert validate_plan(PlanRequest.model_validate(request), plan).valid
    assert plan.lower_bound <= plan.arena_bytes <= plan.naive_bytes


@settings(max_examples=40, deadline=None)
@given(request_dicts(max_buffers=10, sync="insert"))
def test_pareto_front_properties(data: dict[str, Any]) -> None:
    data["options"]["pareto"] = True
    request = PlanRequest.model_validate(data)
    plan = planner.plan(request)
    front = plan.pareto
    assert front, "insert with pareto always lists at least the chosen plan"
    assert front[0].new_barriers == 0  # the front starts with no new barrier
    cap = request.options.max_new_barriers
    for before, after in itertools.pairwise(front):
        assert before.new_barriers < after.new_barriers
        assert before.arena_bytes > after.arena_bytes
    for point in front:
        assert validate_plan(request, point.plan).valid
        assert cap is None or point.new_barriers <= cap
    # The chosen plan is the front's last point: smallest arena, then fewest barriers.
    assert (front[-1].arena_bytes, front[-1].new_barriers) == (
        plan.arena_bytes,
        len(plan.barriers.inserted),
    )
    assert min(p.arena_bytes for p in front) == plan.arena_bytes


def test_late_first_access_weakens_the_claims_not_the_plan() -> None:
    # b is live from 2 but first touched at 4; the barrier at 3 follows a's last access, so
    # a plan may let b take a's bytes, which the barrier-extended graph forbids: the plan
    # stays valid but the graph's bound may no longer be claimed.
    touch = {"op": "write", "bytes": 4, "threads": "all"}
    request = {
        "block": [32],
        "barriers": [3],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2, "accesses": [{**touch, "at": 1}]},
            {"id": "b", "size": 64, "start": 2, "end": 6, "accesses": [{**touch, "at": 4}]},
        ],
        "options": {"sync": "existing"},
    }
    plan = planner.plan(request)
    assert validate_plan(PlanRequest.model_validate(request), plan).valid
    assert plan.lower_bound == 64
    assert plan.status == ("optimal" if plan.arena_bytes == 64 else "feasible")
    shared = plan.model_copy(
        update={
            "placements": [p.model_copy(update={"offset": 0}) for p in plan.placements],
            "arena_bytes": 64,
        }
    )
    assert validate_plan(PlanRequest.model_validate(request), shared).valid


def test_first_plan_in_a_process_is_the_plan_of_later_calls() -> None:
    # The first plan in a process used to spend its time limit loading compiled kernels and
    # stop its search early: a different plan for the same request.
    data = {**WARM_UP[0], "name": "first", "options": {"time_limit": 2.0, "sync": "existing"}}
    code = (
        "import json, sys, planner\nprint(planner.plan(json.loads(sys.argv[1])).model_dump_json())"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", code, json.dumps(data)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    planner.plan(data)  # this process has planned before
    plan = planner.plan(data)
    assert validate_plan(PlanRequest.model_validate(data), plan).valid
    assert plan.solver.name.startswith("exact:")  # the exact methods ran
    assert fresh == plan.model_dump_json()


def test_a_time_limit_below_the_fixed_work_is_refused_at_once() -> None:
    from planner.core.budget import FIXED_SECONDS_PER_BUFFER
    from planner.generate import random_request

    n = 2000
    data = random_request(n).model_dump()
    data["options"]["time_limit"] = FIXED_SECONDS_PER_BUFFER * n / 2
    with pytest.raises(RequestError) as caught:
        planner.plan(data)
    (error,) = caught.value.errors
    assert error["loc"] == ["options", "time_limit"]
    assert error["type"] == "time_limit_too_small"
    assert f"planning {n} buffers" in error["msg"]
    data["options"]["time_limit"] = FIXED_SECONDS_PER_BUFFER * n  # just enough
    plan = planner.plan(data)
    assert validate_plan(PlanRequest.model_validate(data), plan).valid


@pytest.mark.parametrize("solver", ["length/skyline", "greedy:random/skyline"])
def test_a_skyline_named_for_pinned_buffers_plans_with_the_default_fits(solver: str) -> None:
    # The skyline packs no pinned buffer: the request gets the default portfolio and a note,
    # as a request with loops gets for a solver its route cannot run.
    data: dict[str, Any] = {
        "buffers": [
            {"id": "a", "size": 1, "start": 0, "end": 1, "offset": 0},
            {"id": "b", "size": 8, "start": 0, "end": 2},
        ],
        "options": {"solver": solver},
    }
    plan = planner.plan(data)
    assert validate_plan(PlanRequest.model_validate(data), plan).valid
    assert {p.id: p.offset for p in plan.placements}["a"] == 0
    assert plan.arena_bytes == 9
    assert not plan.solver.name.endswith("/skyline")
    notes = [d for d in plan.diagnostics if d.code == "solver_not_applicable"]
    assert len(notes) == 1
    assert "'a' is pinned" in notes[0].message


def test_sync_none_lists_the_barriers_the_caller_needs_whatever_the_candidates() -> None:
    # Candidates are where "insert" may add barriers; under "none" the caller synchronizes
    # where the plan says, so they must not hide a reuse from barriers.required.
    data: dict[str, Any] = {
        "buffers": [
            {"id": "a", "size": 1, "start": 0, "end": 2},
            {"id": "b", "size": 1, "start": 2, "end": 3},
        ],
        "options": {"sync": "none", "barrier_candidates": [0]},
    }
    plan = planner.plan(data)
    assert validate_plan(PlanRequest.model_validate(data), plan).valid
    assert plan.arena_bytes == 1
    assert plan.barriers.required == [2]
    assert plan.barriers.inserted == []


def test_diagnostics_of_one_kind_are_one_note() -> None:
    from planner.generate import random_request

    request = random_request(60, overlap=0.05, seed=3, sync="insert")
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    inserted = plan.barriers.inserted
    assert len(inserted) > 1
    notes = [d for d in plan.diagnostics if d.code == "barrier_inserted"]
    assert len(notes) == 1
    assert notes[0].message.startswith(f"{len(inserted)} barriers inserted at points ")
    named = notes[0].message.split("points ", 1)[1].split(" so that", 1)[0]
    assert named.split(" and ")[0].split(", ") == [str(p) for p in inserted[:20]]
    codes = [d.code for d in plan.diagnostics]
    assert len(codes) == len(set(codes))
