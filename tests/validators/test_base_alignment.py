"""The base alignment a plan assumes (docs/design.md, Offsets and the arena; Base alignment):
swizzled TMA tiles, the plan's ``launch.base_alignment``, the target's guarantee, both
validators and both emitters."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit.cuda import emit_cuda
from planner.emit.mlir import emit_mlir
from planner.selftest import run_selftest, subjects, validators
from planner.validators.emulator import emulate
from planner.validators.faults import plant_fault

# A 128B-swizzled A tile and a 64B-swizzled B tile; the epilogue tile C (a TMA store source,
# no swizzle) takes A's bytes after the barrier at 4; a scalar flag sits beside them.
TMA: dict[str, Any] = {
    "name": "tma_tiles",
    "target": "sm_90",
    "alignment": 16,
    "block": [128],
    "barriers": [4],
    "buffers": [
        {"id": "flag", "size": 4, "start": 0, "end": 8, "alignment": 4},
        {"id": "A", "size": 16384, "start": 0, "end": 4, "swizzle": "128B"},
        {"id": "B", "size": 8192, "start": 0, "end": 4, "swizzle": "64B"},
        {"id": "C", "size": 16384, "start": 4, "end": 8, "swizzle": "none"},
    ],
    "options": {"sync": "existing", "time_limit": 2.0},
}


def _planned(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def _with(plan: Plan, **launch: Any) -> Plan:
    return plan.model_copy(update={"launch": plan.launch.model_copy(update=launch)})


def _moved(plan: Plan, ident: str, offset: int) -> Plan:
    placements = [
        p.model_copy(update={"offset": offset}) if p.id == ident else p for p in plan.placements
    ]
    return plan.model_copy(update={"placements": placements})


def test_swizzle_raises_the_alignment_of_the_absolute_address() -> None:
    request, plan = _planned(TMA)
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["A"] % 1024 == 0
    assert offsets["B"] % 512 == 0
    assert offsets["C"] % 128 == 0
    assert [request.alignment_of(b) for b in request.buffers] == [4, 1024, 512, 128]
    assert plan.launch.base_alignment == 1024
    assert emulate(request, plan).valid


def test_a_version_1_request_states_no_base_alignment() -> None:
    data = copy.deepcopy(TMA)
    for b in data["buffers"]:
        b.pop("swizzle", None)
    _, plan = _planned(data)
    assert plan.launch.base_alignment is None
    assert "base_alignment" not in plan.model_dump_json()


def test_loops_route_states_it_too() -> None:
    data = copy.deepcopy(TMA)
    data["loops"] = [{"start": 0, "end": 4, "trips": 4}]
    data["barriers"] = [0, 4]
    request, plan = _planned(data)
    assert request.has_control_flow
    assert plan.launch.base_alignment == 1024
    assert emulate(request, plan).valid


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "gfx942"])
def test_a_tma_tile_on_a_device_without_tma_is_refused(target: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request({**TMA, "target": target})
    errors = info.value.errors
    assert {tuple(e["loc"]) for e in errors} == {("buffers", i, "swizzle") for i in (1, 2, 3)}
    assert all(e["type"] == "swizzle_without_tma" for e in errors)
    assert target in errors[0]["msg"]


def test_a_swizzle_beyond_the_figures_guarantee_is_refused() -> None:
    figures = {"capacity": 200000, "blocks_per_sm": 4, "base_alignment": 512, "tma": True}
    with pytest.raises(RequestError) as info:
        parse_request({**TMA, "target": figures})
    (error,) = info.value.errors
    assert error["loc"] == ["buffers", 1, "swizzle"]
    assert error["type"] == "alignment_beyond_target"
    assert "1024" in error["msg"]
    assert "512" in error["msg"]


def test_an_unknown_swizzle_names_field_and_value() -> None:
    data = copy.deepcopy(TMA)
    data["buffers"][1]["swizzle"] = "256B"
    with pytest.raises(RequestError) as info:
        parse_request(data)
    (error,) = info.value.errors
    assert error["loc"] == ["buffers", 1, "swizzle"]
    assert error["input"] == "256B"


# --- both validators ------------------------------------------------------------------------


def test_rejects_a_stated_base_below_what_a_tile_needs() -> None:
    request, plan = _planned(TMA)
    bad = _with(plan, base_alignment=512)
    report = planner.validate(request, bad)
    assert [v.code for v in report.violations] == ["misaligned"]
    assert report.violations[0].buffers == ["A"]
    emulated = emulate(request, bad)
    assert [v.code for v in emulated.violations] == ["misaligned"]
    assert "address 512" in emulated.violations[0].message


def test_rejects_a_missing_base_alignment() -> None:
    request, plan = _planned(TMA)
    bad = _with(plan, base_alignment=None)
    report = planner.validate(request, bad)
    assert [v.code for v in report.violations] == ["misaligned"]
    assert "launch.base_alignment" in report.violations[0].message


def test_rejects_a_base_beyond_the_target_guarantee() -> None:
    request, plan = _planned(TMA)
    bad = _with(plan, base_alignment=2048)
    report = planner.validate(request, bad)
    assert [v.code for v in report.violations] == ["misaligned"]
    assert "guarantees 1024" in report.violations[0].message


def test_both_validators_catch_a_misaligned_swizzled_tile() -> None:
    request, plan = _planned(TMA)
    offsets = {p.id: p.offset for p in plan.placements}
    bad = _moved(plan, "A", offsets["A"] + 512)
    assert "misaligned" in {v.code for v in planner.validate(request, bad).violations}
    assert "misaligned" in {v.code for v in emulate(request, bad).violations}


# --- emitters -------------------------------------------------------------------------------


def test_emitters_align_the_arena() -> None:
    request, plan = _planned(TMA)
    assert "extern __shared__ __align__(1024) unsigned char smem_arena[];" in emit_cuda(
        request, plan
    )
    mlir = emit_mlir(request, plan)
    assert "memref.assume_alignment %_smem, 1024" in mlir
    assert "{alignment = 1024}" in mlir
    assert "memref.view %_smem_aligned[" in mlir


# --- planted faults -------------------------------------------------------------------------


def test_every_planted_misaligned_tile_is_caught_by_both() -> None:
    request, plan = _planned(TMA)
    rng = np.random.default_rng(3)
    forms: set[str] = set()
    for _ in range(40):
        fault = plant_fault(request, plan, "misalign_tile", rng)
        assert fault is not None
        forms.add(fault.description.split()[0])
        assert not planner.validate(fault.request, fault.plan).valid, fault.description
        assert not emulate(fault.request, fault.plan).valid, fault.description
    assert forms == {"stated", "moved"}


def test_misalign_tile_needs_a_tile() -> None:
    data = copy.deepcopy(TMA)
    for b in data["buffers"]:
        b.pop("swizzle", None)
    request, plan = _planned(data)
    assert plant_fault(request, plan, "misalign_tile", np.random.default_rng(0)) is None


def test_selftest_plants_it_in_the_example_and_both_catch_all() -> None:
    cases = [s for s in subjects(0, seed=0) if s.name == "tma_swizzled_tiles.json"]
    assert len(cases) == 1
    tally = run_selftest(cases * 8, validators(), seed=1, kinds=["misalign_tile"])
    assert tally.planted["misalign_tile"] == 8
    assert tally.caught["misalign_tile", "static"] == 8
    assert tally.caught["misalign_tile", "emulator"] == 8
    assert not tally.failed
