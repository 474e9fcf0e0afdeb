"""The CUDA harness on programs with loops and branches: each path of the control flow is a
straight-line program whose table the one harness kernel runs (checked here on the CPU, by
the table's documented layout), every range iteration has a bitmap of its own, and
``check_plan`` runs every path, stopping at the first that fails. Marked ``gpu``: launches."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from planner.validators import cuda
from planner.validators.cuda import (
    GpuOptions,
    GpuReport,
    check_plan,
    program_from_json,
    program_to_json,
)
from planner.validators.cuda_kernel import encode_program, format_table
from planner.validators.faults import plant_fault
from planner.validators.interpreter import build_programs
from tests.support.control_flow import OFFSETS, PROGRAM, planned_by_hand
from tests.support.cuda_tables import check_table, decode, requires_gpu
from tests.support.paths import TESTS

GOLDEN = TESTS / "golden" / "cuda"


def test_every_path_encodes_and_its_table_runs_its_accesses() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    programs = build_programs(req, plan)
    assert len(programs) == 2  # one per arm of the branch
    for program in programs:
        check_table(program)


def test_steps_follow_the_loop_twice_then_one_arm() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    first, second = (encode_program(p) for p in build_programs(req, plan))
    # 8 trips run twice; arm 0 ([6, 8)) in the first path, arm 1 ([8, 10)) in the second.
    assert first.points == (0, 1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12)
    assert second.points == (0, 1, 2, 3, 4, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12)


def test_each_iteration_of_a_body_buffer_has_its_own_stamps_and_bitmap() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    program = build_programs(req, plan)[0]
    slots = [k for k, b in enumerate(program.buffers) if b.id == "x"]
    assert len(slots) == 2
    assert {program.buffers[k].offset for k in slots} == {OFFSETS["x"]}
    rows = [row for _, _, rs in decode(encode_program(program).words) for row in rs]
    bases = {row[0]: row[4] for row in rows}
    assert bases[slots[0]] != bases[slots[1]]  # a fresh written-bitmap per iteration


def test_table_matches_golden_file() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    program = build_programs(req, plan)[1]
    text = format_table(program, encode_program(program))
    path = GOLDEN / "loops_arm1.table"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_check_plan_runs_every_path_and_stops_at_the_first_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    seen: list[Any] = []

    def fake(program: Any, options: Any = None) -> GpuReport:
        seen.append(program)
        if len(seen) == 2 and fail:
            return GpuReport("mismatch", "3 bytes clobbered", trials=4, mismatches=3)
        return GpuReport("passed", "every byte held its stamp", trials=4)

    monkeypatch.setattr(cuda, "run_program", fake)
    fail = False
    report = check_plan(req, plan)
    assert report.ok
    assert report.trials == 8
    assert report.message.startswith("2 paths passed")
    assert [p.steps for p in seen] == [p.steps for p in build_programs(req, plan)]
    seen.clear()
    fail = True
    report = check_plan(req, plan)
    assert report.status == "mismatch"
    assert report.message.startswith("path 2 of 2")


@pytest.mark.gpu
@requires_gpu
def test_gpu_passes_the_loop_program_and_sees_a_dropped_back_edge_barrier() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    options = GpuOptions(trials=8, blocks=64)
    assert check_plan(req, plan, options).ok
    fault = plant_fault(req, plan, "drop_back_edge", random.Random(0))
    assert fault is not None
    report = check_plan(fault.request, fault.plan, GpuOptions(trials=32, blocks=64))
    assert report.status == "mismatch", report.message


def test_loop_programs_round_trip_through_json() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    for program in build_programs(req, plan):
        assert program_from_json(program_to_json(program)) == program
