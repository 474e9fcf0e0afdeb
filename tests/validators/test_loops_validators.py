"""Both CPU validators on programs with loops, exclusive branches and several live ranges.

Each case is a small program placed by hand; the static validator and the emulator must
agree on it (valid, or the violation and its buffers), with every violation under the
original buffer ids and program points.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from planner.core.models import Branch, Loop, Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from planner.validators.interpreter import build_programs
from planner.validators.program import build_program
from tests.support.control_flow import plan_at, request
from tests.support.strategies import request_dicts

BODY = {"loops": [{"start": 1, "end": 5, "trips": None}]}
TWO = [
    {"id": "x", "size": 256, "start": 1, "end": 3},
    {"id": "y", "size": 256, "start": 3, "end": 5},
]


def _static(req: PlanRequest, plan: Plan) -> set[tuple[str, tuple[str, ...]]]:
    return {(v.code, tuple(v.buffers)) for v in validate_plan(req, plan).violations}


def _emulated(req: PlanRequest, plan: Plan) -> set[tuple[str, tuple[str, ...]]]:
    return {(v.code, tuple(v.buffers)) for v in emulate(req, plan).violations}


def _both(data: dict[str, Any], offsets: dict[str, int]) -> tuple[set[Any], set[Any]]:
    req = request(data)
    plan = plan_at(req, offsets)
    return _static(req, plan), _emulated(req, plan)


def test_back_edge_barrier_needed_between_iterations() -> None:
    # y takes x's bytes after the barrier at 3; the next iteration's x takes y's bytes back,
    # so a barrier must stand between y's last access (4) and x's next first access (1).
    static, emulated = _both({**BODY, "buffers": TWO, "barriers": [3]}, {"x": 0, "y": 0})
    assert static == {("missing_barrier", ("y", "x"))}
    assert emulated == {("race", ("y", "x"))}
    static, emulated = _both({**BODY, "buffers": TWO, "barriers": [1, 3]}, {"x": 0, "y": 0})
    assert static == emulated == set()


def test_back_edge_violation_names_original_points_and_iterations() -> None:
    req = request({**BODY, "buffers": TWO, "barriers": [3]})
    (v,) = validate_plan(req, plan_at(req, {"x": 0, "y": 0})).violations
    assert v.point == 1  # x's first point, in the second iteration
    assert "iteration 2 of loops.0" in v.message
    assert "iteration 1 of loops.0" in v.message
    assert "range [3, 5)" in v.message


def test_a_body_buffer_reuses_its_own_bytes_across_the_back_edge() -> None:
    data = {**BODY, "buffers": [{"id": "x", "size": 256, "start": 1, "end": 4}]}
    static, emulated = _both(data, {"x": 0})
    assert static == {("missing_barrier", ("x", "x"))}
    assert emulated == {("race", ("x", "x"))}
    # A barrier outside x's accesses (after its last, or at its first) separates them.
    for barriers in ([4], [1]):
        static, emulated = _both({**data, "barriers": barriers}, {"x": 0})
        assert static == emulated == set(), barriers
    static, emulated = _both({**data, "barriers": [2]}, {"x": 0})  # inside x's accesses
    assert ("missing_barrier", ("x", "x")) in static
    assert ("race", ("x", "x")) in emulated


def test_a_loop_of_one_trip_has_no_back_edge() -> None:
    data = {"loops": [{"start": 1, "end": 5, "trips": 1}], "buffers": TWO, "barriers": [3]}
    static, emulated = _both(data, {"x": 0, "y": 0})
    assert static == emulated == set()


def test_nested_loop_body_needs_its_own_back_edge_barrier() -> None:
    loops = [{"start": 0, "end": 8, "trips": 4}, {"start": 2, "end": 6, "min_trips": 1}]
    buffers = [
        {"id": "a", "size": 128, "start": 0, "end": 2},
        {"id": "x", "size": 128, "start": 2, "end": 4},
        {"id": "y", "size": 128, "start": 4, "end": 6},
    ]
    # x and y alternate in the inner body; the barrier at 4 separates x from y, the one at
    # 2 (the inner loop's first point) y from the next x; a is alone.
    data = {"loops": loops, "buffers": buffers, "barriers": [2, 4]}
    static, emulated = _both(data, {"a": 0, "x": 128, "y": 128})
    assert static == emulated == set()
    static, emulated = _both({**data, "barriers": [4]}, {"a": 0, "x": 128, "y": 128})
    assert ("missing_barrier", ("y", "x")) in static
    assert ("race", ("y", "x")) in emulated


def test_buffers_in_different_arms_share_bytes_freely() -> None:
    data = {
        "branches": [{"arms": [[1, 3], [3, 5]]}],
        "buffers": [*TWO, {"id": "z", "size": 128, "start": 0, "end": 6}],
    }
    static, emulated = _both(data, {"x": 0, "y": 0, "z": 256})
    assert static == emulated == set()
    # z is live across the whole branch: neither arm's buffer may take its bytes.
    static, emulated = _both(data, {"x": 0, "y": 0, "z": 128})
    assert static == {("overlap", ("z", "x")), ("overlap", ("z", "y"))}
    assert {("clobbered", ("z", "x")), ("clobbered", ("z", "y"))} <= emulated


def test_an_arm_buffer_after_the_branch_needs_a_barrier() -> None:
    data = {
        "branches": [{"arms": [[0, 2], [2, 4]]}],
        "buffers": [
            {"id": "x", "size": 128, "start": 2, "end": 4},
            {"id": "w", "size": 128, "start": 4, "end": 6},
        ],
    }
    static, emulated = _both(data, {"x": 0, "w": 0})
    assert static == {("missing_barrier", ("x", "w"))}
    assert emulated == {("race", ("x", "w"))}
    static, emulated = _both({**data, "barriers": [4]}, {"x": 0, "w": 0})
    assert static == emulated == set()


def test_a_later_range_reuses_the_earlier_ones_bytes() -> None:
    data: dict[str, Any] = {
        "buffers": [
            {"id": "x", "size": 256, "ranges": [[0, 2], [4, 6]]},
            {"id": "y", "size": 256, "start": 2, "end": 4},
        ],
        "barriers": [2, 4],
    }
    static, emulated = _both(data, {"x": 0, "y": 0})
    assert static == emulated == set()  # y lives between x's ranges, in x's bytes
    static, emulated = _both({**data, "barriers": [2]}, {"x": 0, "y": 0})
    assert static == {("missing_barrier", ("y", "x"))}
    assert emulated == {("race", ("y", "x"))}
    # Live during x's second range: an overlap, whatever the barriers.
    data["buffers"][1] = {"id": "y", "size": 256, "start": 3, "end": 5}
    static, emulated = _both(data, {"x": 0, "y": 0})
    assert ("overlap", ("y", "x")) in static
    assert ("clobbered", ("x", "y")) in emulated or ("race", ("y", "x")) in emulated


def test_a_range_entering_a_loop_is_live_over_the_whole_body() -> None:
    # w is written before the loop and read at 3, inside it: every iteration reads it, so it
    # holds its bytes over the whole body, and t (live [4, 6) in the body) may not take them.
    data = {
        "loops": [{"start": 2, "end": 6, "trips": None}],
        "buffers": [
            {"id": "w", "size": 128, "start": 0, "end": 4},
            {"id": "t", "size": 128, "start": 4, "end": 6},
        ],
        "barriers": [4],
    }
    static, emulated = _both(data, {"w": 0, "t": 0})
    assert static == {("overlap", ("w", "t"))}
    assert ("clobbered", ("w", "t")) in emulated  # the second iteration reads t's stamps
    static, emulated = _both(data, {"w": 0, "t": 128})
    assert static == emulated == set()


def test_interpreter_runs_min_two_trips_and_every_arm_choice() -> None:
    data = {
        "loops": [{"start": 0, "end": 4, "min_trips": 1}],
        "branches": [{"arms": [[0, 2], [2, 4]]}],
        "buffers": [
            {"id": "x", "size": 128, "start": 0, "end": 2},
            {"id": "y", "size": 128, "start": 2, "end": 4},
        ],
        "barriers": [0, 2],
    }
    req = request(data)
    programs = build_programs(req, plan_at(req, {"x": 0, "y": 0}))
    assert len(programs) == 4  # an arm in each of two iterations
    runs = sorted(tuple(b.id for b in p.buffers) for p in programs)
    assert runs == [("x", "x"), ("x", "y"), ("y", "x"), ("y", "y")]  # one slot per iteration
    assert all(len(p.steps) == 4 for p in programs)  # barrier + write, barrier + read, twice
    one = request({**data, "loops": [{"start": 0, "end": 4, "trips": 1}]})
    assert len(build_programs(one, plan_at(one, {"x": 0, "y": 0}))) == 2
    # A loop that may run zero times adds the path that skips it: no buffer, no step.
    maybe = request({**data, "loops": [{"start": 0, "end": 4}]})
    paths = build_programs(maybe, plan_at(maybe, {"x": 0, "y": 0}))
    assert len(paths) == 5
    assert [(p.buffers, p.steps) for p in paths].count(((), ())) == 1


def test_straight_requests_keep_their_one_program() -> None:
    req = request({"buffers": TWO, "barriers": [3]})
    plan = plan_at(req, {"x": 0, "y": 0})
    assert build_programs(req, plan) == [build_program(req, plan)]


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(request_dicts(max_buffers=8, horizon=10), st.randoms(use_true_random=False))
def test_both_static_paths_agree_on_straight_requests(
    data: dict[str, Any], rng: random.Random
) -> None:
    """The loop path, on a request whose buffers give their one range as ``ranges``, reports
    what the straight-line path reports (codes, buffers and points)."""
    assume(data["buffers"])
    straight = PlanRequest.model_validate(data)
    buffers = [
        {
            **{k: v for k, v in b.items() if k not in ("start", "end")},
            "ranges": [[b["start"], b["end"]]],
        }
        for b in data["buffers"]
    ]
    ranged = PlanRequest.model_validate({**data, "buffers": buffers})
    assert ranged.has_control_flow
    assert not straight.has_control_flow
    plan = plan_at(straight, {b.id: rng.choice([0, 16, 64, 128]) for b in straight.buffers})
    fast = {(v.code, tuple(v.buffers), v.point) for v in validate_plan(straight, plan).violations}
    paths = {(v.code, tuple(v.buffers), v.point) for v in validate_plan(ranged, plan).violations}
    assert fast == paths


def test_same_thread_bytes_need_no_back_edge_barrier() -> None:
    # Each thread writes and reads back its own 4-byte element every iteration: the next
    # iteration's write is ordered by program order alone (the alias rule, per iteration).
    own = {"threadIdx.x": 1}
    x: dict[str, Any] = {
        "id": "x",
        "size": 128,
        "start": 1,
        "end": 3,
        "accesses": [
            {"op": "write", "at": 1, "bytes": 4, "index": own},
            {"op": "read", "at": 2, "bytes": 4, "index": own},
        ],
    }
    static, emulated = _both({**BODY, "buffers": [x]}, {"x": 0})
    assert static == emulated == set()
    # Read by the neighbouring thread: now the back edge needs a barrier.
    rotated = {**x, "size": 256, "accesses": [x["accesses"][0], {**x["accesses"][1], "offset": 1}]}
    static, emulated = _both({**BODY, "buffers": [rotated]}, {"x": 0})
    assert static == {("missing_barrier", ("x", "x"))}
    assert emulated == {("race", ("x", "x"))}


def test_claimed_aliases_are_checked_range_by_range() -> None:
    own = {"threadIdx.x": 1}
    accesses: list[dict[str, Any]] = [
        {"op": "write", "at": 1, "bytes": 4, "index": own},
        {"op": "read", "at": 2, "bytes": 4, "index": own},
    ]
    later = [{**a, "at": a["at"] + 2} for a in accesses]
    data = {
        **BODY,
        "buffers": [
            {"id": "x", "size": 128, "start": 1, "end": 3, "accesses": accesses},
            {"id": "y", "size": 128, "start": 3, "end": 5, "accesses": later},
        ],
    }
    req = request(data)
    plan = plan_at(req, {"x": 0, "y": 0})
    # Thread-local both ways round the loop, but the plan must list the pair.
    codes = {(v.code, tuple(v.buffers)) for v in validate_plan(req, plan).violations}
    assert codes == {("missing_barrier", ("x", "y")), ("missing_barrier", ("y", "x"))}
    listed = plan.model_copy(update={"aliases": [["x", "y"], ["y", "x"]]})
    assert validate_plan(req, listed).valid
    assert emulate(req, listed).valid
    wrong = plan.model_copy(update={"aliases": [["x", "y"], ["y", "x"], ["x", "nobody"]]})
    assert [v.code for v in validate_plan(req, wrong).violations] == ["bad_alias"]


def test_too_many_executions_is_a_violation_not_an_error() -> None:
    req = request({**BODY, "buffers": TWO, "barriers": [1, 3]})
    plan = plan_at(req, {"x": 0, "y": 0})
    # Built past the request checks (they refuse such a program with a 422).
    loops = [Loop(start=10 * k, end=10 * k + 4) for k in range(8)]
    branches = [Branch(arms=[[10 * k, 10 * k + 2], [10 * k + 2, 10 * k + 4]]) for k in range(8)]
    huge = req.model_copy(update={"loops": loops, "branches": branches})
    (v,) = validate_plan(huge, plan).violations
    assert v.code == "too_many_paths"
    assert "4096" in v.message
    (e,) = emulate(huge, plan).violations
    assert e.code == "too_many_paths"


def test_emulator_messages_name_the_iterations() -> None:
    req = request({**BODY, "buffers": TWO, "barriers": [3]})
    (v,) = emulate(req, plan_at(req, {"x": 0, "y": 0})).violations
    assert v.code == "race"
    assert "from point 3 (iteration 1 of loops.0) to the barrier at 3 (iteration 2" in v.message
    program = build_programs(req, plan_at(req, {"x": 0, "y": 0}))[0]
    assert [s.label for s in program.steps] == [
        "1 (iteration 1 of loops.0)",
        "2 (iteration 1 of loops.0)",
        "3 (iteration 1 of loops.0)",
        "4 (iteration 1 of loops.0)",
        "1 (iteration 2 of loops.0)",
        "2 (iteration 2 of loops.0)",
        "3 (iteration 2 of loops.0)",
        "4 (iteration 2 of loops.0)",
    ]


def test_requests_without_the_new_fields_never_take_the_loop_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The straight-line path is the one run for every request without loops, branches or
    ranges: the loop path, made to fail, is never reached."""
    from planner.validators import static_paths

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the loop path ran for a straight request")

    monkeypatch.setattr(static_paths, "PathCheck", refuse)
    req = request({"buffers": TWO, "barriers": [3]})
    assert validate_plan(req, plan_at(req, {"x": 0, "y": 0})).valid
    assert [v.code for v in validate_plan(req, plan_at(req, {"x": 0, "y": 128})).violations] == []
    broken = request({"buffers": TWO})
    assert [
        v.code for v in validate_plan(broken, plan_at(broken, {"x": 0, "y": 0})).violations
    ] == ["missing_barrier"]
    with pytest.raises(AssertionError, match="loop path"):
        validate_plan(request({**BODY, "buffers": TWO}), plan_at(req, {"x": 0, "y": 0}))


def test_arms_of_two_iterations_follow_each_other() -> None:
    # x (arm 0) and y (arm 1) never meet in one trip, but trip i may take arm 0 and trip
    # i + 1 arm 1: y then reuses x's bytes and needs a barrier on the back edge.
    data = {
        "loops": [{"start": 0, "end": 4, "min_trips": 1}],
        "branches": [{"arms": [[0, 2], [2, 4]]}],
        "buffers": [
            {"id": "x", "size": 128, "start": 0, "end": 2},
            {"id": "y", "size": 128, "start": 2, "end": 4},
        ],
    }
    static, emulated = _both(data, {"x": 0, "y": 0})
    assert ("missing_barrier", ("x", "y")) in static
    assert ("missing_barrier", ("y", "x")) in static
    assert ("race", ("x", "y")) in emulated
    assert ("race", ("y", "x")) in emulated
    # A barrier at the top of the body, outside both arms, runs on every path and suffices
    # (the loop's first point is arm 0's first: put the body one point earlier).
    data = {
        **data,
        "loops": [{"start": 0, "end": 5, "trips": None}],
        "branches": [{"arms": [[1, 3], [3, 5]]}],
        "buffers": [
            {"id": "x", "size": 128, "start": 1, "end": 3},
            {"id": "y", "size": 128, "start": 3, "end": 5},
        ],
    }
    static, emulated = _both({**data, "barriers": [0]}, {"x": 0, "y": 0})
    assert static == emulated == set()
    # One inside arm 0 does not: a path taking arm 1 twice runs none.
    static, emulated = _both({**data, "barriers": [1]}, {"x": 0, "y": 0})
    assert ("missing_barrier", ("y", "y")) in static
    assert ("race", ("y", "y")) in emulated
