"""Rings: the depths chosen with the offsets equal a brute force over every combination, the
plan states them, and the static validator holds a plan to them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import planner
from planner.core.io import parse_request
from tests.support.rings import FITTING, brute_force, ring_request


@pytest.mark.parametrize("seed", range(10))
def test_chosen_depths_equal_brute_force(seed: int) -> None:
    request = ring_request(seed)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert plan.rings is not None
    chosen = {r.id: r.copies for r in plan.rings}
    expected = brute_force(request)
    if expected is None:
        assert plan.status == "infeasible"
        assert chosen == {b["id"]: b["copies"]["min"] for b in request["buffers"] if "copies" in b}
        return
    assert plan.status in FITTING
    assert (chosen, plan.arena_bytes) == expected


def test_the_plan_states_depth_and_stride_and_holds_every_slot() -> None:
    request = {
        "capacity": 100_000,
        "alignment": 128,
        "barriers": [1, 5],
        "loops": [{"start": 1, "end": 5, "trips": 8}],
        "buffers": [
            {
                "id": "A",
                "size": 10_000,
                "start": 0,
                "end": 5,
                "copies": {"min": 1, "max": 6, "priority": 2},
            },
            {"id": "B", "size": 20_000, "start": 0, "end": 5, "copies": {"min": 1, "max": 4}},
        ],
        "options": {"sync": "existing"},
    }
    plan = planner.plan(request)
    assert plan.rings is not None
    rings = {r.id: r for r in plan.rings}
    assert rings["A"].stride == 10_112  # 10000 rounded up to 128
    # 2 * copies(A) + copies(B) is largest within 100000 bytes: A 6 (60672), B 1 (20096).
    assert (rings["A"].copies, rings["B"].copies) == (6, 1)
    sizes = {p.id: p.size for p in plan.placements}
    assert sizes == {"A": 6 * 10_112, "B": 20_096}
    assert planner.validate(request, plan).valid
    unbounded = planner.plan({**request, "capacity": None})
    assert planner.validate({**request, "capacity": None}, unbounded).valid
    assert unbounded.rings is not None
    assert [r.copies for r in unbounded.rings] == [6, 4]


def test_validator_holds_a_plan_to_its_depths() -> None:
    request = ring_request(3)
    plan = planner.plan(request)
    assert plan.rings is not None
    too_many = [r.model_copy(update={"copies": 99}) for r in plan.rings]
    report = planner.validate(request, plan.model_copy(update={"rings": too_many}))
    assert not report.valid
    assert {v.code for v in report.violations} == {"wrong_size"}
    assert "the request allows" in report.violations[0].message
    missing = planner.validate(request, plan.model_copy(update={"rings": None}))
    assert next(v.code for v in missing.violations) == "wrong_size"
    assert "no depth" in missing.violations[0].message
    stride = [plan.rings[0].model_copy(update={"stride": plan.rings[0].stride + 1})]
    bad = planner.validate(request, plan.model_copy(update={"rings": stride + plan.rings[1:]}))
    assert "stride" in bad.violations[0].message
    # A slot placed over another buffer live with it is an overlap.
    placements = [p.model_copy(update={"offset": 0}) for p in plan.placements]
    overlap = planner.validate(request, plan.model_copy(update={"placements": placements}))
    assert "overlap" in {v.code for v in overlap.violations}


@pytest.mark.parametrize(
    ("copies", "loc", "words"),
    [
        ({"min": 3, "max": 2}, ["buffers", 0, "copies", "max"], "less than min"),
        ({"min": 0, "max": 2}, ["buffers", 0, "copies", "min"], "greater than or equal to 1"),
        ({"min": 1, "max": 65}, ["buffers", 0, "copies", "max"], "less than or equal to 64"),
        ({"min": 1}, ["buffers", 0, "copies", "max"], "Field required"),
        ({"min": 1, "max": 2, "depth": 3}, ["buffers", 0, "copies", "depth"], "Extra inputs"),
    ],
)
def test_rejects_bad_copies(copies: dict[str, Any], loc: list[Any], words: str) -> None:
    request = copy.deepcopy(ring_request(1))
    request["buffers"][0]["copies"] = copies
    with pytest.raises(planner.RequestError) as caught:
        planner.plan(request)
    assert caught.value.errors[0]["loc"] == loc
    assert words in caught.value.errors[0]["msg"]


def test_rejects_rings_with_accesses_pins_or_too_many_choices() -> None:
    request = copy.deepcopy(ring_request(1))
    request["buffers"][0]["offset"] = 0
    with pytest.raises(planner.RequestError, match="depth and offset are chosen together"):
        planner.plan(request)
    request = {
        "buffers": [
            {"id": f"r{k}", "size": 64, "start": 0, "end": 1, "copies": {"min": 1, "max": 64}}
            for k in range(3)
        ]
    }
    with pytest.raises(planner.RequestError) as caught:
        planner.plan(request)
    assert caught.value.errors[0]["loc"] == ["buffers", 2, "copies"]
    assert "262144 combinations of depths open; at most 4096" in caught.value.errors[0]["msg"]


def test_requests_without_rings_dump_as_before() -> None:
    request = ring_request(2)
    for b in request["buffers"]:
        b.pop("copies", None)
    parsed = parse_request(request)
    assert '"copies"' not in parsed.model_dump_json()
    plan = planner.plan(parsed)
    assert planner.validate(parsed, plan).valid
    assert '"rings"' not in plan.model_dump_json()


def test_ring_depth_in_a_sweep_depends_on_the_target() -> None:
    request = {
        "params": {"BK": {"values": [32, 64]}, "STAGES": {"min": 2, "max": 6}},
        "alignment": 128,
        "barriers": [1, 5],
        "loops": [{"start": 1, "end": 5, "trips": 32}],
        "buffers": [
            {
                "id": "A",
                "size": "128 * BK * 2",
                "start": 0,
                "end": 5,
                "copies": {"min": 1, "max": "STAGES"},
            },
            {
                "id": "B",
                "size": "BK * 256 * 2",
                "start": 0,
                "end": 5,
                "copies": {"min": 1, "max": "STAGES"},
            },
            {"id": "C", "size": 65536, "start": 5, "end": 7},
        ],
        "options": {"sync": "existing"},
    }
    result = planner.sweep(request, [{"BK": 64, "STAGES": 6}], targets=["sm_86", "sm_90"])
    assert not result.shared_graph
    (answer,) = result.answers
    sm86, sm90 = answer.targets
    assert sm86.copies is not None
    assert sm90.copies is not None
    assert sum(sm86.copies.values()) < sum(sm90.copies.values())
    assert sm86.fits
    assert sm90.fits
    assert sm86.arena_bytes is not None
    assert sm86.arena_bytes <= 101376 < 232448
