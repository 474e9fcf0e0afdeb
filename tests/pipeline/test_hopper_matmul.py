"""The field example examples/hopper_tma_matmul.json: a persistent TMA matmul on sm_90 (a
3-stage ring of A/B tiles filled by TMA and read by wgmma, an epilogue tile stored by TMA over a
stage's bytes), and hostile variants the planner refuses or plans around."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit.cuda import emit_cuda
from planner.emit.mlir import emit_mlir
from planner.validators.emulator import emulate
from planner.validators.faults import FaultKind, plant_fault
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "hopper_tma_matmul.json"
DATA: dict[str, Any] = json.loads(EXAMPLE.read_text())


def _planned(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert emulate(request, plan).valid
    return request, plan


def test_the_epilogue_tile_takes_a_stage_bytes() -> None:
    _, plan = _planned(DATA)
    offsets = {p.id: p.offset for p in plan.placements}
    stages = [f"{op}{s}_s" for s in range(3) for op in "AB"]
    assert sorted(offsets[s] for s in stages) == [8192 * k for k in range(6)]
    assert offsets["C_s"] == 0  # over A0_s and B0_s, after the barrier at 12
    assert (plan.status, plan.arena_bytes, plan.lower_bound) == ("optimal", 49176, 49176)
    assert plan.naive_bytes == 65560
    assert plan.launch.base_alignment == 1024
    assert all(offsets[s] % 1024 == 0 for s in stages)
    # Across the tile loop's back edge, the barrier at 1 orders the store's completion (the
    # bulk wait_group.read at 16) before the next tile's TMA loads.
    assert 1 in plan.barriers.required


def test_without_the_proxy_fence_the_epilogue_is_kept_apart_and_the_plan_is_caught() -> None:
    _, good = _planned(DATA)
    hostile = copy.deepcopy(DATA)
    hostile["syncs"] = [s for s in hostile["syncs"] if s["kind"] != "fence_proxy_async"]
    request, plan = _planned(hostile)
    offsets = {p.id: p.offset for p in plan.placements}
    assert plan.arena_bytes == 65560  # C_s shares no stage's bytes
    assert all(
        offsets["C_s"] + 16384 <= offsets[f"{op}{s}_s"]
        or offsets[f"{op}{s}_s"] + 8192 <= offsets["C_s"]
        for s in range(3)
        for op in "AB"
    )
    static = {v.code for v in planner.validate(request, good).violations}
    emulated = {v.code for v in emulate(request, good).violations}
    assert static == emulated == {"missing_fence"}


def test_without_the_store_wait_the_request_is_refused() -> None:
    hostile = copy.deepcopy(DATA)
    hostile["syncs"] = [s for s in hostile["syncs"] if s.get("group") != "bulk"]
    hostile["options"] = {**hostile.get("options", {}), "sync": "existing"}
    with pytest.raises(RequestError) as info:
        parse_request(hostile)
    (error,) = info.value.errors
    assert error["loc"] == ["buffers", 6, "accesses", 1, "agent"]
    assert error["type"] == "uncovered_async_access"


def test_the_store_wait_after_the_tile_is_refused_too() -> None:
    hostile = copy.deepcopy(DATA)
    for s in hostile["syncs"]:
        if s.get("group") == "bulk":
            s["at"] = 19  # past the end of C_s and outside the tile loop
    hostile["options"] = {**hostile.get("options", {}), "sync": "existing"}
    with pytest.raises(RequestError) as info:
        parse_request(hostile)
    assert info.value.errors[0]["type"] == "uncovered_async_access"


@pytest.mark.parametrize("kind", ["early_barrier", "drop_fence", "misalign_tile", "overlap"])
def test_planted_faults_are_caught_by_both(kind: FaultKind) -> None:
    request, plan = _planned(DATA)
    rng = np.random.default_rng(5)
    for _ in range(6):
        fault = plant_fault(request, plan, kind, rng)
        if fault is None:
            assert kind == "early_barrier"  # no single barrier window on loops: not planted
            return
        assert not planner.validate(fault.request, fault.plan).valid, fault.description
        assert not emulate(fault.request, fault.plan).valid, fault.description


def test_the_emitters_carry_the_syncs() -> None:
    request, plan = _planned(DATA)
    cuda = emit_cuda(request, plan)
    assert "extern __shared__ __align__(1024) unsigned char smem_arena[];" in cuda
    for line in (
        "point 0: mbarrier.init full0",
        "point 2: mbarrier.arrive.expect_tx full0",
        "point 5: mbarrier.try_wait (until the phase completes) full0",
        "point 6: wgmma.wait_group.sync.aligned 0",
        "point 14: fence.proxy.async.shared::cta",
        "point 16: cp.async.bulk.wait_group.read 0",
        "point 19: mbarrier.inval full0",
    ):
        assert line in cuda
        assert line in emit_mlir(request, plan)
