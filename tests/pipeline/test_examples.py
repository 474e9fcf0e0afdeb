"""The example requests plan as their README says, checked from first principles."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.core.rings import expand
from planner.core.targets import TARGETS
from tests.support.loops_brute import check
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _load(name: str) -> tuple[PlanRequest, Plan]:
    request = parse_request((EXAMPLES / name).read_text())
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid, name
    return request, plan


def _bytes(plan: Plan, buffer_id: str) -> range:
    p = next(p for p in plan.placements if p.id == buffer_id)
    return range(p.offset, p.offset + p.size)


def _share(a: range, b: range) -> bool:
    return a.start < b.stop and b.start < a.stop


def _peak_live_bytes(request: PlanRequest, plan: Plan | None = None) -> int:
    """Largest sum of sizes live at one point ([start, end), no barrier extension); with a
    plan, of the sizes it places (per-block footprints under ``options.shrink``)."""
    size = {b.id: b.size for b in request.buffers}
    if plan is not None:
        size = {p.id: p.size for p in plan.placements}
    points = {b.start for b in request.buffers}
    return max(sum(size[b.id] for b in request.buffers if b.start <= p < b.end) for p in points)


def _naive(request: PlanRequest) -> int:
    return sum(b.size for b in request.buffers)


@pytest.mark.parametrize("path", request_files(EXAMPLES), ids=lambda p: p.name)
def test_every_example_plans_and_checks(path: Path) -> None:
    request, plan = _load(path.name)
    if plan.rings:
        # Rings: checked at the depths the plan states, as the validator checks them.
        request = expand(request, {r.id: r.copies for r in plan.rings})
    assert plan.naive_bytes == _naive(request)
    if request.partitions:
        # Warp-specialised: the emulator runs the partitions (tests/pipeline/test_partitions.py
        # holds the brute force over interleavings).
        from planner.validators.emulator import emulate

        assert emulate(request, plan).valid
        assert plan.lower_bound <= plan.arena_bytes
        return
    if request.has_control_flow:
        # Loops, branches or ranges: checked on every unrolled execution instead.
        problems, peak = check(request, plan)
        assert not problems, problems[:3]
        assert plan.lower_bound == peak <= plan.arena_bytes
        return
    assert plan.lower_bound >= _peak_live_bytes(request, plan)
    if plan.status == "infeasible":
        return
    assert plan.arena_bytes >= plan.lower_bound
    # Independently of the validator: buffers live at the same time never share a byte.
    placed = {p.id: p for p in plan.placements}
    for a, b in itertools.combinations(request.buffers, 2):
        if a.start < b.end and b.start < a.end:
            assert not _share(_bytes(plan, a.id), _bytes(plan, b.id)), (a.id, b.id)
        for buf in (a, b):
            assert placed[buf.id].offset % request.alignment_of(buf) == 0


def test_tvm_tiled_gemm_csub_takes_the_place_of_asub_and_bsub() -> None:
    request, plan = _load("tvm_tiled_gemm.json")
    sizes = {b.id: b.size for b in request.buffers}
    assert sizes == {"Asub": 2048, "Bsub": 2048, "Csub": 4096}  # Csub: 1024 floats
    # Asub and Bsub die at the barrier at 4, where Csub starts: 1024 floats saved.
    assert plan.naive_bytes == 8192
    assert plan.arena_bytes == plan.naive_bytes - 4096
    assert plan.arena_bytes == plan.lower_bound
    assert plan.status == "optimal"
    csub = _bytes(plan, "Csub")
    assert _share(csub, _bytes(plan, "Asub"))
    assert _share(csub, _bytes(plan, "Bsub"))
    assert 4 in plan.barriers.required


def test_pipelined_gemm_epilogue_reuses_the_operand_tiles() -> None:
    request, plan = _load("pipelined_gemm.json")
    capacity = TARGETS["sm_90"].max_smem_per_block
    operands = [b.id for b in request.buffers if b.id != "C_s"]
    stages = sum(b.size for b in request.buffers if b.id != "C_s")  # live together
    epilogue = next(b.size for b in request.buffers if b.id == "C_s")
    assert epilogue == 128 * 256 * 4
    # Without reuse the kernel would not fit an H100; with it, it does.
    assert plan.naive_bytes == stages + epilogue > capacity
    assert plan.arena_bytes == max(stages, epilogue) == plan.lower_bound
    assert plan.status == "optimal"
    c_s = _bytes(plan, "C_s")
    assert any(_share(c_s, _bytes(plan, op)) for op in operands)
    assert 6 in plan.barriers.required  # the barrier the reuse relies on
    assert plan.launch.requires_opt_in


def test_attention_tiles_fit_sm90() -> None:
    request, plan = _load("fits_sm90_not_sm75.json")
    profile = TARGETS["sm_90"]
    assert request.target == "sm_90"
    assert plan.status in ("optimal", "feasible")
    assert plan.arena_bytes == _peak_live_bytes(request) == 98304
    assert plan.arena_bytes <= profile.max_smem_per_block
    assert plan.capacity == profile.max_smem_per_block
    assert plan.launch.requires_opt_in  # above the 48 KB static limit
    assert plan.launch.blocks_per_sm == profile.smem_per_sm // (98304 + profile.reserved_per_block)


def test_attention_tiles_do_not_fit_sm75() -> None:
    request, plan = _load("too_big_for_sm75.json")
    capacity = TARGETS["sm_75"].max_smem_per_block
    assert request.target == "sm_75"
    assert plan.status == "infeasible"
    cert = plan.certificate
    assert cert is not None
    assert cert.capacity == capacity == 65536
    assert cert.live_bytes == _peak_live_bytes(request) == 98304
    assert cert.live_bytes > cert.capacity
    assert sorted(cert.buffers) == ["K_s", "Q_s", "V_s"]
    sizes = {b.id: b.size for b in request.buffers}
    assert sum(sizes[b] for b in cert.buffers) == cert.live_bytes


def test_sm75_and_sm90_files_differ_only_in_target_and_name() -> None:
    a = parse_request((EXAMPLES / "fits_sm90_not_sm75.json").read_text()).model_dump()
    b = parse_request((EXAMPLES / "too_big_for_sm75.json").read_text()).model_dump()
    for d in (a, b):
        d.pop("target")
        d.pop("name")
    assert a == b
