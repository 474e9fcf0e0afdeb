"""The synchronisation a plan relies on beyond block barriers is code in both emitters: mbarrier
init, arrive, expect_tx, try_wait and inval, named barriers (``bar.sync id, n``) and the three
``wait_group`` kinds. The expected calls are derived here from the request's and the plan's
fields, not from the emitters' output; the CUDA helpers compile with g++ (syntax) and with nvcc
for sm_90a (and are refused for sm_80), the MLIR helpers parse and verify, each where the tool
is installed; plans without these operations emit none of it."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit.cuda import HELPERS, cuda_snippet
from planner.emit.mlir import emit_mlir
from tests.support.compilers import NVCC, nvcc_object
from tests.support.paths import ROOT

GXX = shutil.which("g++")
EXAMPLES = ROOT / "examples"
CASES = ["mbarrier_reuse", "tma_wgmma_epilogue", "hopper_tma_matmul", "fa3_attention_forward"]
OWN = {
    "mbarrier_init",
    "mbarrier_inval",
    "mbarrier_arrive",
    "expect_tx",
    "mbarrier_wait",
    "named_barrier",
    "wait_group",
    "bulk_wait_group",
    "bulk_wait_group_read",
    "wgmma_wait_group",
}
# The PTX each helper's body must hold.
PTX = {
    "mbarrier_init": "mbarrier.init.shared.b64",
    "mbarrier_inval": "mbarrier.inval.shared.b64",
    "mbarrier_arrive": "mbarrier.arrive.shared.b64",
    "expect_tx": "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier_wait": "mbarrier.try_wait.parity.shared::cta.b64",
    "named_barrier": "bar.sync %0, %1;",
    "wait_group": "cp.async.wait_group %0;",
    "bulk_wait_group": "cp.async.bulk.wait_group %0;",
    "bulk_wait_group_read": "cp.async.bulk.wait_group.read %0;",
    "wgmma_wait_group": "wgmma.wait_group.sync.aligned %0;",
}
# The NVVM op each MLIR helper holds.
NVVM = {
    "mbarrier_init": "nvvm.mbarrier.init %bar, %count",
    "mbarrier_inval": "nvvm.mbarrier.inval %bar",
    "mbarrier_arrive": "nvvm.mbarrier.arrive %bar",
    "expect_tx": "nvvm.mbarrier.arrive.expect_tx %bar, %bytes",
    "mbarrier_wait": "nvvm.mbarrier.try_wait.parity %bar, %phase",
    "named_barrier": "nvvm.barrier id = %id number_of_threads = %threads",
    "wait_group": "nvvm.cp.async.wait.group {n}",
    "bulk_wait_group": "nvvm.cp.async.bulk.wait_group {n}",
    "bulk_wait_group_read": "nvvm.cp.async.bulk.wait_group {n} read",
    "wgmma_wait_group": "nvvm.wgmma.wait.group.sync.aligned {n}",
}


def _planned(name: str) -> tuple[PlanRequest, Plan]:
    request = parse_request((EXAMPLES / f"{name}.json").read_text())
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def _expected(request: PlanRequest, plan: Plan) -> Counter[tuple[int, str, str]]:
    """(point, op, argument text) of every call the plan relies on, from its fields."""
    out: Counter[tuple[int, str, str]] = Counter()
    buffers = {b.id for b in request.buffers}
    threads = {p.id: p.threads[1] - p.threads[0] for p in request.partitions}
    for b in request.buffers:
        if b.kind == "mbarrier":
            out[(b.start, "mbarrier_init", b.id)] += 1
    for s in request.syncs:
        if s.kind == "wait_group":
            op = {"cp.async": "wait_group", "bulk": "bulk_wait_group", "wgmma": "wgmma_wait_group"}
            kind = op[s.group or "cp.async"] + ("_read" if s.read else "")
            out[(s.at, kind, str(s.pending))] += 1
        elif s.kind == "named_barrier":
            n = sum(threads[p] for p in s.partitions or [])
            out[(s.at, "named_barrier", f"{s.id}, {n}")] += 1
        elif s.kind in ("fence_proxy_async", "cluster_barrier"):
            out[(s.at, s.kind, "")] += 1
        else:
            assert s.mbarrier is not None
            bar = s.mbarrier if s.mbarrier in buffers else f'<mbarrier "{s.mbarrier}">'
            out[(s.at, s.kind, bar)] += 1
    for fence in plan.fences:
        out[(fence.at, "fence_proxy_async", "")] += 1
    for inval in plan.invals:
        if inval.origin != "existing":
            out[(inval.at, "mbarrier_inval", inval.mbarrier)] += 1
    return out


def _cuda_calls(device: str) -> Counter[tuple[int, str, str]]:
    """(point, op, argument text) of the calls the CUDA table lists; the argument text is the
    wait depth, the named barrier's "id, threads", or the mbarrier."""
    ops = {name: op for op, name in HELPERS.items()}
    found: Counter[tuple[int, str, str]] = Counter()
    table = device.split("// Calls by program point", 1)[1]
    for at, name, depth, args in re.findall(
        r"^//   point (\d+): (planner_\w+)(?:<(\d+)>)?\(([^;]*)\);", table, re.M
    ):
        op = ops[name]
        if depth:
            arg = depth
        elif op == "named_barrier":
            arg = args
        else:
            arg = args.split(", <")[0].split(", ")[0] if args else ""
            if args.startswith("<mbarrier"):
                arg = args.split(">", 1)[0] + ">"
        found[(int(at), op, arg)] += 1
    return found


@pytest.mark.parametrize("name", CASES)
def test_cuda_lists_every_call_the_plan_relies_on(name: str) -> None:
    request, plan = _planned(name)
    s = cuda_snippet(request, plan)
    expected = _expected(request, plan)
    assert {op for _, op, _ in expected} & OWN
    assert _cuda_calls(s.device) == expected
    for op in {op for _, op, _ in expected}:
        assert f"void {HELPERS[op]}(" in s.includes
        if op in PTX:
            assert PTX[op] in s.includes
    for op in OWN - {op for _, op, _ in expected}:
        assert f"void {HELPERS[op]}(" not in s.includes


def test_named_barriers_count_the_partitions_threads() -> None:
    request, plan = _planned("fa3_attention_forward")
    device = cuda_snippet(request, plan).device
    named = [s for s in request.syncs if s.kind == "named_barrier"]
    assert named
    for s in named:
        spans = [p.threads for p in request.partitions if p.id in (s.partitions or [])]
        n = sum(end - first for first, end in spans)
        assert f"point {s.at}: planner_named_barrier({s.id}, {n});" in device


@pytest.mark.parametrize("name", CASES)
def test_mlir_helpers_parse_and_verify(name: str) -> None:
    request, plan = _planned(name)
    text = emit_mlir(request, plan)
    expected = _expected(request, plan)
    for at, op, arg in expected:
        depth = f"_{arg}" if "wait_group" in op else ""
        symbol = f"@{HELPERS[op]}{depth}"
        assert f"gpu.func {symbol}(" in text
        assert re.search(rf"^\s*//   point {at}: {re.escape(symbol)}\(", text, re.M), (at, op)
        if op in NVVM:
            assert NVVM[op].format(n=arg) in text
    ir = pytest.importorskip("iree.compiler.ir")
    with ir.Context():
        assert ir.Module.parse(text).operation.verify()
    # The check can fail: a misspelt op does not parse.
    with ir.Context(), pytest.raises(Exception, match="nvvm"):
        ir.Module.parse(text.replace("nvvm.mbarrier.", "nvvm.mbarier.", 1))


def test_plans_without_these_syncs_emit_none_of_it() -> None:
    for path in request_files(EXAMPLES):
        request = parse_request(path.read_text())
        if any(b.kind == "mbarrier" for b in request.buffers) or any(
            s.kind not in ("fence_proxy_async", "cluster_barrier") for s in request.syncs
        ):
            continue
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        for text in (cuda_snippet(request, plan).text, emit_mlir(request, plan)):
            assert "Calls by program point" not in text, path.name
            for op in OWN:
                assert HELPERS[op] not in text, (path.name, op)


def _kernel(name: str) -> str:
    """The snippet of ``name`` in a kernel calling every helper it defines once, then its
    host code in ``main``."""
    request, plan = _planned(name)
    s = cuda_snippet(request, plan)
    calls = []
    for op, helper in HELPERS.items():
        if f"void {helper}(" not in s.includes:
            continue
        if "wait_group" in op:
            calls.append(f"{helper}<0>();")
        elif op in ("mbarrier_init", "expect_tx", "mbarrier_wait"):
            calls.append(f"{helper}(&bar, 1u);")
        elif op in ("mbarrier_inval", "mbarrier_arrive"):
            calls.append(f"{helper}(&bar);")
        elif op == "named_barrier":
            calls.append(f"{helper}(1u, 256u);")
        else:
            calls.append(f"{helper}();")
    body = "\n  ".join(calls)
    return (
        f"{s.includes}\n__global__ void {s.kernel}(unsigned char* sink) {{\n{s.device}\n"
        f"  __shared__ unsigned long long bar;\n  {body}\n  sink[0] = (unsigned char)bar;\n}}\n\n"
        f"int main() {{\n{s.host}\n  return 0;\n}}\n"
    )


# What the snippet takes from CUDA, for a host compiler.
PRELUDE = """\
#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
struct uint3 { unsigned int x, y, z; };
extern const uint3 blockIdx;
extern const uint3 gridDim;
extern "C" unsigned long long __cvta_generic_to_shared(const void*);
extern "C" void __trap();
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class T> cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value);
struct __nv_bfloat16 { unsigned short x; };
struct __half { unsigned short x; };
"""


@pytest.mark.skipif(GXX is None, reason="g++ is not installed")
@pytest.mark.parametrize("name", CASES)
def test_cuda_helpers_compile_with_gxx(name: str, tmp_path: Path) -> None:
    source = re.sub(r"#include <cuda_(fp16|bf16)\.h>\n", "", _kernel(name))
    (tmp_path / "prelude.h").write_text(PRELUDE)
    path = tmp_path / "snippet.cpp"
    path.write_text(source)
    assert GXX is not None
    done = subprocess.run(
        [GXX, "-std=c++20", "-fsyntax-only", "-include", str(tmp_path / "prelude.h"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:] + source


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", ["hopper_tma_matmul", "fa3_attention_forward"])
def test_cuda_helpers_compile_for_sm_90a_and_not_sm_80(name: str, tmp_path: Path) -> None:
    source = _kernel(name)
    done = nvcc_object(source, "sm_90a", tmp_path)
    assert done.returncode == 0, done.stderr[-4000:] + source
    below = nvcc_object(source, "sm_80", tmp_path)
    assert below.returncode != 0
    assert "needs sm_90" in below.stderr
    assert "mbarrier.init needs" not in below.stderr  # sm_80 has mbarrier.init


def test_helper_names_are_reserved_only_where_emitted() -> None:
    """A buffer named like a helper keeps its name in a plan without that code, and is renamed
    in one with it, so no pointer shadows a helper."""
    plain = parse_request(
        {"buffers": [{"id": "planner_mbarrier_init", "size": 64, "start": 0, "end": 2}]}
    )
    assert "const planner_mbarrier_init =" in cuda_snippet(plain, planner.plan(plain)).device
    request, _ = _planned("mbarrier_reuse")
    extra = {"id": "planner_mbarrier_init", "size": 64, "start": 0, "end": 1}
    data = request.model_dump(mode="json", exclude_none=True)
    data["buffers"].append(extra)
    grown = parse_request(data)
    plan = planner.plan(grown)
    assert planner.validate(grown, plan).valid
    device = cuda_snippet(grown, plan).device
    assert "const planner_mbarrier_init =" not in device
    assert "const planner_mbarrier_init_2 =" in device
