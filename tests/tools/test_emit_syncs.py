"""The CUDA snippet and the MLIR output of a plan that relies on a proxy fence carry it as
code (``fence.proxy.async.shared::cta``; ``nvvm.fence.proxy``), which nvcc compiles for sm_90
and the ``mlir`` extra's bindings verify, each where installed."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit.cuda import FENCE_PROXY_ASYNC, cuda_snippet
from planner.emit.mlir import emit_mlir
from tests.support.compilers import NVCC, nvcc_object
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "hopper_tma_matmul.json"


def _planned() -> tuple[PlanRequest, Plan]:
    request = parse_request(EXAMPLE.read_text())
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def test_plans_without_a_fence_have_no_fence_helper() -> None:
    data = {"target": "sm_90", "buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]}
    request = parse_request(data)
    plan = planner.plan(request)
    assert FENCE_PROXY_ASYNC not in cuda_snippet(request, plan).text
    assert FENCE_PROXY_ASYNC not in emit_mlir(request, plan)


def test_fence_helper_verifies_in_mlir() -> None:
    request, plan = _planned()
    text = emit_mlir(request, plan)
    assert f"gpu.func @{FENCE_PROXY_ASYNC}()" in text
    ir = pytest.importorskip("iree.compiler.ir")
    with ir.Context():
        assert ir.Module.parse(text).operation.verify()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_fence_helper_compiles_for_sm_90_only(tmp_path: Path) -> None:
    request, plan = _planned()
    s = cuda_snippet(request, plan)
    assert "fence.proxy.async.shared::cta;" in s.includes
    source = (
        f"{s.includes}\n__global__ void {s.kernel}(unsigned char* sink) {{\n{s.device}\n"
        f"  {FENCE_PROXY_ASYNC}();\n  sink[0] = (unsigned char)(size_t)C_s;\n}}\n\n"
        f"int main() {{\n{s.host}\n  return 0;\n}}\n"
    )
    done = nvcc_object(source, "sm_90", tmp_path)
    assert done.returncode == 0, done.stderr + source
    below = nvcc_object(source, "sm_80", tmp_path)
    assert below.returncode != 0
    assert "fence.proxy.async needs sm_90" in below.stderr
