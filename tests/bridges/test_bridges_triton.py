"""The Triton bridge: kernels in the manner of Triton's tutorials (tests/support/triton_kernels.py)
compiled here for sm_80 and sm_90 without a GPU; Triton's own plan is checked by both
validators, ours of the same request is valid and never larger, and faults planted in Triton's
plan are caught. A kernel the reader does not model is reported with the operation."""

from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import pytest

import planner
from planner.core.errors import MissingExtraError, RequestError

pytest.importorskip("triton")

from planner.bridges._plans import judge
from planner.bridges._program import Unsupported
from planner.bridges.triton import TritonReport, check_compiled, check_ttgir
from planner.bridges.ttgir import read_ttgir
from planner.validators.faults import plant_fault
from tests.support.triton_kernels import AUTOTUNE, CASES, compile_autotuned, compile_kernel


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, int], Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {(name, cap): compile_kernel(name, cap) for name, cap in CASES}


@pytest.fixture(scope="module")
def reports(compiled: dict[tuple[str, int], Any]) -> dict[tuple[str, int], TritonReport]:
    return {key: check_compiled(k, time_limit=2.0) for key, k in compiled.items()}


@pytest.mark.parametrize(("name", "cap"), CASES, ids=[f"{n}-sm{c}" for n, c in CASES])
def test_triton_plan_is_checked_and_ours_is_never_larger(
    reports: dict[tuple[str, int], TritonReport], name: str, cap: int
) -> None:
    report = reports[(name, cap)]
    assert report.modeled, report.reason
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid
    assert report.triton_verdict.emulation_run
    assert report.request is not None
    assert report.plan is not None
    assert planner.validate(
        report.request.model_copy(
            update={"options": report.request.options.model_copy(update={"sync": "insert"})}
        ),
        report.plan,
    ).valid
    assert report.ours_bytes is not None
    assert report.ours_bytes <= report.triton_bytes
    assert report.lower_bound is not None
    assert report.lower_bound <= report.ours_bytes
    assert report.alone_bytes is not None
    assert report.alone_bytes <= report.triton_bytes
    assert not [n for n in report.notes if "past ttg.shared" in n]
    if name == "layer_norm_bwd_dwdb":  # its reductions stay inside warps: no shared memory
        assert (report.buffers, report.triton_bytes, report.ours_bytes) == (0, 0, 0)
        return
    assert report.buffers >= 1
    assert report.triton_barriers >= 1
    if name in ("matmul_pipelined", "attention_bwd", "matmul_tma_persistent"):
        assert any("asynchronous operations" in n for n in report.notes)  # cp.async, wgmma, TMA
    if name in ("layer_norm_bwd", "matmul_tma_persistent"):  # atomics, TMA descriptors
        assert any("barriers Triton's lowering adds" in n for n in report.notes)


def test_the_persistent_tma_matmul(reports: dict[tuple[str, int], TritonReport]) -> None:
    """TMA loads into three stages under three mbarriers, wgmma reads, a TMA store of the
    epilogue tile, and the descriptors built in shared memory: every buffer is apart from every
    other it is live with, and the epilogue tile of the kernel's other branch shares the
    stages' bytes."""
    report = reports[("matmul_tma_persistent", 90)]
    assert report.modeled, report.reason
    assert report.request is not None
    assert report.triton_plan is not None
    sizes = sorted(b.size for b in report.request.buffers)
    assert sizes == [24, 128, 128, 128, 32768, 32768, 49152, 49152]  # mbarriers: 3 x 8 bytes
    assert report.triton_bytes == report.ours_bytes == report.lower_bound == 131096
    for kind in ("overlap", "misalign"):
        fault = plant_fault(report.request, report.triton_plan, kind, random.Random(1))
        assert fault is not None, kind
        assert not judge(fault.request, fault.plan, emulation=False).valid


@pytest.mark.slow
@pytest.mark.parametrize("cap", [80, 90])
@pytest.mark.parametrize("config", AUTOTUNE, ids=["x".join(map(str, c)) for c in AUTOTUNE])
def test_every_autotune_configuration_of_the_matmul(
    config: tuple[int, int, int, int, int], cap: int
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = check_compiled(compile_autotuned(config, cap), time_limit=2.0)
    assert report.modeled, report.reason
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid, report.triton_verdict.static
    assert report.request is not None
    assert report.plan is not None
    insert = report.request.options.model_copy(update={"sync": "insert"})
    assert planner.validate(
        report.request.model_copy(update={"options": insert}), report.plan
    ).valid
    assert report.ours_bytes is not None
    assert report.ours_bytes <= report.triton_bytes


@pytest.mark.parametrize("kind", ["overlap", "drop_barrier", "misalign"])
def test_planted_faults_in_a_triton_plan_are_caught(
    reports: dict[tuple[str, int], TritonReport], kind: str
) -> None:
    report = reports[("attention", 80)]
    assert report.request is not None
    assert report.triton_plan is not None
    fault = plant_fault(report.request, report.triton_plan, kind, random.Random(0))  # type: ignore[arg-type]
    assert fault is not None, kind
    verdict = judge(fault.request, fault.plan, emulation=kind != "misalign")
    assert not verdict.valid
    assert verdict.static
    if kind != "misalign":
        assert verdict.emulated  # the emulator sees the race or the clobber too


def test_ttgir_text_and_target(compiled: dict[tuple[str, int], Any]) -> None:
    ttgir = compiled[("softmax", 80)].asm["ttgir"]
    report = check_ttgir(ttgir, "sm_80", time_limit=1.0, emulation=False)
    assert report.modeled
    assert report.triton_bytes == 16
    assert report.triton_verdict is not None
    assert not report.triton_verdict.emulation_run
    with pytest.raises(RequestError) as info:
        check_ttgir(ttgir, "gfx942")
    assert info.value.errors[0]["loc"] == ["target"]
    with pytest.raises(RequestError) as info:
        check_ttgir("module { not ttgir", "sm_80")
    assert info.value.errors[0]["loc"] == ["ttgir"]


UNMODELLED = """
#shared = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 64 : i32} {
  tt.func public @k(%arg0: i32) {
    %0 = ttg.local_alloc {allocation.offset = 0 : i32} : () -> !ttg.memdesc<16xf32, #shared, #smem>
    ttng.some_future_op %0 : !ttg.memdesc<16xf32, #shared, #smem>
    tt.return
  }
}
"""


def test_a_kernel_it_cannot_model_is_reported_with_the_op() -> None:
    with pytest.raises(Unsupported, match=r"line 7: ttng.some_future_op uses shared buffer %0"):
        read_ttgir(UNMODELLED)


def test_what_it_reads_from_ttgir() -> None:
    read = read_ttgir(UNMODELLED.replace("ttng.some_future_op", "ttg.local_load"))
    assert read.name == "k"
    assert read.shared_bytes == 64
    assert read.offsets == {"%0": 0}
    assert read.shape.buffers["%0"].size == 64
    assert read.barrier_ops == 0


def test_missing_extra_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.bridges._plans as plans

    monkeypatch.setattr(plans, "available", lambda extra: False)
    with pytest.raises(MissingExtraError) as info:
        check_ttgir("module {}", "sm_80")
    assert info.value.extra == "triton"


def test_cli_triton(
    compiled: dict[tuple[str, int], Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from planner.cli import main

    path = tmp_path / "softmax.ttgir"
    path.write_text(compiled[("softmax", 80)].asm["ttgir"])
    assert main(["triton", str(path), "--target", "sm_80", "--time-limit", "1"]) == 0
    out = capsys.readouterr().out
    assert "@softmax_kernel (sm_80): 2 buffers; Triton 16 B, 1 barrier, valid; ours 16 B" in out
    assert main(["triton", str(path), "--target", "gfx942"]) == 2
    assert "target" in capsys.readouterr().err


def test_a_module_triton_refuses_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A module Triton's own passes refuse (no ``ttg.num-warps``) is a field error naming
    their first error line: no traceback, and none of the passes' dump on standard error."""
    from planner.cli import main

    path = tmp_path / "bare.ttgir"
    path.write_text("module {\n}\n")
    assert main(["triton", str(path), "--target", "sm_90"]) == 2
    err = capfd.readouterr().err
    assert "Triton's passes refused the module" in err
    assert "number of warps" in err
    assert "Traceback" not in err
    assert "mlir_reproducer" not in err
    with pytest.raises(RequestError) as caught:
        check_ttgir(path.read_text(), target="sm_90")
    assert caught.value.errors[0]["loc"] == ["ttgir"]
    assert caught.value.errors[0]["type"] == "bad_ttgir"


def test_a_dropped_async_wait_is_caught(compiled: dict[tuple[str, int], Any]) -> None:
    """Without the wait that retires the pipeline's cp.async copies, the epilogue's scratch
    takes bytes a copy may still write: both validators see the race."""
    ttgir = compiled[("matmul_pipelined", 80)].asm["ttgir"]
    lines = ttgir.splitlines()
    waits = [i for i, line in enumerate(lines) if "ttg.async_wait {num = 0" in line]
    assert len(waits) == 1
    planted = "\n".join(line for i, line in enumerate(lines) if i != waits[0])
    report = check_ttgir(planted, "sm_80", time_limit=1.0)
    assert report.modeled, report.reason
    assert report.triton_verdict is not None
    assert not report.triton_verdict.valid
    assert any(v.startswith("overlap") for v in report.triton_verdict.static)
    assert report.triton_verdict.emulated


def test_post_triton(compiled: dict[tuple[str, int], Any]) -> None:
    from fastapi.testclient import TestClient

    from tests.support.apps import threads_app

    ttgir = compiled[("layer_norm", 90)].asm["ttgir"]
    with TestClient(threads_app()) as client:
        response = client.post("/triton", json={"ttgir": ttgir, "target": "sm_90"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["modeled"]
        assert body["triton_verdict"]["valid"]
        assert body["ours_bytes"] <= body["triton_bytes"] == 32
        bad = client.post("/triton", json={"ttgir": ttgir, "target": "gfx942"})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "target"]
        spec = client.get("/openapi.json").json()
        for name in ("TritonAnswer", "TritonVerdict"):
            properties = spec["components"]["schemas"][name]["properties"]
            assert all("description" in p for p in properties.values()), name


def test_batch_runs_a_folder_of_triton_kernels(
    compiled: dict[tuple[str, int], Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from planner.cli import main

    for name, cap in [("softmax", 80), ("attention_bwd", 90), ("matmul_tma_persistent", 90)]:
        (tmp_path / f"{name}-sm{cap}.ttgir").write_text(compiled[(name, cap)].asm["ttgir"])
    assert main(["batch", str(tmp_path), "--emulate", "--quiet"]) == 0
    table = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:] if line.strip()}
    assert rows["softmax-sm80.ttgir"][1:6] == ["2", "feasible", "16", "pass", "pass"]
    assert rows["attention_bwd-sm90.ttgir"][2:3] == ["feasible"]
    assert rows["attention_bwd-sm90.ttgir"][4:6] == ["pass", "pass"]
    assert rows["matmul_tma_persistent-sm90.ttgir"][1:6] == [
        "8",
        "feasible",
        "131096",
        "pass",
        "pass",
    ]
    # The pipelined matmul without the wait that retires its copies: the batch fails on it.
    lines = compiled[("matmul_pipelined", 80)].asm["ttgir"].splitlines()
    kept = [line for line in lines if "ttg.async_wait {num = 0" not in line]
    assert len(kept) == len(lines) - 1
    (tmp_path / "planted.ttgir").write_text("\n".join(kept))
    assert main(["batch", str(tmp_path), "--quiet"]) == 1
    rows = {
        line.split()[0]: line.split()
        for line in capsys.readouterr().out.splitlines()[1:]
        if line.strip()
    }
    assert rows["planted.ttgir"][4] == "FAIL"


SIBLINGS = """
#sh = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 64 : i32} {
  tt.func public @k(%arg0: i1, %arg1: i32) {
    scf.if %arg0 {
      %0 = ttg.local_alloc {allocation.offset = 0 : i32} : () -> !ttg.memdesc<16xf32, #sh, #smem>
      %1 = ttg.local_load %0 : !ttg.memdesc<16xf32, #sh, #smem> -> tensor<16xf32, #blocked>
    } else {
      %0 = arith.addi %arg1, %arg1 : i32
      %1 = arith.muli %0, %0 : i32
    }
    tt.return
  }
}
"""


def test_names_reused_in_sibling_regions_are_told_apart() -> None:
    """The printer names values per region: the else region's %0 is not the buffer."""
    read = read_ttgir(SIBLINGS)
    assert read.offsets == {"%0": 0}
    assert read.shape.buffers["%0"].accesses  # the load in the then region
    assert len(read.shape.branches) == 1


def _top_level_copies(ttgir: str) -> tuple[int, list[int]]:
    """From the TTGIR text alone: the cp.async copies in the kernel's own body (outside every
    loop and branch), and the ``num`` of each ``ttg.async_wait`` there that retires at least
    one of their commit groups (Triton's counting: a wait leaves its ``num`` most recent
    groups in flight)."""
    body = ttgir.split("tt.func", 1)[1].splitlines()[1:]
    depth, copies, groups, retiring = 0, 0, [], []
    pending = 0  # copies not yet committed
    for line in body:
        text = line.strip()
        if depth == 0:
            if "ttg.async_copy_global_to_local" in text:
                copies += 1
                pending += 1
            elif "ttg.async_commit_group" in text:
                groups.append(pending)
                pending = 0
            elif "ttg.async_wait" in text:
                num = int(text.split("num = ")[1].split(" ")[0])
                kept = groups[len(groups) - num :] if num else []
                if sum(groups) > sum(kept):
                    retiring.append(num)
                groups = kept
        if text.startswith("}"):
            depth -= 1
        if text.endswith("{") and not text.startswith("}"):
            depth += 1
        if depth < 0:
            break
    return copies, retiring


@pytest.mark.parametrize(("name", "cap"), [("matmul_pipelined", 80), ("matmul_pipelined", 90)])
def test_cp_async_copies_carry_their_agent_and_covering_wait(
    compiled: dict[tuple[str, int], Any],
    reports: dict[tuple[str, int], TritonReport],
    name: str,
    cap: int,
) -> None:
    """The prologue's copies are cp.async writes, each completed by the ``wait_group`` Triton
    puts after it in the same region (its ``num`` as ``pending``); Triton's plan holds under
    those completion rules and ours is no larger. The loop's copies, which a wait of the next
    iteration retires, stay approximated, and the notes say so."""
    from planner.bridges.triton import allocated_ttgir

    ttgir = allocated_ttgir(compiled[(name, cap)].asm["ttgir"], cap, membar=True)
    copies, retiring = _top_level_copies(ttgir)
    assert copies >= 2
    report = reports[(name, cap)]
    assert report.request is not None
    agents = [a for b in report.request.buffers for a in b.accesses if a.agent == "cp.async"]
    assert len(agents) == copies
    assert all(a.op == "write" and a.threads == "all" for a in agents)
    waits = [s for s in report.request.syncs if s.kind == "wait_group"]
    assert all(s.group == "cp.async" for s in waits)
    assert sorted(s.pending for s in waits) == sorted(retiring)
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid
    assert report.ours_bytes is not None
    assert report.ours_bytes <= report.triton_bytes
    assert any(f"{copies} cp.async" in n and "covers them" in n for n in report.notes)
    assert any("drains them" in n and "cp.async" in n for n in report.notes)


def test_wgmma_and_tma_waits_of_a_later_iteration_stay_approximated(
    compiled: dict[tuple[str, int], Any], reports: dict[tuple[str, int], TritonReport]
) -> None:
    """In the sm_90 kernels every asynchronous wgmma and TMA store is retired by a wait of a
    later iteration (``warp_group_dot_wait {pendings = 1}`` after the one wgmma of the body;
    the store wait at the top of the next tile), and TMA loads complete on a stage of an
    mbarrier array: none of that is a completion the request can state, so none carries its
    agent and the notes count them."""
    from planner.bridges.triton import allocated_ttgir

    for key in (("matmul_pipelined", 90), ("matmul_tma_persistent", 90)):
        ttgir = allocated_ttgir(compiled[key].asm["ttgir"], 90, membar=True)
        assert "pendings = 1" in ttgir
        report = reports[key]
        assert report.request is not None
        assert not [
            a for b in report.request.buffers for a in b.accesses if a.agent in ("mma", "tma")
        ]
        assert any("drains them" in n and "mma" in n for n in report.notes)
        assert report.triton_verdict is not None
        assert report.triton_verdict.valid
    notes = reports[("matmul_tma_persistent", 90)].notes
    assert any("tma" in n for n in notes)
    # Its mbarrier array is indexed by the stage the loop computes: one buffer, and the notes
    # say why.
    assert any(n.startswith("mbarrier array") and "not a constant" in n for n in notes)


def test_wgmma_retired_in_its_own_iteration_is_an_mma_read(
    compiled: dict[tuple[str, int], Any], reports: dict[tuple[str, int], TritonReport]
) -> None:
    """The sm_90 attention's wgmmas are each followed in the loop body by a
    ``warp_group_dot_wait {pendings = 0}``: their shared operands are mma reads completed by a
    ``wait_group`` of group "wgmma" there, with the proxy fences Triton puts before them, and
    Triton's plan holds under those rules."""
    from planner.bridges.triton import allocated_ttgir

    lines = allocated_ttgir(compiled[("attention", 90)].asm["ttgir"], 90, membar=True)
    lines_ = [line.strip() for line in lines.splitlines()]
    dots = [
        k
        for k, line in enumerate(lines_)
        if "ttng.warp_group_dot " in line and "isAsync = true" in line
    ]
    assert dots
    assert all(
        "warp_group_dot_wait" in lines_[k + 1] and "pendings = 0" in lines_[k + 1] for k in dots
    )
    operands = sum(lines_[k].split(":", 1)[1].count("!ttg.memdesc") for k in dots)
    report = reports[("attention", 90)]
    assert report.request is not None
    mma = [a for b in report.request.buffers for a in b.accesses if a.agent == "mma"]
    assert len(mma) == operands
    assert all(a.op == "read" for a in mma)
    waits = [s for s in report.request.syncs if s.kind == "wait_group"]
    assert [(s.group, s.pending) for s in waits] == [("wgmma", 0)] * len(dots)
    fences = sum("ttng.fence_async_shared" in line for line in lines_)
    assert len([s for s in report.request.syncs if s.kind == "fence_proxy_async"]) == fences
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid, report.triton_verdict
    assert report.ours_bytes is not None
    assert report.ours_bytes <= report.triton_bytes


# Types spelled once: MEM a shared buffer, TEN a register tensor, PTR global pointers.
_COPY = (
    """
#b = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#sh = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 512 : i32} {
  tt.func public @k(%arg0: PTR, %arg1: TEN) {
    %0 = ttg.local_alloc {allocation.offset = 0 : i32} : () -> !MEM
    %1 = ttg.async_copy_global_to_local %arg0, %0 : PTR -> MEM
    %2 = ttg.async_commit_group tokens %1
    %3 = ttg.async_wait %2 {num = 0 : i32}
    ttg.barrier local
    %4 = ttg.local_alloc %arg1 {allocation.offset = 0 : i32} : (TEN) -> !MEM
    %5 = ttg.local_load %4 : !MEM -> TEN
    tt.return
  }
}
""".replace("MEM", "ttg.memdesc<128xf32, #sh, #smem, mutable>")
    .replace("TEN", "tensor<128xf32, #b>")
    .replace("PTR", "tensor<128x!tt.ptr<f32>, #b>")
)


def _judge_ttgir(text: str) -> Any:
    from planner.bridges._plans import foreign_plan
    from planner.core.models import PlanRequest

    read = read_ttgir(text)
    request = PlanRequest.model_validate(
        {
            **read.shape.request(target=None, time_limit=1.0),
            "options": {"sync": "existing", "time_limit": 1.0},
        }
    )
    return request, judge(request, foreign_plan(request, read.offsets, "triton"))


def test_a_cp_async_wait_after_the_reuse_is_caught() -> None:
    """A prefetch into a buffer whose bytes the next buffer takes: with the wait before the
    barrier the plan holds; with the wait moved past the reuse, the copy may still write the
    bytes the next buffer holds, and both validators say so."""
    request, verdict = _judge_ttgir(_COPY)
    assert [(a.agent, a.op) for a in request.buffers[0].accesses] == [("cp.async", "write")]
    assert [(s.kind, s.group, s.pending) for s in request.syncs] == [("wait_group", "cp.async", 0)]
    assert verdict.valid, verdict
    lines = _COPY.splitlines()
    wait = next(i for i, line in enumerate(lines) if "ttg.async_wait" in line)
    load = next(i for i, line in enumerate(lines) if "ttg.local_load" in line)
    moved = lines[:wait] + lines[wait + 1 : load + 1] + [lines[wait]] + lines[load + 1 :]
    request, verdict = _judge_ttgir("\n".join(moved))
    assert request.syncs
    assert request.syncs[0].at > request.buffers[1].start
    assert not verdict.valid
    assert verdict.static
    assert verdict.emulated


_STORE = (
    """
#b = #ttg.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [4, 1], \
order = [1, 0]}>
#sh = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#smem = #ttg.shared_memory
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 16384 : i32} {
  tt.func public @k(%arg0: DESC, %arg1: TEN, %arg2: i32) {
    %0 = ttg.local_alloc %arg1 {allocation.offset = 0 : i32} : (TEN) -> !MEM
    ttng.fence_async_shared {bCluster = false}
    ttg.barrier local
    ttng.async_tma_copy_local_to_global %arg0[%arg2, %arg2] %0 : DESC, !MEM
    ttng.async_tma_store_wait {pendings = 0 : i32, read_only}
    ttg.barrier local
    %1 = ttg.local_alloc %arg1 {allocation.offset = 0 : i32} : (TEN) -> !MEM
    %2 = ttg.local_load %1 : !MEM -> TEN
    tt.return
  }
}
""".replace("MEM", "ttg.memdesc<64x64xf16, #sh, #smem, mutable>")
    .replace("TEN", "tensor<64x64xf16, #b>")
    .replace("DESC", "!tt.tensordesc<tensor<64x64xf16, #sh>>")
)


def test_a_tma_store_reads_its_source_until_its_read_wait() -> None:
    """A TMA store's source is a tma read completed by ``cp.async.bulk.wait_group.read``, with
    the proxy fence Triton puts between the threads' write and the store; the wait moved past
    the reuse is caught by both validators."""
    request, verdict = _judge_ttgir(_STORE)
    assert [(a.agent, a.op) for a in request.buffers[0].accesses if a.agent != "threads"] == [
        ("tma", "read")
    ]
    kinds = [(s.kind, s.group, s.read) for s in request.syncs]
    assert ("wait_group", "bulk", True) in kinds
    assert ("fence_proxy_async", None, False) in kinds
    assert verdict.valid, verdict
    lines = _STORE.splitlines()
    wait = next(i for i, line in enumerate(lines) if "async_tma_store_wait" in line)
    load = next(i for i, line in enumerate(lines) if "ttg.local_load" in line)
    moved = lines[:wait] + lines[wait + 1 : load + 1] + [lines[wait]] + lines[load + 1 :]
    _, verdict = _judge_ttgir("\n".join(moved))
    assert not verdict.valid
    assert verdict.static
    assert verdict.emulated
