"""Emitters on programs with loops, branches and several live ranges: the CUDA and MLIR
outlines put each barrier inside its loop or arm, mark what runs every iteration and at the
back edge; the SVG map draws loop bodies and arms as labelled bands and one rectangle per
live range. Requests without the new fields keep their output (the golden files)."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

import planner
from planner.emit import emit_cuda, emit_mlir
from planner.emit.svg import emit_svg
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from tests.support.control_flow import OFFSETS, PROGRAM, planned_by_hand, request
from tests.support.paths import TESTS

GOLDEN = TESTS / "golden"


def _region(lines: list[str], opening: str, closing: str) -> list[str]:
    """The lines strictly between the first line holding ``opening`` and the next holding
    ``closing``."""
    start = next(k for k, line in enumerate(lines) if opening in line)
    end = next(k for k in range(start + 1, len(lines)) if closing in lines[k])
    return lines[start + 1 : end]


@pytest.mark.parametrize(
    ("emit", "barrier", "loop"),
    [(emit_cuda, "__syncthreads();", "for (...) {"), (emit_mlir, "gpu.barrier", "scf.for ... {")],
)
def test_barriers_sit_inside_their_loop(emit: Any, barrier: str, loop: str) -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    lines = emit(req, plan).splitlines()
    body = _region(lines, f"{loop}  // loops.0: points [1, 5) repeat, 8 trips", "end of loops.0")
    assert [line.strip() for line in body] == [
        f"//     {barrier}  // point 1: existing: the plan relies on it; runs every iteration "
        "of loops.0; at the back edge".strip(),
        f"//     {barrier}  // point 3: existing: the plan relies on it; runs every iteration "
        "of loops.0".strip(),
    ]
    after = [line for line in lines if f"{barrier}  // point 5:" in line]
    assert len(after) == 1
    assert "every iteration" not in after[0]
    assert "Barriers: 4 in the code" not in "\n".join(lines)  # a hand-made plan has no counts


def test_arms_open_else_and_close_around_their_barriers() -> None:
    data = {
        "branches": [{"arms": [[1, 3], [3, 5], [5, 7]]}],
        "barriers": [2, 7],
        "buffers": [
            {"id": "a", "size": 64, "start": 1, "end": 2},
            {"id": "b", "size": 64, "start": 2, "end": 3},
            {"id": "c", "size": 64, "start": 3, "end": 5},
            {"id": "d", "size": 64, "start": 7, "end": 8},
        ],
    }
    req, plan = planned_by_hand(data, {"a": 0, "b": 0, "c": 64, "d": 0})
    text = emit_cuda(req, plan)
    outline = [line for line in text.splitlines() if line.startswith("//   ")]
    assert outline == [
        "//   if (...) {  // branches.0 arm 0: points [1, 3)",
        "//     __syncthreads();  // point 2: existing: the plan relies on it",
        "//   } else if (...) {  // branches.0 arm 1: points [3, 5)",
        "//   } else {  // branches.0 arm 2: points [5, 7)",
        "//   }  // end of branches.0",
        "//   __syncthreads();  // point 7: existing: the plan relies on it",
    ]


def test_nested_loops_nest_in_the_outline() -> None:
    data = {
        "loops": [{"start": 0, "end": 8, "trips": None}, {"start": 2, "end": 6, "trips": 4}],
        "barriers": [0, 2, 4],
        "buffers": [
            {"id": "a", "size": 128, "start": 0, "end": 2},
            {"id": "x", "size": 128, "start": 2, "end": 4},
            {"id": "y", "size": 128, "start": 4, "end": 6},
        ],
    }
    req, plan = planned_by_hand(data, {"a": 0, "x": 128, "y": 128})
    lines = emit_mlir(req, plan).splitlines()
    inner = _region(lines, "// loops.1:", "end of loops.1")
    assert len(inner) == 2
    assert all(
        "runs every iteration of loops.0; runs every iteration of loops.1" in x for x in inner
    )
    assert "at the back edge" in inner[0]  # point 2: no access of the inner body before it
    outer = _region(lines, "// loops.0:", "end of loops.0")
    assert "point 0:" in outer[0]
    assert outer[0].index("gpu.barrier") == outer[1].index("scf.for")  # both in loops.0 alone
    assert inner[0].index("gpu.barrier") == outer[0].index("gpu.barrier") + 2


def test_several_ranges_are_listed_in_the_pointer_comment() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    assert "128 bytes, live [0, 1), [11, 13)" in emit_cuda(req, plan)
    assert "128 bytes at offset 256, live [0, 1), [11, 13)" in emit_mlir(req, plan)


@pytest.mark.parametrize(("emit", "suffix"), [(emit_cuda, "cu"), (emit_mlir, "mlir")])
def test_matches_golden_file(emit: Any, suffix: str) -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    text = emit(req, plan)
    golden = GOLDEN / f"loops.{suffix}"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_svg_bands_for_loops_and_arms() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    svg = emit_svg(req, plan)
    loops = re.findall(
        r'<rect class="loop" data-loop="(\d+)" data-trips="([\w+-]+)" '
        r'data-start="(\d+)" data-end="(\d+)"',
        svg,
    )
    assert loops == [("0", "8", "1", "5")]
    arms = re.findall(
        r'<rect class="arm" data-branch="(\d+)" data-arm="(\d+)" '
        r'data-start="(\d+)" data-end="(\d+)"',
        svg,
    )
    assert arms == [("0", "0", "6", "8"), ("0", "1", "8", "10")]
    labels = re.findall(r'<text class="band-label"[^>]*>([^<]*)</text>', svg)
    assert labels == ["loop \u00d78", "branch 0, arm 0", "arm 1"]
    # Under the buffers: every band comes before the first buffer.
    assert svg.index('class="loop"') < svg.index('class="buffer"')
    kinds = re.findall(r'data-kind="([\w-]+)"', svg)
    assert "loop" in kinds
    assert "arm" in kinds


def test_svg_one_rectangle_per_live_range() -> None:
    req, plan = planned_by_hand(PROGRAM, OFFSETS)
    svg = emit_svg(req, plan)
    spans = re.findall(
        r'<rect class="buffer" data-id="w"[^>]*data-start="(\d+)" data-end="(\d+)"', svg
    )
    assert spans == [("0", "1"), ("11", "13")]
    assert len(re.findall(r'<rect class="buffer" data-id="z"', svg)) == 1


def test_svg_of_a_straight_request_draws_no_band() -> None:
    req, plan = planned_by_hand(
        {"buffers": PROGRAM["buffers"][:2], "barriers": [3]}, {"x": 0, "y": 0}
    )
    svg = emit_svg(req, plan)
    assert 'class="control"' not in svg
    assert 'data-kind="loop"' not in svg


def test_planned_loop_reports_its_barrier_counts() -> None:
    req = request({**PROGRAM, "options": {"sync": "insert"}})
    plan = planner.plan(req)
    assert validate_plan(req, plan).valid
    assert emulate(req, plan).valid
    assert plan.barriers.static is not None
    assert plan.barriers.executions is not None
    line = f"// Barriers: {plan.barriers.static} in the code, {plan.barriers.executions} "
    for text in (emit_cuda(req, plan), emit_mlir(req, plan)):
        (found,) = [x.strip() for x in text.splitlines() if x.strip().startswith(line)]
        assert found.endswith("executions per block.")  # no loop of unknown trips here
