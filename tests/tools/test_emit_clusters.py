"""The CUDA snippet of a plan with a cluster: the cluster barrier it relies on is real code
(``barrier.cluster.arrive`` and ``wait``) that nvcc compiles for sm_90 and refuses below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.core.io import parse_request
from planner.emit.cuda import CLUSTER_BARRIER, cuda_snippet
from tests.support.compilers import NVCC, nvcc_object
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "cluster_multicast_gemm.json"


def _source() -> str:
    request = parse_request(json.loads(EXAMPLE.read_text()))
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    s = cuda_snippet(request, plan)
    assert f"void {CLUSTER_BARRIER}()" in s.includes
    assert "barrier.cluster.arrive" in s.includes
    assert "point 13: barrier.cluster.arrive; barrier.cluster.wait  // inserted" in s.device
    assert "cudaLaunchAttributeClusterDimension {2, 1, 1}" in s.host
    return (
        f"{s.includes}\n__global__ void {s.kernel}(unsigned char* sink) {{\n{s.device}\n"
        f"  {CLUSTER_BARRIER}();\n  sink[0] = (unsigned char)(size_t)C_s;\n}}\n\n"
        f"int main() {{\n{s.host}\n  return 0;\n}}\n"
    )


def test_plans_without_a_cluster_have_no_cluster_helper() -> None:
    data = {"target": "sm_90", "buffers": [{"id": "a", "size": 64, "start": 0, "end": 2}]}
    request = parse_request(data)
    s = cuda_snippet(request, planner.plan(request))
    assert CLUSTER_BARRIER not in s.text


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_cluster_snippet_compiles_for_sm_90_only(tmp_path: Path) -> None:
    source = _source()
    done = nvcc_object(source, "sm_90", tmp_path)
    assert done.returncode == 0, done.stderr + source
    below = nvcc_object(source, "sm_80", tmp_path)
    assert below.returncode != 0
    assert "cluster barriers need sm_90" in below.stderr


def test_cluster_mlir_carries_the_cluster_barrier_as_nvvm_ops() -> None:
    from planner.emit.mlir import emit_mlir

    request = parse_request(json.loads(EXAMPLE.read_text()))
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    text = emit_mlir(request, plan)
    assert "nvvm.cluster.arrive aligned" in text
    assert "nvvm.cluster.wait aligned" in text
    ir = pytest.importorskip("iree.compiler.ir")
    with ir.Context():
        module = ir.Module.parse(text)
        assert module.operation.verify()
    # The check can fail: a misspelt op does not parse.
    with ir.Context(), pytest.raises(Exception, match="nvvm"):
        ir.Module.parse(text.replace("nvvm.cluster.wait", "nvvm.cluster.wiat"))
