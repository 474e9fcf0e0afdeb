"""The Triton bridge's mbarriers: an mbarrier array indexed by constants is one 8-byte
mbarrier per element, and a TMA load completes at the ``ttng.wait_barrier`` on the element it
arrives on, where the TTGIR states it (docs/bridges.md, Triton). A 3-stage ring written by hand
(offsets as Triton's allocation gives them) is judged valid by both validators; a wait moved
after the reuse of its stage, or a load arriving on another stage's mbarrier, is caught by both.
Where the element is not known statically, the TMA load stays approximated and the notes say
why."""

from __future__ import annotations

import pytest

from planner.bridges._plans import Verdict, foreign_plan, judge
from planner.bridges.ttgir import TtgirRead, read_ttgir
from planner.core.models import PlanRequest

# Three stages of 64x64 f16 (8192 bytes each) filled by TMA, each arriving on its own element
# of a 3x1xi64 mbarrier array; stage 1 is read first, then stage 0, and %9 takes stage 0's
# bytes behind a barrier, before stage 2's wait.
_TYPES = {
    "BLOCKED": "#ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], "
    "warpsPerCTA = [4, 1], order = [1, 0]}>",
    "LOAD": "ttng.async_tma_copy_global_to_local %arg0[%c0_i32, %c0_i32]",
    "MEM": "!ttg.memdesc<64x64xf16, #shared, #smem, mutable>",
    "TILE": "!ttg.memdesc<64x64xf16, #shared, #smem>",
    "ARR": "!ttg.memdesc<3x1xi64, #shared1, #smem, mutable>",
    "BAR": "!ttg.memdesc<1xi64, #shared1, #smem, mutable>",
    "TEN": "tensor<64x64xf16, #blocked>",
    "DESC": "!tt.tensordesc<64x64xf16, #shared>",
}
_RING = """
#blocked = BLOCKED
#shared = #ttg.nvmma_shared<{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}>
#shared1 = #ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}>
#smem = #ttg.shared_memory
module attributes {"ttg.num-warps" = 4 : i32, ttg.shared = 24600 : i32, ttg.target = "cuda:90"} {
  tt.func public @ring(%arg0: DESC) {
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %c2_i32 = arith.constant 2 : i32
    %true = arith.constant true
    %0 = ttg.local_alloc {allocation.offset = 0 : i32} : () -> MEM
    %1 = ttg.local_alloc {allocation.offset = 8192 : i32} : () -> MEM
    %2 = ttg.local_alloc {allocation.offset = 16384 : i32} : () -> MEM
    %3 = ttg.local_alloc {allocation.offset = 24576 : i32} : () -> ARR
    %4 = ttg.memdesc_index %3[%c0_i32] : ARR -> BAR
    ttng.init_barrier %4, 1 : BAR
    %5 = ttg.memdesc_index %3[%c1_i32] : ARR -> BAR
    ttng.init_barrier %5, 1 : BAR
    %6 = ttg.memdesc_index %3[%c2_i32] : ARR -> BAR
    ttng.init_barrier %6, 1 : BAR
    ttng.barrier_expect %4, 8192, %true : BAR
    ttng.barrier_expect %5, 8192, %true : BAR
    ttng.barrier_expect %6, 8192, %true : BAR
    ttng.fence_async_shared {bCluster = false}
    ttg.barrier local
    LOAD %0, %4, %true : DESC, BAR -> MEM
    LOAD %1, %5, %true : DESC, BAR -> MEM
    LOAD %2, %6, %true : DESC, BAR -> MEM
    ttng.wait_barrier %5, %c0_i32 : BAR
    %7 = ttg.local_load %1 : MEM -> TEN
    ttng.wait_barrier %4, %c0_i32 : BAR
    %8 = ttg.local_load %0 : MEM -> TEN
    ttg.barrier local
    %9 = ttg.local_alloc %7 {allocation.offset = 0 : i32} : (TEN) -> TILE
    ttng.wait_barrier %6, %c0_i32 : BAR
    %10 = ttg.local_load %2 : MEM -> TEN
    %11 = ttg.local_load %9 : TILE -> TEN
    ttng.inval_barrier %4 : BAR
    ttng.inval_barrier %5 : BAR
    ttng.inval_barrier %6 : BAR
    ttg.local_dealloc %3 : ARR
    tt.return
  }
}
"""
RING = _RING
for _name, _spelled in _TYPES.items():  # types spelled once, by name in the text above
    RING = RING.replace(_name, _spelled)


def _judged(ttgir: str) -> tuple[TtgirRead, PlanRequest, Verdict]:
    read = read_ttgir(ttgir)
    body = read.shape.request(target="sm_90", time_limit=1.0)
    body["options"] = {"sync": "existing", "time_limit": 1.0}
    request = PlanRequest.model_validate(body)
    return read, request, judge(request, foreign_plan(request, read.offsets, "triton"))


def _moved_after_reuse(ttgir: str, wait: str, reuse: str) -> str:
    lines = ttgir.splitlines()
    w = next(i for i, line in enumerate(lines) if wait in line)
    r = next(i for i, line in enumerate(lines) if reuse in line)
    assert w < r
    return "\n".join([*lines[:w], *lines[w + 1 : r + 1], lines[w], *lines[r + 1 :]])


def test_a_three_stage_ring_is_modelled_exactly() -> None:
    read, request, verdict = _judged(RING)
    assert read.exact_async == {"tma": 3}
    assert not read.approximated
    assert not read.unsplit
    mbarriers = {b.id: b for b in request.buffers if b.kind == "mbarrier"}
    assert sorted(mbarriers) == ["%3[0]", "%3[1]", "%3[2]"]
    assert all(b.size == 8 for b in mbarriers.values())
    assert [read.offsets[m] for m in sorted(mbarriers)] == [24576, 24584, 24592]
    loads = {b.id: a.mbarrier for b in request.buffers for a in b.accesses if a.agent == "tma"}
    assert loads == {"%0": "%3[0]", "%1": "%3[1]", "%2": "%3[2]"}
    kinds = [(s.kind, s.mbarrier) for s in request.syncs if s.mbarrier is not None]
    assert kinds.count(("expect_tx", "%3[0]")) == 1
    assert kinds.count(("mbarrier_wait", "%3[2]")) == 1
    assert kinds.count(("mbarrier_inval", "%3[1]")) == 1
    stage0 = next(b for b in request.buffers if b.id == "%0")
    wait0 = next(s.at for s in request.syncs if s.kind == "mbarrier_wait" and s.mbarrier == "%3[0]")
    assert stage0.start < wait0 < stage0.end  # live until the wait that completes its load
    assert verdict.valid, verdict
    assert verdict.emulation_run


@pytest.mark.parametrize(
    "fault",
    ["wait moved after the reuse", "the wrong stage's mbarrier"],
)
def test_a_planted_fault_in_the_ring_is_caught_by_both_validators(fault: str) -> None:
    if fault == "wait moved after the reuse":
        planted = _moved_after_reuse(RING, "wait_barrier %4,", "%9 = ttg.local_alloc")
    else:  # stage 0's load arrives on stage 2's mbarrier, which is waited for after the reuse
        planted = RING.replace("%0, %4, %true", "%0, %6, %true")
        assert planted != RING
    read, _, verdict = _judged(planted)
    assert read.exact_async == {"tma": 3}
    assert not verdict.valid
    assert any(v.startswith("overlap") and "'%0'" in v and "'%9'" in v for v in verdict.static)
    assert any("'%0'" in v and "'%9'" in v for v in verdict.emulated)


@pytest.mark.parametrize(
    ("change", "was"),
    [
        # a wait on phase 1 returns at once on a fresh mbarrier: not the load's completion
        ("wait_barrier %4, %c1_i32", "wait_barrier %4, %c0_i32"),
        # a load that may be predicated off
        ("%0, %4, %arg1", "%0, %4, %true"),
        # the expect on the load's mbarrier comes after it
        ("ttng.barrier_expect %4, 8192, %arg1", "ttng.barrier_expect %4, 8192, %true"),
    ],
    ids=["phase", "predicate", "expect"],
)
def test_a_load_whose_completion_is_not_stated_stays_approximated(change: str, was: str) -> None:
    text = RING.replace(
        "%arg0: !tt.tensordesc<64x64xf16, #shared>)",
        "%arg0: !tt.tensordesc<64x64xf16, #shared>, %arg1: i1)",
    )
    assert was in text
    read, request, _ = _judged(text.replace(was, change))
    assert read.exact_async == {"tma": 2}
    assert read.approximated == {"tma": 1}
    tma = sorted(b.id for b in request.buffers for a in b.accesses if a.agent == "tma")
    assert tma == ["%1", "%2"]  # stage 0's load is a threads' write until the end


def test_an_array_indexed_by_a_computed_stage_stays_one_buffer() -> None:
    text = RING.replace(
        "%4 = ttg.memdesc_index %3[%c0_i32]", "%4 = ttg.memdesc_index %3[%arg1]"
    ).replace(
        "%arg0: !tt.tensordesc<64x64xf16, #shared>)",
        "%arg0: !tt.tensordesc<64x64xf16, #shared>, %arg1: i32)",
    )
    read, request, _ = _judged(text)
    assert len(read.unsplit) == 1
    assert read.unsplit[0].startswith("mbarrier array %3:")
    assert "not a constant" in read.unsplit[0]
    assert not [b for b in request.buffers if b.kind == "mbarrier"]
    assert read.approximated == {"tma": 3}
    assert not [a for b in request.buffers for a in b.accesses if a.agent == "tma"]


def test_triton_plans_the_ring_and_its_plan_holds() -> None:
    """Through Triton's own allocation and barrier passes: the loads stay exact, Triton's
    plan (its offsets, its barriers) is valid under both validators, and ours is no larger."""
    pytest.importorskip("triton")
    from planner.bridges.triton import check_ttgir

    report = check_ttgir(RING, "sm_90", time_limit=1.0)
    assert report.modeled, report.reason
    assert any("covers them: 3 tma" in n for n in report.notes)
    assert report.triton_verdict is not None
    assert report.triton_verdict.valid, report.triton_verdict
    assert report.ours_bytes is not None
    assert report.ours_bytes <= report.triton_bytes
