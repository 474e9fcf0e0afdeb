"""Two ranges of one buffer that meet once each is grown over the loops it enters or leaves:
refused by the models (a 422 naming the ranges and the loop), never while planning."""

from __future__ import annotations

import random
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models.control import Loop, stretched
from planner.pipeline.program import build_program
from tests.support.loops_brute import draw_request


def _request(ranges: list[list[int]], loops: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "ranges_over_a_loop",
        "loops": loops,
        "buffers": [
            {"id": "w", "size": 64, "start": 0, "end": 12},
            {"id": "v", "size": 32, "ranges": ranges},
        ],
        "options": {"sync": "insert", "time_limit": 2.0},
    }


def test_ranges_meeting_over_a_loop_are_refused_by_the_models() -> None:
    # [0, 3) enters the loop [2, 6): live over [0, 6); [5, 8) leaves it: live over [2, 8).
    with pytest.raises(RequestError) as caught:
        parse_request(_request([[0, 3], [5, 8]], [{"start": 2, "end": 6, "trips": 4}]))
    (error,) = caught.value.errors
    assert error["loc"] == ["buffers", 1, "ranges"]
    assert error["type"] == "ranges_overlap"
    assert "[0, 3) and [5, 8) of buffer 'v'" in error["msg"]
    assert "loops.0 [2, 6)" in error["msg"]


def test_the_loop_named_is_the_one_where_the_ranges_meet() -> None:
    loops = [{"start": 1, "end": 3, "trips": 2}, {"start": 6, "end": 10, "trips": 2}]
    with pytest.raises(RequestError) as caught:
        parse_request(_request([[4, 7], [8, 11]], loops))
    assert "loops.1 [6, 10)" in caught.value.errors[0]["msg"]


def test_ranges_that_stay_apart_over_a_loop_plan() -> None:
    # [0, 3) grows to [0, 6); [6, 8) starts at the loop's end: apart.
    req = parse_request(_request([[0, 3], [6, 8]], [{"start": 2, "end": 6, "trips": 4}]))
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid


def test_stretching_follows_nested_loops_outward() -> None:
    loops = [Loop(start=2, end=10, trips=3), Loop(start=4, end=6, trips=2)]
    assert stretched(5, 7, loops) == (4, 7, [1])
    assert stretched(5, 11, loops) == (2, 11, [0])
    assert stretched(4, 6, loops) == (4, 6, [])


def test_the_models_refuse_exactly_what_the_unrolled_program_cannot_place() -> None:
    """On random programs: every request the models accept unrolls (no two pieces of one
    buffer meet), and each one they refuse for ranges meeting over a loop has two pieces of
    one buffer meeting when unrolled without the check."""
    rng = random.Random(4242)
    refused = accepted = 0
    for _ in range(3000):
        data = draw_request(rng)
        try:
            req = parse_request(data)
        except RequestError as exc:
            if {e["type"] for e in exc.errors} != {"ranges_overlap"}:
                continue
            if any("live at once" not in e["msg"] for e in exc.errors):
                continue
            refused += 1
            # Without the buffer's second range grown, the pieces would meet: check directly.
            loops = [Loop.model_validate(lp) for lp in data["loops"]]
            for b in data["buffers"]:
                if "ranges" in b:
                    (s1, e1), (s2, e2) = b["ranges"]
                    g1, g2 = stretched(s1, e1, loops), stretched(s2, e2, loops)
                    if g1[0] < g2[1] and g2[0] < g1[1]:
                        break
            else:
                raise AssertionError(f"refused with no ranges meeting: {data}")
            continue
        build_program(req)  # raises on pieces of one buffer meeting
        accepted += 1
    assert refused >= 5
    assert accepted >= 500
