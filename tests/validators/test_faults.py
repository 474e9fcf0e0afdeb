"""Fault planting: each kind breaks what it says, only that, and deterministically."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import planner
from planner.core.models import Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.faults import FAULT_KINDS, FaultKind, plant, plant_fault

TX = "threadIdx.x"


def _request(sync: str, barriers: list[int]) -> PlanRequest:
    data: dict[str, Any] = {
        "block": [32],
        "alignment": 16,
        "barriers": barriers,
        "buffers": [
            {"id": "a", "size": 256, "start": 0, "end": 3},
            {"id": "b", "size": 256, "start": 3, "end": 6},
            {"id": "c", "size": 128, "start": 1, "end": 5},
        ],
        "options": {"sync": sync},
    }
    return PlanRequest.model_validate(data)


def _offsets(plan: Plan) -> dict[str, int]:
    return {p.id: p.offset for p in plan.placements}


def test_overlap_slides_one_buffer_over_a_live_one() -> None:
    request = _request("existing", [3])
    plan = planner.plan(request)
    fault = plant_fault(request, plan, "overlap", np.random.default_rng(0))
    assert fault is not None
    assert fault.request is request
    moved = [k for k, v in _offsets(fault.plan).items() if _offsets(plan)[k] != v]
    assert len(moved) == 1
    assert moved[0] in fault.buffers
    codes = {v.code for v in validate_plan(request, fault.plan).violations}
    assert "overlap" in codes
    assert "wrong_arena" not in codes  # the arena follows the move
    assert "misaligned" not in codes


def test_drop_barrier_from_the_request_under_sync_existing() -> None:
    request = _request("existing", [3])
    plan = planner.plan(request)
    assert _offsets(plan)["a"] == _offsets(plan)["b"]  # b reuses a across the barrier
    assert plant(request, plan, "drop_barrier", random.Random(0)) is None  # needs the request
    fault = plant_fault(request, plan, "drop_barrier", random.Random(0))
    assert fault is not None
    assert fault.point == 3
    assert fault.request.barriers == []
    assert fault.plan.barriers.existing == []
    assert set(fault.buffers) == {"a", "b"}
    codes = [v.code for v in validate_plan(fault.request, fault.plan).violations]
    assert codes == ["missing_barrier"]


def test_drop_inserted_barrier_changes_the_plan_only() -> None:
    request = _request("insert", [])
    plan = planner.plan(request)
    assert plan.barriers.inserted
    faulty = plant(request, plan, "drop_barrier", np.random.default_rng(1))
    assert faulty is not None
    dropped = set(plan.barriers.inserted) - set(faulty.barriers.inserted)
    assert len(dropped) == 1
    assert not dropped & set(faulty.barriers.required)
    codes = [v.code for v in validate_plan(request, faulty).violations]
    assert codes == ["missing_barrier"]


def test_drop_barrier_needs_a_reuse() -> None:
    request = _request("existing", [3])
    plan = planner.plan(request)
    apart = plan.model_copy(
        update={
            "placements": [
                p.model_copy(update={"offset": k * 256}) for k, p in enumerate(plan.placements)
            ],
            "arena_bytes": 768,
        }
    )
    assert plant_fault(request, apart, "drop_barrier", np.random.default_rng(0)) is None


def test_misalign_moves_off_the_alignment_only() -> None:
    request = _request("existing", [3])
    plan = planner.plan(request)
    fault = plant_fault(request, plan, "misalign", np.random.default_rng(2))
    assert fault is not None
    (name,) = fault.buffers
    assert _offsets(fault.plan)[name] % 16 == 8
    assert "misaligned" in {v.code for v in validate_plan(request, fault.plan).violations}
    byte_aligned = request.model_copy(update={"alignment": 1})
    assert plant_fault(byte_aligned, plan, "misalign", np.random.default_rng(2)) is None


def test_break_alias_needs_aliases() -> None:
    request = _request("existing", [3])
    plan = planner.plan(request)
    assert plant_fault(request, plan, "break_alias", np.random.default_rng(0)) is None
    assert plant(request, plan, "break_alias", np.random.default_rng(0)) is None


def test_break_alias_makes_every_thread_touch_the_later_buffer() -> None:
    own = {"bytes": 4, "index": {TX: 1}}
    request = PlanRequest.model_validate(
        {
            "block": [32],
            "alignment": 16,
            "buffers": [
                {
                    "id": "a",
                    "size": 128,
                    "start": 0,
                    "end": 3,
                    "accesses": [{**own, "op": "write", "at": 0}, {**own, "op": "read", "at": 2}],
                },
                {
                    "id": "b",
                    "size": 128,
                    "start": 3,
                    "end": 6,
                    "accesses": [{**own, "op": "write", "at": 3}, {**own, "op": "read", "at": 5}],
                },
            ],
            "options": {"sync": "existing"},
        }
    )
    plan = planner.plan(request)
    assert plan.aliases == [["a", "b"]]
    fault = plant_fault(request, plan, "break_alias", np.random.default_rng(0))
    assert fault is not None
    assert fault.buffers == ("a", "b")
    assert all(x.threads == "all" for x in fault.request.buffers[1].accesses)
    assert fault.plan == plan
    assert not validate_plan(fault.request, fault.plan).valid


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_same_seed_same_fault(kind: FaultKind) -> None:
    request = _request("insert", [])
    plan = planner.plan(request)
    one = plant_fault(request, plan, kind, np.random.default_rng(5))
    two = plant_fault(request, plan, kind, np.random.default_rng(5))
    assert one == two


def test_unknown_kind_is_refused() -> None:
    request = _request("existing", [3])
    with pytest.raises(ValueError, match="unknown fault kind 'gap'"):
        # "gap" is no FaultKind: the check at run time is what is under test.
        plant(request, planner.plan(request), "gap", random.Random(0))  # type: ignore[arg-type]
