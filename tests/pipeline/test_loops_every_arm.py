"""A barrier in every arm of a branch protects a reuse across the branch: a buffer inside a
loop that covers a branch starting at the loop's first point reuses its own bytes across the
back edge, and only one barrier at the first point of each arm separates the iterations."""

from __future__ import annotations

from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from tests.support.loops_brute import check


def _request(sync: str, barriers: list[int]) -> dict[str, Any]:
    return {
        "name": "branch_at_loop_start",
        "barriers": barriers,
        "loops": [{"start": 2, "end": 8, "trips": 4}],
        "branches": [{"arms": [[2, 5], [5, 8]]}],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2},
            {"id": "c", "size": 64, "start": 2, "end": 8},
            {"id": "d", "size": 64, "start": 8, "end": 10},
        ],
        "options": {"sync": sync, "time_limit": 2.0},
    }


@pytest.mark.parametrize(
    ("sync", "barriers"), [("insert", []), ("none", []), ("existing", [2, 5, 8])]
)
def test_one_barrier_per_arm_protects_the_back_edge(sync: str, barriers: list[int]) -> None:
    req = parse_request(_request(sync, barriers))
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    problems, _ = check(req, plan)
    assert not problems
    assert plan.arena_bytes == 64  # a, c and d share their bytes
    run = set(plan.barriers.existing) | set(plan.barriers.inserted)
    if sync == "none":
        run = set(plan.barriers.required)
    assert {2, 5} <= run


def test_the_validator_needs_the_barrier_of_every_arm() -> None:
    req = parse_request(_request("insert", []))
    plan = planner.plan(req)
    for dropped in (2, 5):
        kept = [p for p in plan.barriers.inserted if p != dropped]
        barriers = plan.barriers.model_copy(update={"inserted": kept, "required": kept})
        broken = plan.model_copy(update={"barriers": barriers})
        report = planner.validate(req, broken)
        assert not report.valid
        assert {v.code for v in report.violations} == {"missing_barrier"}


def test_a_barrier_in_one_arm_only_is_still_refused() -> None:
    with pytest.raises(RequestError) as caught:
        planner.plan(parse_request(_request("existing", [2, 8])))
    assert caught.value.errors[0]["type"] == "unprotected_reuse"


def test_the_barriers_of_every_arm_must_lie_in_the_window() -> None:
    # The arms' first points are candidates only for arm 0: the back edge stays unprotected.
    data = _request("insert", [])
    data["options"]["barrier_candidates"] = [2, 8]
    with pytest.raises(RequestError) as caught:
        planner.plan(parse_request(data))
    assert caught.value.errors[0]["type"] == "unprotected_reuse"
