"""Warp-specialised partitions in a cluster (docs/design.md, Clusters and Warp-specialised
partitions): a cluster-scoped buffer's bytes go to another buffer only after a cluster barrier
that every partition of every CTA takes part in, and both validators check it on their own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate
from planner.validators.faults import plant_fault
from tests.support.partition_programs import THREE, access, programs
from tests.support.paths import ROOT


def _request(sync: str, own: tuple[int, ...] = (), **more: Any) -> PlanRequest:
    """A producer multicasts ``A`` by TMA, the consumer reads it by wgmma (done at its
    wait_group at 3); then the consumer's own ``C``."""
    body: dict[str, Any] = {
        "target": "sm_90",
        "cluster": [2, 1, 1],
        "grid": [2],
        "block": [256],
        "partitions": [
            {"id": "producer", "threads": [0, 128]},
            {"id": "consumer", "threads": [128, 256]},
        ],
        "buffers": [
            {
                "id": "A",
                "size": 1024,
                "start": 0,
                "end": 4,
                "scope": "cluster",
                "accesses": [
                    access("write", 1, "producer", agent="tma", mbarrier="full"),
                    access("read", 2, "consumer", agent="mma"),
                ],
            },
            {
                "id": "C",
                "size": 1024,
                "start": 4,
                "end": 7,
                "accesses": [access("write", 5, "consumer"), access("read", 6, "consumer")],
            },
        ],
        "syncs": [
            {"kind": "expect_tx", "at": 1, "mbarrier": "full", "partition": "producer"},
            {"kind": "mbarrier_wait", "at": 2, "mbarrier": "full", "partition": "consumer"},
            {"kind": "wait_group", "at": 3, "group": "wgmma", "partition": "consumer"},
            *({"kind": "cluster_barrier", "at": p} for p in own),
        ],
        "options": {"sync": sync},
        **more,
    }
    return PlanRequest.model_validate(body)


def _checked(req: PlanRequest) -> Plan:
    plan = planner.plan(req)  # the static check runs on every plan
    assert emulate(req, plan).valid
    return plan


def _without_new_cluster_barriers(plan: Plan) -> Plan:
    listed = plan.cluster_barriers
    assert listed is not None
    kept = listed.model_copy(update={"inserted": [], "required": listed.existing})
    return plan.model_copy(update={"cluster_barriers": kept})


def test_insert_adds_a_cluster_barrier_that_both_validators_need() -> None:
    req = _request("insert")
    plan = _checked(req)
    assert plan.arena_bytes == 1024
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.inserted == [5]  # after the wait_group at 3, by C's write
    assert plan.cluster_barriers.executions == 1
    assert plan.barriers.inserted == []
    assert plan.named_barriers == []
    assert plan.launch.cluster == [2, 1, 1]
    bad = _without_new_cluster_barriers(plan)
    assert "missing_cluster_barrier" in {v.code for v in planner.validate(req, bad).violations}
    assert "missing_cluster_barrier" in {v.code for v in emulate(req, bad).violations}


def test_existing_keeps_the_pair_apart_without_a_cluster_barrier() -> None:
    assert _checked(_request("existing")).arena_bytes == 2048
    assert _checked(_request("existing", barriers=[4])).arena_bytes == 2048  # block: not enough
    assert _checked(_request("existing", own=(2,))).arena_bytes == 2048  # before the wait_group
    shared = _checked(_request("existing", own=(3,)))
    assert shared.arena_bytes == 1024
    assert shared.cluster_barriers is not None
    assert shared.cluster_barriers.existing == [3]


def test_none_lists_the_cluster_barrier_the_caller_adds() -> None:
    plan = _checked(_request("none"))
    assert plan.arena_bytes == 1024
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.inserted == []
    assert plan.cluster_barriers.required == [5]


@pytest.mark.parametrize("sync", ["existing", "insert", "none"])
def test_required_lists_the_fewest_cluster_barriers(sync: str) -> None:
    plan = _checked(_request(sync, own=(2, 3, 4)))
    listed = plan.cluster_barriers
    assert listed is not None
    assert listed.existing == [2, 3, 4]
    assert listed.required == [4]  # A is done at 3 (its wait_group), C starts at 5
    # The kernel with only the required cluster barrier keeps the plan valid for both...
    fewer = _request(sync, own=(4,))
    kept = plan.model_copy(update={"cluster_barriers": listed.model_copy(update={"existing": [4]})})
    assert planner.validate(fewer, kept).valid
    assert emulate(fewer, kept).valid
    # ...and with none, neither holds it.
    bare = _request(sync)
    gone = listed.model_copy(update={"existing": [], "required": []})
    dropped = plan.model_copy(update={"cluster_barriers": gone})
    assert "missing_cluster_barrier" in {v.code for v in planner.validate(bare, dropped).violations}
    assert "missing_cluster_barrier" in {v.code for v in emulate(bare, dropped).violations}


def test_pinned_over_a_multicast_buffer_with_only_a_block_barrier_is_refused() -> None:
    body = _request("existing", barriers=[4]).model_dump(mode="json")
    for b in body["buffers"]:
        b["offset"] = 0
    with pytest.raises(RequestError) as err:
        planner.plan(PlanRequest.model_validate(body))
    assert err.value.errors[0]["type"] == "pinned_conflict"
    assert "no cluster barrier between them" in err.value.errors[0]["msg"]


def test_selftest_fault_drops_the_cluster_barrier_of_a_partitioned_plan() -> None:
    req = _request("insert")
    plan = _checked(req)
    fault = plant_fault(req, plan, "drop_cluster_barrier", np.random.default_rng(0))
    assert fault is not None
    assert fault.buffers == ("A", "C")
    assert not planner.validate(fault.request, fault.plan).valid
    assert not emulate(fault.request, fault.plan).valid


@st.composite
def clustered(draw: st.DrawFn) -> PlanRequest:
    """A random small partitioned program in a cluster of two, some buffers cluster-scoped."""
    body = draw(programs() | programs(THREE)).model_dump(mode="json", exclude_defaults=True)
    for b in body["buffers"]:
        if draw(st.booleans()):
            b["scope"] = "cluster"
    own = draw(st.lists(st.integers(1, 9), max_size=1))
    body["syncs"] = [*body.get("syncs", []), *({"kind": "cluster_barrier", "at": p} for p in own)]
    body.update(target="sm_90", cluster=[2, 1, 1], grid=[2])
    body["options"] = {"sync": draw(st.sampled_from(["existing", "insert", "none"]))}
    return PlanRequest.model_validate(body)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clustered())
def test_both_validators_hold_every_clustered_partitioned_plan(req: PlanRequest) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    plan = _checked(req)
    listed = plan.cluster_barriers
    assert listed is not None
    if not (set(listed.inserted) | set(listed.required)) - set(listed.existing):
        return
    # Without its new cluster barriers a cluster-scoped reuse is open: both say so.
    bad = _without_new_cluster_barriers(plan)
    assert "missing_cluster_barrier" in {v.code for v in planner.validate(req, bad).violations}
    assert "missing_cluster_barrier" in {v.code for v in emulate(req, bad).violations}


WS_CLUSTER = ROOT / "examples" / "ws_cluster_multicast_gemm.json"


@pytest.mark.parametrize(
    ("sync", "arena", "inserted", "required"),
    [
        ("insert", 131104, [13], [13]),
        ("existing", 163872, [], []),
        ("none", 131104, [], [13]),
    ],
)
def test_warp_specialised_cluster_gemm_example(
    sync: str, arena: int, inserted: list[int], required: list[int]
) -> None:
    request = parse_request(WS_CLUSTER.read_text())
    request = request.model_copy(
        update={"options": request.options.model_copy(update={"sync": sync})}
    )
    plan = _checked(request)
    assert plan.arena_bytes == arena
    assert plan.naive_bytes == 163872
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.inserted == inserted
    assert plan.cluster_barriers.required == required
    assert plan.barriers.inserted == []
    assert plan.named_barriers == []
    if sync != "insert":
        return
    fault = plant_fault(request, plan, "drop_cluster_barrier", np.random.default_rng(0))
    assert fault is not None
    assert fault.buffers == ("A0_s", "C_s")
    assert "missing_cluster_barrier" in {
        v.code for v in planner.validate(fault.request, fault.plan).violations
    }
    assert "missing_cluster_barrier" in {
        v.code for v in emulate(fault.request, fault.plan).violations
    }
