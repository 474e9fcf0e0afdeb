"""The Triton bridge's capture (planner/bridges/triton_capture.py, ttgir_cfg.py): the plan
Triton makes inside its own compile, put back on the structured form, gives the same report as
the passes run again on the compiled kernel's TTGIR, on every kernel of the tests; the compile
itself is unchanged; what cannot be put back falls back to the passes, and says so."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import planner

pytest.importorskip("triton")

from planner.bridges.triton import (
    TritonReport,
    capturing,
    check_captured,
    check_compiled,
    compile_and_check,
)
from planner.bridges.ttgir_cfg import Unaligned, restructure
from tests.support.triton_kernels import CASES, compile_kernel, source_of


@pytest.fixture(scope="module")
def cold_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Triton's cache in an empty folder: every compile compiles."""
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("triton-cache")
        patch.setenv("TRITON_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def both_routes(cold_cache: Path) -> dict[tuple[str, int], tuple[Any, TritonReport, TritonReport]]:
    """Each kernel compiled with the capture: the kernel, the captured route's report, and the
    report of the passes run again on its TTGIR."""
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, cap in CASES:
            source, options = source_of(name)
            kernel, captured = compile_and_check(source, f"sm_{cap}", options, time_limit=2.0)
            out[(name, cap)] = (kernel, captured, check_compiled(kernel, time_limit=2.0))
    return out


@pytest.mark.parametrize(("name", "cap"), CASES, ids=[f"{n}-sm{c}" for n, c in CASES])
def test_the_captured_plan_gives_the_report_of_the_passes_run_again(
    both_routes: dict[tuple[str, int], tuple[Any, TritonReport, TritonReport]], name: str, cap: int
) -> None:
    kernel, captured, again = both_routes[(name, cap)]
    assert captured.modeled, captured.reason
    assert not [n for n in captured.notes if "run again" in n or "run here" in n]
    assert captured.as_dict() == again.as_dict()  # bytes, barriers, verdicts, notes
    assert captured.triton_bytes == kernel.metadata.shared
    assert captured.request == again.request
    assert captured.triton_plan is not None
    assert again.triton_plan is not None
    assert captured.triton_plan.placements == again.triton_plan.placements
    assert captured.triton_verdict is not None
    assert captured.triton_verdict.valid
    assert captured.triton_verdict.emulation_run
    assert captured.request is not None
    assert planner.validate(captured.request, captured.triton_plan).valid
    assert captured.plan is not None
    assert again.plan is not None
    assert captured.plan.placements == again.plan.placements
    assert captured.seconds > 0


@pytest.mark.parametrize(("name", "cap"), [("matmul_pipelined", 80), ("matmul_tma_persistent", 90)])
def test_the_capture_leaves_the_compile_as_triton_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, cap: int
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with capturing() as captured:
            kernel = compile_kernel(name, cap)
        plain = compile_kernel(name, cap)
    assert len(captured) == 1
    assert kernel.hash != plain.hash  # two compiles, not one cache entry
    assert kernel.asm["llir"] == plain.asm["llir"]
    assert kernel.asm["ptx"] == plain.asm["ptx"]
    assert kernel.metadata.shared == plain.metadata.shared


def test_a_kernel_from_the_cache_has_its_passes_run_again(cold_cache: Path) -> None:
    source, options = source_of("softmax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile_and_check(source, "sm_80", options, emulation=False)
        kernel, report = compile_and_check(source, "sm_80", options, emulation=False)
    assert any("Triton's cache held" in n for n in report.notes)
    assert report.as_dict()["triton_bytes"] == kernel.metadata.shared
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid


def test_what_cannot_be_put_back_runs_the_passes_again(
    both_routes: dict[tuple[str, int], tuple[Any, TritonReport, TritonReport]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    source, options = source_of("matmul_pipelined")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with capturing() as captured:
            compile_and_check(source, "sm_90", options, emulation=False)
    (one,) = captured
    # A barrier in the loop's condition block has no place in the structured form.
    lines = one.synchronized.splitlines()
    at = next(i for i, line in enumerate(lines) if "cf.cond_br" in line)
    lines.insert(at, "    ttg.barrier local")
    report = check_captured(dataclasses.replace(one, synchronized="\n".join(lines)))
    assert any("run again on the structured form" in n for n in report.notes)
    again = both_routes[("matmul_pipelined", 90)][2]
    assert report.triton_bytes == again.triton_bytes
    assert report.triton_barriers == again.triton_barriers
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid


_STRUCTURED = """\
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%arg0: i32) {
    %0 = ttg.local_alloc : () -> !ttg.memdesc<4xf32, #s, #smem>
    scf.for %arg1 = %c0 to %arg0 step %c1 : i32 {
      %1 = ttg.local_load %0 : !ttg.memdesc<4xf32, #s, #smem> -> tensor<4xf32>
      ttg.local_store %1, %0 : tensor<4xf32> -> !ttg.memdesc<4xf32, #s, #smem>
    }
    tt.return
  }
}
"""

_LOWERED = """\
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 16 : i32} {
  tt.func public @k(%arg0: i32) {
    %0 = ttg.local_alloc {allocation.offset = 0 : i32} : () -> !ttg.memdesc<4xf32, #s, #smem>
    BEFORE_LOOP
    cf.br ^bb1(%c0 : i32)
  ^bb1(%1: i32):  // 2 preds: ^bb0, ^bb2
    IN_CONDITION
    %2 = arith.cmpi slt, %1, %arg0 : i32
    cf.cond_br %2, ^bb2, ^bb3
  ^bb2:  // pred: ^bb1
    %3 = ttg.local_load %0 : !ttg.memdesc<4xf32, #s, #smem> -> tensor<4xf32>
    IN_BODY
    ttg.local_store %3, %0 : tensor<4xf32> -> !ttg.memdesc<4xf32, #s, #smem>
    AT_END
    %4 = arith.addi %1, %c1 : i32
    cf.br ^bb1(%4 : i32)
  ^bb3:  // pred: ^bb1
    tt.return
  }
}
"""


def _lowered(**at: str) -> str:
    text = _LOWERED
    for mark in ("BEFORE_LOOP", "IN_CONDITION", "IN_BODY", "AT_END"):
        text = text.replace(f"    {mark}\n", at.get(mark, "") and f"    {at[mark]}\n")
    return text


def test_allocation_and_barriers_go_back_where_they_run() -> None:
    (text,) = restructure(
        _STRUCTURED,
        _lowered(
            BEFORE_LOOP="ttg.barrier local", IN_BODY="ttg.barrier local", AT_END="gpu.barrier"
        ),
    )
    lines = [line.strip() for line in text.splitlines()]
    assert 'module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 16 : i32} {' in lines
    alloc = next(i for i, line in enumerate(lines) if "ttg.local_alloc" in line)
    assert "{allocation.offset = 0 : i32} : ()" in lines[alloc]
    assert lines[alloc + 1] == "ttg.barrier local"  # before the scf.for
    assert lines[alloc + 2].startswith("scf.for")
    assert lines[alloc + 3].startswith("%1 = ttg.local_load")
    assert lines[alloc + 4] == "ttg.barrier local"
    assert lines[alloc + 5].startswith("ttg.local_store")
    assert lines[alloc + 6] == "gpu.barrier"  # at the end of the body
    assert lines[alloc + 7] == "}"
    assert restructure(_STRUCTURED, _lowered())[0].count("barrier") == 0


@pytest.mark.parametrize(
    "lowered",
    [
        _lowered(IN_CONDITION="ttg.barrier local"),  # runs once more than the body
        _lowered(IN_BODY="ttg.local_dealloc %0 : !ttg.memdesc<4xf32>"),  # not a barrier
        _LOWERED.split("  ^bb3")[0],  # ends early
    ],
    ids=["condition-block", "unknown-insert", "truncated"],
)
def test_what_has_no_place_in_the_structured_form_is_unaligned(lowered: str) -> None:
    for mark in ("BEFORE_LOOP", "IN_CONDITION", "IN_BODY", "AT_END"):
        lowered = lowered.replace(f"    {mark}\n", "")
    with pytest.raises(Unaligned):
        restructure(_STRUCTURED, lowered)
