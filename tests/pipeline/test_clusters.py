"""Thread-block clusters (docs/design.md, Clusters): the request's checks, the cluster barriers
each sync policy gives, and the cluster GEMM example. Every plan goes through the static
validator, and the ones the cluster rule decides through the emulator too."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate
from planner.validators.faults import plant_fault
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "cluster_multicast_gemm.json"


def _plan(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    report = planner.validate(request, plan)
    assert report.valid, report.violations
    assert emulate(request, plan).valid
    return request, plan


def _codes(request: PlanRequest, plan: Plan) -> tuple[set[str], set[str]]:
    static: set[str] = {v.code for v in planner.validate(request, plan).violations}
    emulated: set[str] = {v.code for v in emulate(request, plan).violations}
    return static, emulated


def _error_types(data: dict[str, Any]) -> set[str]:
    with pytest.raises(RequestError) as caught:
        parse_request(data)
    return {e["type"] for e in caught.value.errors}


def _two(**extra: Any) -> dict[str, Any]:
    """A cluster-scoped buffer, then a block-scoped one that may take its bytes."""
    data: dict[str, Any] = {
        "target": "sm_90",
        "cluster": [2],
        "block": [4],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2, "scope": "cluster"},
            {"id": "b", "size": 64, "start": 2, "end": 4},
        ],
    }
    data.update(extra)
    return data


def test_requests_without_a_cluster_dump_as_before() -> None:
    data = {"target": "sm_90", "buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]}
    request = parse_request(data)
    dumped = request.model_dump_json()
    assert "scope" not in dumped
    assert "cluster" not in dumped
    plan = planner.plan(request)
    assert "cluster" not in plan.model_dump_json()


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"cluster": None}, "scope_without_cluster"),
        ({"target": "sm_80"}, "cluster_unsupported"),
        ({"target": None}, "cluster_unsupported"),
        (
            {"target": {"name": "sm_90", "capacity": 232448, "blocks_per_sm": 32}},
            "cluster_unsupported",
        ),
        ({"cluster": [4, 4, 2]}, "cluster_too_large"),
        ({"target": "sm_120", "cluster": [4, 4]}, "cluster_too_large"),
        ({"grid": [3]}, "grid_not_multiple_of_cluster"),
        ({"options": {"shrink": True}}, "shrink_with_cluster"),
        ({"options": {"overflow": "spill"}}, "spill_with_cluster"),
    ],
)
def test_rejects_bad_clusters(change: dict[str, Any], code: str) -> None:
    data = _two(**change)
    if data["cluster"] is None:
        del data["cluster"]
    if data["target"] is None:
        del data["target"]
    assert code in _error_types(data)


def test_cluster_sizes_past_eight_are_non_portable() -> None:
    _, plan = _plan(_two(cluster=[4, 4]))
    assert plan.launch.cluster == [4, 4, 1]
    assert plan.launch.cluster_non_portable
    _, plan = _plan(_two(cluster=[2, 4]))
    assert plan.launch.cluster == [2, 4, 1]
    assert not plan.launch.cluster_non_portable


def test_insert_adds_a_cluster_barrier_in_place_of_a_block_barrier() -> None:
    _, plan = _plan(_two())
    assert plan.arena_bytes == 64
    cluster = plan.cluster_barriers
    assert cluster is not None
    assert cluster.inserted == cluster.required == [2]
    assert plan.barriers.inserted == []
    assert plan.barriers.required == []


def test_a_block_barrier_does_not_order_a_peer() -> None:
    # Under "existing" a block barrier between them is not enough: kept apart.
    _, plan = _plan(_two(barriers=[2], options={"sync": "existing"}))
    assert plan.arena_bytes == 128
    request, plan = _plan(
        _two(syncs=[{"kind": "cluster_barrier", "at": 2}], options={"sync": "existing"})
    )
    assert plan.arena_bytes == 64
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.required == [2]
    # Dropping the request's cluster barrier is caught by both validators.
    broken = request.model_copy(update={"syncs": []})
    listed = plan.cluster_barriers.model_copy(update={"existing": [], "required": []})
    faulty = plan.model_copy(update={"cluster_barriers": listed})
    static, emulated = _codes(broken, faulty)
    assert "missing_cluster_barrier" in static
    assert "missing_cluster_barrier" in emulated


def test_a_cluster_barrier_is_a_block_barrier_too() -> None:
    data: dict[str, Any] = {
        "target": "sm_90",
        "cluster": [2],
        "block": [4],
        "syncs": [{"kind": "cluster_barrier", "at": 2}],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2},
            {"id": "b", "size": 64, "start": 2, "end": 4},
        ],
        "options": {"sync": "existing"},
    }
    _, plan = _plan(data)
    assert plan.arena_bytes == 64


def test_none_lists_the_cluster_barriers_it_relies_on() -> None:
    request, plan = _plan(_two(options={"sync": "none"}))
    assert plan.arena_bytes == 64
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.required == [2]
    assert plan.barriers.required == []
    listed = plan.cluster_barriers.model_copy(update={"required": []})
    static, emulated = _codes(request, plan.model_copy(update={"cluster_barriers": listed}))
    assert "missing_cluster_barrier" in static
    assert "missing_cluster_barrier" in emulated


def test_inserted_cluster_barriers_run_fewest_times() -> None:
    # The window from a's last access (1) to b's first (7) holds points in a loop of 10 trips
    # and points outside it: the cluster barrier goes outside (x, pinned apart, needs none).
    data: dict[str, Any] = {
        "target": "sm_90",
        "cluster": [2],
        "block": [4],
        "loops": [{"start": 2, "end": 6, "trips": 10}],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 2, "scope": "cluster"},
            {"id": "x", "size": 16, "start": 3, "end": 5, "offset": 64},
            {"id": "b", "size": 64, "start": 7, "end": 9},
        ],
    }
    _, plan = _plan(data)
    assert plan.cluster_barriers is not None
    assert len(plan.cluster_barriers.inserted) == 1
    assert plan.cluster_barriers.executions == 1


def test_the_cluster_gemm_example_plans_as_documented() -> None:
    data = json.loads(EXAMPLE.read_text())
    request, plan = _plan(data)
    # The epilogue tile takes the bytes of the first two A/B stages once the last wgmma
    # has read them: one cluster barrier (the A stages are multicast by the peer CTA).
    assert plan.arena_bytes == plan.lower_bound == 131104
    assert plan.naive_bytes == 163872
    assert plan.status == "optimal"
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.existing == [1]
    assert plan.cluster_barriers.inserted == [13]
    assert plan.barriers.inserted == []
    shared = {p.id: range(p.offset, p.offset + p.size) for p in plan.placements}
    c = shared["C_s"]
    assert any(shared[a].start < c.stop and c.start < shared[a].stop for a in ("A0_s", "A1_s"))
    assert plan.launch.cluster == [2, 1, 1]
    assert plan.launch.base_alignment == 1024
    # Under "existing" no cluster barrier stands between the mainloop and the epilogue.
    _, existing = _plan({**data, "options": {"sync": "existing", "time_limit": 5.0}})
    assert existing.arena_bytes == 163872
    _, none = _plan({**data, "options": {"sync": "none", "time_limit": 5.0}})
    assert none.cluster_barriers is not None
    assert none.cluster_barriers.required == [13]
    # The planted fault: the inserted cluster barrier dropped.
    fault = plant_fault(request, plan, "drop_cluster_barrier", random.Random(0))
    assert fault is not None
    static, emulated = _codes(fault.request, fault.plan)
    assert "missing_cluster_barrier" in static
    assert "missing_cluster_barrier" in emulated


def test_the_hostile_cluster_gemm_is_refused() -> None:
    # The epilogue pinned over a multicast A stage with only a block barrier in between.
    data = json.loads(EXAMPLE.read_text())
    data["barriers"] = [13, 14]
    data["options"] = {"sync": "existing", "time_limit": 5.0}
    for b in data["buffers"]:
        if b["id"] in ("A0_s", "C_s"):
            b["offset"] = 0
    with pytest.raises(RequestError) as caught:
        planner.plan(data)
    assert "no cluster barrier" in str(caught.value)
    # Without the pin over A0_s the planner fixes it: C_s goes over the B stages only.
    for b in data["buffers"]:
        if b["id"] == "A0_s":
            del b["offset"]
    _, plan = _plan(data)
    shared = {p.id: range(p.offset, p.offset + p.size) for p in plan.placements}
    c = shared["C_s"]
    for k in range(4):
        a = shared[f"A{k}_s"]
        assert not (a.start < c.stop and c.start < a.stop)


def test_selftest_plants_drop_cluster_barrier_and_both_catch_every_one() -> None:
    from planner.selftest import Subject, run_selftest, validators

    data = json.loads(EXAMPLE.read_text())
    given = {
        **data,
        "syncs": [*data["syncs"], {"kind": "cluster_barrier", "at": 13}],
        "options": {"sync": "existing", "time_limit": 5.0},
    }
    cases = []
    for name, variant in (
        ("inserted", data),
        ("required", {**data, "options": {"sync": "none", "time_limit": 5.0}}),
        ("the request's", given),
    ):
        request, plan = _plan(variant)
        assert plan.arena_bytes == 131104
        cases.append(Subject(name, request, plan))
    tally = run_selftest(cases * 2, validators(), seed=5, kinds=["drop_cluster_barrier"])
    assert tally.planted["drop_cluster_barrier"] == 6
    assert tally.caught["drop_cluster_barrier", "static"] == 6
    assert tally.caught["drop_cluster_barrier", "emulator"] == 6
    assert not tally.failed


def test_a_cluster_scoped_ring_is_checked_at_its_depth() -> None:
    # A ring of stages peers fill (multicast) over a loop, then an epilogue on its bytes.
    data: dict[str, Any] = {
        "target": "sm_90",
        "cluster": [2],
        "capacity": 6000,
        "loops": [{"start": 1, "end": 5, "trips": 8}],
        "buffers": [
            {"id": "r", "size": 1024, "start": 0, "end": 6, "copies": {"min": 2, "max": 4}},
            {"id": "e", "size": 4096, "start": 6, "end": 8},
        ],
    }
    data["buffers"][0]["scope"] = "cluster"
    request, plan = _plan(data)
    assert plan.rings is not None
    assert plan.rings[0].copies == 4
    assert plan.arena_bytes == 4096
    assert plan.cluster_barriers is not None
    assert plan.cluster_barriers.inserted == [6]
    listed = plan.cluster_barriers.model_copy(update={"inserted": [], "required": []})
    static, emulated = _codes(request, plan.model_copy(update={"cluster_barriers": listed}))
    assert "missing_cluster_barrier" in static
    assert "missing_cluster_barrier" in emulated
