"""Planted faults on programs with loops, branches and several live ranges: each kind breaks a
valid plan, and both CPU validators (static and emulator) catch it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from planner.core.models import Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from planner.validators.faults import FAULT_KINDS, Fault, FaultKind, plant, plant_fault
from tests.support.control_flow import OFFSETS, PROGRAM, plan_at, random_program, request

NEW_KINDS: tuple[FaultKind, ...] = ("drop_back_edge", "arm_overlap", "range_overlap")


def _good() -> tuple[PlanRequest, Plan]:
    req = request(PROGRAM)
    plan = plan_at(req, OFFSETS)
    assert validate_plan(req, plan).valid
    assert emulate(req, plan).valid
    return req, plan


def _caught(fault: Fault) -> tuple[set[str], set[str]]:
    static: set[str] = {v.code for v in validate_plan(fault.request, fault.plan).violations}
    emulated: set[str] = {v.code for v in emulate(fault.request, fault.plan).violations}
    return static, emulated


def test_new_kinds_are_registered() -> None:
    assert set(NEW_KINDS) <= set(FAULT_KINDS)


def test_dropped_back_edge_barrier_is_caught_by_both() -> None:
    req, plan = _good()
    fault = plant_fault(req, plan, "drop_back_edge", random.Random(0))
    assert fault is not None
    assert fault.point == 1  # the barrier at the loop's first point
    assert 1 not in fault.request.barriers
    assert fault.plan.placements == plan.placements
    assert fault.buffers == ("y", "x")  # y's last access, then x's first in the next iteration
    static, emulated = _caught(fault)
    assert static == {"missing_barrier"}
    assert "race" in emulated
    # The barrier is the request's: a fault of the plan alone cannot drop it.
    assert plant(req, plan, "drop_back_edge", random.Random(0)) is None


def test_arm_buffer_slid_over_a_buffer_live_across_the_branch_is_caught_by_both() -> None:
    req, plan = _good()
    fault = plant_fault(req, plan, "arm_overlap", np.random.default_rng(1))
    assert fault is not None
    assert fault.request is req
    assert fault.buffers[0] == "z"
    assert fault.buffers[1] in ("u", "v")
    static, emulated = _caught(fault)
    assert "overlap" in static
    assert emulated & {"clobbered", "race"}


def test_second_live_range_slid_over_a_live_buffer_is_caught_by_both() -> None:
    req, plan = _good()
    fault = plant_fault(req, plan, "range_overlap", random.Random(2))
    assert fault is not None
    assert fault.buffers == ("t", "w")
    static, emulated = _caught(fault)
    assert "overlap" in static
    assert emulated & {"clobbered", "race"}


def test_sharing_bytes_across_arms_is_no_fault() -> None:
    # u and v share bytes in different arms: legal, and arm_overlap never plants that.
    req, plan = _good()
    for seed in range(10):
        fault = plant_fault(req, plan, "arm_overlap", random.Random(seed))
        assert fault is not None
        assert set(fault.buffers) != {"u", "v"}


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_new_kinds_need_the_new_fields(kind: FaultKind) -> None:
    req = request({"buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}], "barriers": [1]})
    plan = plan_at(req, {"a": 0})
    assert plant_fault(req, plan, kind, random.Random(0)) is None


def _disjoint(req: PlanRequest) -> Plan:
    offsets, top = {}, 0
    for b in req.buffers:
        offsets[b.id] = top
        top += (b.size + 63) // 64 * 64
    return plan_at(req, offsets)


def test_random_programs_every_planted_fault_is_caught_by_both() -> None:
    """On random valid plans (offsets drawn at random and kept when both validators accept
    them, or every buffer apart when that is valid), both catch every planted fault, of the
    new kinds and the old."""
    rng = random.Random(7)
    planted = dict.fromkeys(FAULT_KINDS, 0)
    for _ in range(250):
        drawn = random_program(rng, least=2)
        if drawn is None:
            continue
        req, plan = drawn
        if not (validate_plan(req, plan).valid and emulate(req, plan).valid):
            plan = _disjoint(req)  # valid unless a body buffer lacks a back-edge barrier
            if not validate_plan(req, plan).valid:
                continue
        for kind in FAULT_KINDS:
            fault = plant_fault(req, plan, kind, rng)
            if fault is None:
                continue
            planted[kind] += 1
            static, emulated = _caught(fault)
            assert static, (kind, fault.description)
            assert emulated, (kind, fault.description)
    must: tuple[FaultKind, ...] = (*NEW_KINDS, "overlap", "misalign")
    assert all(planted[kind] for kind in must), planted
