"""New barriers of partitioned plans with loops that no pair needs (docs/design.md,
Warp-specialised partitions, Loops and branches): when the choice of barrier points stops
unproved, a chosen point whose pairs other chosen points all serve is dropped, once the
kernel without it still orders every pair on every path."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import planner
from planner.core.models import Plan, PlanRequest
from planner.pipeline import partitioned_path_barriers
from planner.pipeline.partitioned_path_barriers import stab
from planner.validators.emulator import emulate
from tests.support.partition_loops import looped_programs, planned_under
from tests.support.partition_programs import THREE, access


def _two_handovers() -> PlanRequest:
    """The producer writes ``a`` at 1 and ``c`` at 3 (``c`` live from 1, so the two never
    share); after a loop of two trips over 4 to 6 the consumer writes ``b`` and ``d`` at 8.
    Of the allowed points 2 and 5, ``a`` hands over to ``b`` at either, ``c`` to ``d`` at 5
    only, and 5 runs twice: the choice's greedy takes 2 for the first pair (run once), then
    5 for the second, and only the search finds 5 alone."""
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": "producer", "threads": [0, 128]},
                {"id": "consumer", "threads": [128, 256]},
            ],
            "loops": [{"start": 4, "end": 7, "trips": 2}],
            "buffers": [
                {"id": "a", "size": 256, "start": 0, "end": 2, "accesses": [_w(1, "producer")]},
                {"id": "c", "size": 512, "start": 1, "end": 4, "accesses": [_w(3, "producer")]},
                _late("b", 256),
                _late("d", 512),
            ],
            "options": {"sync": "insert", "barrier_candidates": [2, 5]},
        }
    )


def _w(at: int, part: str) -> dict[str, Any]:
    return access("write", at, part)


def _late(name: str, size: int) -> dict[str, Any]:
    accesses = [access("write", 8, "consumer"), access("read", 9, "consumer")]
    return {"id": name, "size": size, "start": 8, "end": 10, "accesses": accesses}


def _without(plan: Plan, point: int) -> Plan:
    """``plan`` without its new barrier (block or named) at ``point``."""
    barriers = plan.barriers.model_copy(
        update={
            "inserted": [p for p in plan.barriers.inserted if p != point],
            "required": [p for p in plan.barriers.required if p != point],
        }
    )
    named = [nb for nb in plan.named_barriers if nb.at != point]
    return plan.model_copy(update={"barriers": barriers, "named_barriers": named})


def _each_new_barrier_needed(req: PlanRequest, plan: Plan) -> None:
    for point in sorted({*plan.barriers.required, *(nb.at for nb in plan.named_barriers)}):
        assert not planner.validate(req, _without(plan, point)).valid, point


def test_the_unproved_choice_keeps_a_point_no_pair_needs() -> None:
    runs = {2: 1, 5: 2}
    sets = [frozenset({2, 5}), frozenset({5})]
    assert stab(sets, runs.__getitem__) == [5]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(partitioned_path_barriers, "STAB_NODES", 0)
        assert stab(sets, runs.__getitem__) == [2, 5]


@pytest.mark.parametrize("nodes", [0, partitioned_path_barriers.STAB_NODES])
def test_a_point_no_pair_needs_is_dropped(nodes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitioned_path_barriers, "STAB_NODES", nodes)
    req = _two_handovers()
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 768  # a under b, c under d
    assert plan.barriers.inserted == [5]
    assert plan.barriers.executions == 2
    _each_new_barrier_needed(req, plan)
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert len(notes) == 2
    assert all("at point 5 (inserted)" in n for n in notes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(looped_programs() | looped_programs(THREE))
def test_no_new_barrier_of_an_unproved_choice_is_unused(req: PlanRequest) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(partitioned_path_barriers, "STAB_NODES", 0)
        req, _, plan = planned_under(req, "insert")  # validated, and by the emulator
    if plan is None:
        return  # refused: no allowed point orders a buffer's own instances
    _each_new_barrier_needed(req, plan)
