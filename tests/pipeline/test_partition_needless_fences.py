"""A partitioned plan adds no proxy fence its other syncs make needless (docs/design.md,
Warp-specialised partitions): a barrier it adds for one reuse may stand after a fence of the
request, or after another new fence, that already orders a second reuse's generic writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import planner
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate
from tests.support.partition_fences import fence_programs, fenced_rings
from tests.support.partition_loops import planned_under, tile_and_epilogue
from tests.support.partition_programs import THREE, access

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]


def _two_writes(tma_by: str, fence_by: str) -> PlanRequest:
    """The producer writes ``b0`` at 1 and ``b1`` at 2; a TMA write by ``tma_by`` fills
    ``b2`` at 3, which may take the bytes of both; the request's barrier at 2 orders ``b0``
    (but for a fence), its own fence at 3 is by ``fence_by``."""
    tile = {"size": 128, "accesses": []}
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "barriers": [2],
            "buffers": [
                {
                    **tile,
                    "id": "b0",
                    "start": 0,
                    "end": 2,
                    "accesses": [access("write", 1, "producer")],
                },
                {
                    **tile,
                    "id": "b1",
                    "start": 1,
                    "end": 3,
                    "accesses": [access("write", 2, "producer")],
                },
                {"id": "landed", "size": 8, "kind": "mbarrier", "start": 0, "end": 6},
                {
                    "id": "b2",
                    "size": 256,
                    "start": 3,
                    "end": 6,
                    "accesses": [
                        access("write", 3, tma_by, agent="tma", mbarrier="landed"),
                        access("read", 5, tma_by),
                    ],
                },
            ],
            "syncs": [
                {"kind": "fence_proxy_async", "at": 3, "partition": fence_by},
                {"kind": "expect_tx", "at": 3, "mbarrier": "landed", "partition": tma_by},
                {"kind": "mbarrier_wait", "at": 4, "mbarrier": "landed", "partition": tma_by},
            ],
            "options": {"sync": "insert"},
        }
    )


def _each_fence_needed(req: PlanRequest, plan: Plan) -> None:
    """Without any one of the plan's fences, the static check refuses the plan."""
    for k in range(len(plan.fences)):
        fewer = plan.model_copy(update={"fences": plan.fences[:k] + plan.fences[k + 1 :]})
        assert not planner.validate(req, fewer).valid, plan.fences[k]


@pytest.mark.parametrize(
    ("tma_by", "fence_by", "fences"),
    [
        ("producer", "producer", []),  # the request's fence at 3, then the named barrier at 3
        ("consumer", "producer", []),  # the request's fence at 3, then the block barrier at 3
        ("producer", "consumer", [(3, "producer")]),  # one new fence serves both writes
        ("consumer", "consumer", [(3, "producer")]),
    ],
)
def test_no_fence_where_a_new_barrier_follows_one(
    tma_by: str, fence_by: str, fences: list[tuple[int, str]]
) -> None:
    req = _two_writes(tma_by, fence_by)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 264  # b2 over b0 and b1, the mbarrier apart
    assert [(f.at, f.partition) for f in plan.fences] == fences
    assert plan.barriers.inserted or plan.named_barriers
    _each_fence_needed(req, plan)
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert any(m.startswith("b2 reuses bytes of b0") for m in notes), notes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fence_programs() | fence_programs(THREE), st.sampled_from(["insert", "none"]))
def test_every_fence_a_plan_adds_is_needed(req: PlanRequest, sync: str) -> None:
    data: dict[str, Any] = req.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("options", {})["sync"] = sync
    req = PlanRequest.model_validate(data)
    note(req.model_dump_json(exclude_defaults=True))
    plan = planner.plan(req)  # validated inside
    assert emulate(req, plan).valid
    _each_fence_needed(req, plan)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fenced_rings(), st.sampled_from(["insert", "none"]))
def test_every_fence_a_looped_plan_adds_is_needed(req: PlanRequest, sync: str) -> None:
    """The same on partitions with loops, planned on every path."""
    req, _, plan = planned_under(req, sync)  # validated, and by the emulator
    if plan is not None:  # else refused: no allowed point orders a slot's own instances
        _each_fence_needed(req, plan)


LOOPED = {
    "barriers": [2],
    "loops": [{"start": 1, "end": 5, "trips": 2}],
    "syncs": [
        {"kind": "mbarrier_arrive", "at": 2, "mbarrier": "full", "partition": "producer"},
        {"kind": "mbarrier_wait", "at": 3, "mbarrier": "full", "partition": "consumer"},
        {"kind": "expect_tx", "at": 5, "mbarrier": "landed", "partition": "consumer"},
        {"kind": "mbarrier_wait", "at": 6, "mbarrier": "landed", "partition": "consumer"},
        {"kind": "fence_proxy_async", "at": 5, "partition": "producer"},
    ],
    "partitions": PARTS,
    "buffers": tile_and_epilogue(access("write", 5, "consumer", agent="tma", mbarrier="landed")),
}


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_no_fence_in_a_loop_where_the_requests_fence_serves(sync: str) -> None:
    """The tile written in a loop hands its bytes to a TMA write after it; the request's own
    fence at 5 and the barrier the plan adds there order the two: no fence at 2 as well."""
    req = PlanRequest.model_validate({**LOOPED, "options": {"sync": sync}})
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 256
    assert plan.fences == []
    _each_fence_needed(req, plan)
