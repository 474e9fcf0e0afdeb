"""CUDA and MLIR emitters: golden files (checked by hand), offsets read back from the text,
and the output compiled by nvcc and parsed by mlir-opt where they are installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import planner
from planner.cli import main
from planner.core.csvio import load_request
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit import cuda_snippet, emit_cuda, emit_mlir
from planner.emit._common import identifiers
from tests.support.paths import TESTS

GOLDEN = TESTS / "golden"
CASES = ["gemm_epilogue", "spill", "odd_ids"]
MLIR_WIDTH = {"i8": 1, "i16": 2, "f16": 2, "bf16": 2, "i32": 4, "f32": 4, "f64": 8}
CUDA_TYPE = {
    None: "unsigned char",
    "f16": "__half",
    "bf16": "__nv_bfloat16",
    "f32": "float",
    "i32": "int",
    "u16": "unsigned short",
    "f64": "double",
}


def _planned(case: str) -> tuple[PlanRequest, Plan]:
    request = load_request(str(GOLDEN / f"{case}.json"))
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("kind", "suffix"), [("cuda", "cu"), ("mlir", "mlir")])
def test_matches_golden_file(case: str, kind: str, suffix: str) -> None:
    request, plan = _planned(case)
    text = emit_cuda(request, plan) if kind == "cuda" else emit_mlir(request, plan)
    golden = GOLDEN / f"{case}.{suffix}"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


@pytest.mark.parametrize("case", CASES)
def test_cuda_pointers_sit_at_the_placements(case: str) -> None:
    request, plan = _planned(case)
    text = emit_cuda(request, plan)
    pattern = (
        r"^(.+)\* const (\w+) = reinterpret_cast<\1\*>\((smem_arena|workspace_block) "
        r"\+ (\d+)\);"
    )
    found = {m[2]: (m[3], int(m[4]), m[1]) for m in re.finditer(pattern, text, re.M)}
    taken = {"smem_arena", "workspace", "workspace_block", cuda_snippet(request, plan).kernel}
    names = identifiers([b.id for b in request.buffers], taken)
    where = {p.id: p for p in plan.placements}
    assert len(found) == len(request.buffers)
    for b, name in zip(request.buffers, names, strict=True):
        base, offset, ctype = found[name]
        assert offset == where[b.id].offset
        assert base == ("smem_arena" if where[b.id].memory == "shared" else "workspace_block")
        assert ctype == CUDA_TYPE[b.dtype]


@pytest.mark.parametrize("case", CASES)
def test_mlir_views_sit_at_the_placements(case: str) -> None:
    request, plan = _planned(case)
    text = emit_mlir(request, plan)
    constant = r"%(_c\d+) = arith.constant (\d+) : index"
    consts = {m[1]: int(m[2]) for m in re.finditer(constant, text)}
    views = re.findall(
        r"%(\w+) = memref.view %_smem\[%(\w+)\]\[\] : \S+ \S+> to memref<(\d+)x(\w+),", text
    )
    shared = [p for p in plan.placements if p.memory == "shared"]
    assert len(views) == len(shared)
    sizes = {b.id: b.size for b in request.buffers}
    for (_, shift, count, elem), p in zip(views, shared, strict=True):
        assert consts[shift] == p.offset
        assert int(count) * MLIR_WIDTH[elem] == sizes[p.id]


def test_opt_in_only_above_48k() -> None:
    request, plan = _planned("gemm_epilogue")
    assert plan.arena_bytes > 49152
    call = (
        "cudaFuncSetAttribute(gemm_epilogue, cudaFuncAttributeMaxDynamicSharedMemorySize, 66048);"
    )
    assert call in emit_cuda(request, plan)
    request, plan = _planned("odd_ids")
    assert "cudaFuncSetAttribute" not in emit_cuda(request, plan).replace("no opt-in", "")


def test_identifiers_are_c_names_and_unique() -> None:
    names = identifiers(["x", "x", "1a", "a.b", "", "float", "__z", "x_2"], {"smem_arena"})
    assert names == ["x", "x_2", "b1a", "a_b", "b", "float_", "b_z", "x_2_2"]  # no "__"
    assert identifiers(["smem_arena"], {"smem_arena"}) == ["smem_arena_2"]


def test_cli_emits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(GOLDEN / "spill.json")
    assert main(["plan", source, "--emit", "cuda"]) == 0
    assert capsys.readouterr().out == (GOLDEN / "spill.cu").read_text()
    out = tmp_path / "k.mlir"
    assert main(["plan", source, "--emit", "mlir", "-o", str(out)]) == 0
    assert out.read_text() == (GOLDEN / "spill.mlir").read_text()
    assert main(["plan", source, "--emit", "ptx"]) == 2
    assert "invalid choice: 'ptx'" in capsys.readouterr().err


def test_rejects_unknown_dtype_and_ragged_size() -> None:
    with pytest.raises(planner.RequestError) as info:
        planner.plan({"buffers": [{"id": "a", "size": 8, "start": 0, "end": 1, "dtype": "f17"}]})
    assert info.value.errors[0]["loc"] == ["buffers", 0, "dtype"]
    assert "unknown dtype 'f17'" in info.value.errors[0]["msg"]
    with pytest.raises(planner.RequestError) as info:
        planner.plan({"buffers": [{"id": "a", "size": 6, "start": 0, "end": 1, "dtype": "f32"}]})
    assert info.value.errors[0]["loc"] == ["buffers", 0, "size"]
    assert info.value.errors[0]["type"] == "size_not_multiple_of_dtype"


def test_dtype_raises_the_alignment() -> None:
    plan = planner.plan(
        {
            "buffers": [
                {"id": "a", "size": 3, "start": 0, "end": 2},
                {"id": "b", "size": 8, "start": 0, "end": 2, "dtype": "f64"},
            ]
        }
    )
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["b"] % 8 == 0


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
@pytest.mark.parametrize("case", CASES)
def test_cuda_snippet_compiles(case: str, tmp_path: Path) -> None:
    request, plan = _planned(case)
    s = cuda_snippet(request, plan)
    spilled = bool(plan.spilled)
    params = "unsigned char* workspace, unsigned char* sink" if spilled else "unsigned char* sink"
    uses = " ^ ".join(f"(unsigned char)(size_t){name}" for name in _pointer_names(s.device))
    source = (
        f"{s.includes}\n"
        f"__global__ void {s.kernel}({params}) {{\n{s.device}\n  sink[0] = {uses or '0'};\n}}\n\n"
        f"int main() {{\n{s.host}\n  return 0;\n}}\n"
    )
    path = tmp_path / f"{case}.cu"
    path.write_text(source)
    assert NVCC is not None
    done = subprocess.run(
        [NVCC, "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr + source


HAVE_GPU = Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None
_RUN_MAIN = """
int main() {
%(host)s
  unsigned char* workspace = nullptr;
  long long* out = nullptr;
  if (cudaMalloc(&out, %(count)d * sizeof(long long)) != cudaSuccess) return 77;  // no GPU
  if (%(global_bytes)d && cudaMalloc(&workspace, 2 * %(global_bytes)d) != cudaSuccess) return 3;
  %(kernel)s<<<2, 32, %(arena)d>>>(%(args)s);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { printf("error %%s\\n", cudaGetErrorString(err)); return 4; }
  long long host[%(count)d];
  cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  for (int i = 0; i < %(count)d; ++i) printf("%%lld\\n", host[i]);
  return 0;
}
"""


def gpu_program(case: str) -> tuple[str, list[int]]:
    """A CUDA program around the case's snippet that prints each pointer's offset, and the
    offsets it must print."""
    request, plan = _planned(case)
    s = cuda_snippet(request, plan)
    names = _pointer_names(s.device)
    memory = {p.id: p.memory for p in plan.placements}
    shared = [memory[b.id] == "shared" for b in request.buffers]
    rows = []
    for k, (name, in_shared) in enumerate(zip(names, shared, strict=True)):
        base = "smem_arena" if in_shared else f"(workspace + {plan.global_bytes}ull)"
        rows.append(f"  out[{k}] = (long long)((unsigned char*){name} - {base});")
    params = "long long* out" + (", unsigned char* workspace" if plan.spilled else "")
    source = (
        f"#include <cstdio>\n{s.includes}\n__global__ void {s.kernel}({params}) {{\n{s.device}"
        "  if (blockIdx.x != 1 || threadIdx.x != 0) return;\n" + "\n".join(rows) + "\n}\n"
    )
    source += _RUN_MAIN % {
        "host": s.host,
        "count": len(names),
        "global_bytes": plan.global_bytes,
        "kernel": s.kernel,
        "arena": plan.arena_bytes,
        "args": "out, workspace" if plan.spilled else "out",
    }
    offsets = {p.id: p.offset for p in plan.placements}
    return source, [offsets[b.id] for b in request.buffers]


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None or not HAVE_GPU, reason="needs nvcc and a CUDA device")
@pytest.mark.parametrize("case", CASES)
def test_cuda_snippet_runs_on_a_gpu(case: str, tmp_path: Path) -> None:
    """Each pointer of the snippet, read back from the second block, sits at its offset; the
    opt-in call lets the kernel launch with the whole arena."""
    source, expected = gpu_program(case)
    path = tmp_path / f"{case}.cu"
    path.write_text(source)
    assert NVCC is not None
    exe = tmp_path / "run"
    built = subprocess.run(
        [NVCC, "-std=c++17", "-o", str(exe), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr + source
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False)
    # The skipif above saw a driver; a device that then cannot allocate is a broken GPU
    # runner, to be reported, not skipped.
    assert ran.returncode != 77, "a CUDA driver is present but cudaMalloc failed: no usable device"
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [int(v) for v in ran.stdout.split()] == expected


def _pointer_names(device: str) -> list[str]:
    return re.findall(r"\* const (\w+) = reinterpret_cast", device)


def _mlir_opt() -> str | None:
    for name in ("mlir-opt", "mlir-opt-22", "mlir-opt-19", "mlir-opt-18"):
        if (found := shutil.which(name)) is not None:
            return found
    for llvm in sorted(Path("/usr/lib").glob("llvm-*/bin/mlir-opt"), reverse=True):
        return str(llvm)
    return None


MLIR_OPT = _mlir_opt()


@pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt is not installed")
@pytest.mark.parametrize("case", CASES)
def test_mlir_parses_and_verifies(case: str, tmp_path: Path) -> None:
    request, plan = _planned(case)
    path = tmp_path / f"{case}.mlir"
    path.write_text(emit_mlir(request, plan))
    assert MLIR_OPT is not None
    done = subprocess.run(
        [MLIR_OPT, str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "gpu.dynamic_shared_memory" in done.stdout
    assert done.stdout.count("memref.view") == len(request.buffers)


# --- hostile ids: no injected line, valid and unique identifiers -------------------------------

HOSTILE_IDS = [
    'a\n#include "/etc/passwd"',
    "b */ int evil; /*",
    'c"; system("rm -rf /"); "',
    "d\\",
    "e\\\nint spliced;",
    "#include <stdio.h>",
    "\u00fcber\u2028\u00e9",
    "\u200b",
    " ",
    "_",
    "a_b",
    "a-b",
    "a__b",
    "%alloc_4",
    "buf[2]",
    "T3.smem",
    "int",
    "smem_arena",
    "gpu.return",
]
C_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*_?")


def _hostile() -> tuple[PlanRequest, Plan]:
    buffers = [
        {"id": ident, "size": 16 * (k + 1), "start": k % 5, "end": k % 5 + 2}
        for k, ident in enumerate(HOSTILE_IDS)
    ]
    request = parse_request({"name": "k\n}\nevil", "buffers": buffers, "options": {"sync": "none"}})
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def test_cuda_with_hostile_ids_has_no_injected_line() -> None:
    request, plan = _hostile()
    text = emit_cuda(request, plan)
    assert text.isascii()
    code = [line for line in text.splitlines() if line and not line.startswith("//")]
    assert all(not line.rstrip().endswith("\\") for line in text.splitlines())
    pointers = [line for line in code if "reinterpret_cast" in line]
    assert len(pointers) == len(HOSTILE_IDS)
    # Each code line is one the emitter writes, whatever the ids hold.
    assert len(code) == len(pointers) + 1  # and the arena
    assert code[0].startswith("extern __shared__ ")
    names = _pointer_names(text)
    assert len(set(names)) == len(names) == len(HOSTILE_IDS)
    assert all(C_IDENT.fullmatch(n) and "__" not in n for n in names), names
    kernel = cuda_snippet(request, plan).kernel
    assert C_IDENT.fullmatch(kernel)
    assert kernel not in names
    # An id that is not its identifier is quoted as JSON in the comment.
    for line, ident in zip(pointers, HOSTILE_IDS, strict=True):
        comment = line.split("  // ", 1)[1]
        if not C_IDENT.fullmatch(ident) or ident in ("int", "smem_arena"):
            assert comment.startswith(json.dumps(ident) + ": "), (ident, comment)


def _view_name(op: str) -> str:
    """The SSA name a ``memref.view`` operation defines."""
    found = re.match(r"%(\S+) = memref\.view", op)
    assert found is not None, op
    return found[1]


def test_mlir_with_hostile_ids_has_no_injected_operation() -> None:
    request, plan = _hostile()
    text = emit_mlir(request, plan)
    assert text.isascii()
    ops = [line.strip() for line in text.splitlines() if not line.strip().startswith("//")]
    views = [op for op in ops if "memref.view" in op]
    assert len(views) == len(HOSTILE_IDS)
    names = [_view_name(v) for v in views]
    assert len(set(names)) == len(names)
    assert all(C_IDENT.fullmatch(n) for n in names), names
    allowed = re.compile(
        r"(%\w+ = (memref\.view|arith\.constant|gpu\.dynamic_shared_memory) .*"
        r"|gpu\.return|module attributes \{gpu\.container_module\} \{"
        r"|gpu\.module @\w+ \{|gpu\.func @\w+\(\) kernel \{|\})"
    )
    assert all(allowed.fullmatch(op) for op in ops), [op for op in ops if not allowed.fullmatch(op)]


def test_ids_that_clean_to_one_identifier_stay_apart() -> None:
    ids = ["a b", "a-b", "a_b", "a__b", "a\nb", "a_b_2", "\u00e9", "\u00e8", "_"]
    names = identifiers(ids, set())
    assert len(set(names)) == len(names)
    assert all(C_IDENT.fullmatch(n) for n in names), names
    assert names == identifiers(ids, set())  # deterministic
