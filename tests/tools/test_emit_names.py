"""Identifiers from hostile buffer ids and kernel names: the emitted CUDA passes a host C++20
compiler's syntax check (with a prelude standing in for CUDA's built-ins), and the emitted
MLIR names are valid, unique and defined before use."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.emit import cuda_snippet, emit_mlir
from planner.emit._common import identifiers

GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ is not installed")


def _words(text: str) -> list[str]:
    return text.split()


# Written out here, apart from the emitter's own list, so the test checks it.
CPP20_KEYWORDS = _words(
    """alignas alignof asm auto bool break case catch char char8_t char16_t
char32_t class concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept nullptr
operator private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true
try typedef typeid typename union unsigned using virtual void volatile wchar_t while"""
)
ALTERNATIVE_TOKENS = _words("and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq")
CUDA_NAMES = _words(
    """threadIdx blockIdx blockDim gridDim warpSize __shared__ __syncthreads __global__
__device__ __host__ __align__ __restrict__ __half __nv_bfloat16 dim3 uint3 half float4
cudaFuncSetAttribute cudaFuncAttributeMaxDynamicSharedMemorySize cudaError_t cudaSuccess main
size_t NULL"""
)
SNIPPET_NAMES = ["smem_arena", "workspace", "workspace_block"]  # the CUDA emitter's own
RESERVED_FORMS = ["_", "_A", "_Bool", "_Pragma", "__x", "x__y", "a_", "a__", "__", "___"]
OTHER_IDS = [
    "\u00fcber",
    "\u65e5\u672c",
    "\u200b",
    "\u00e9",
    "\x00",
    "\x01a",
    "a\x1fb",
    "\x7f",
    "a\nb",
    "1",
    "2x",
    "007",
    "9and",
    "a b",
    "a-b",
    "a_b",
    "a__b",
    "a_b_2",
    "a.b",
    "b",
    "b_",
    "b_2",
    "and_",
    "x",
    "x",  # ids are unique: this one is dropped below
]
HOSTILE = list(
    dict.fromkeys(
        [
            *CPP20_KEYWORDS,
            *ALTERNATIVE_TOKENS,
            *CUDA_NAMES,
            *SNIPPET_NAMES,
            *RESERVED_FORMS,
            *OTHER_IDS,
        ]
    )
)
KERNEL_NAMES = ["requires", "and", "co_await", "main", "cudaFuncSetAttribute", "\x01", "1k", "_K"]
DTYPES = [None, "f16", "bf16", "f32", "i32", "f64", "u16"]
C_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*_?")

# What the snippet takes from CUDA, for a host compiler: the qualifiers as nothing, the
# built-in variables as externs, the runtime's opt-in call as a declaration.
PRELUDE = """\
#define __global__
#define __device__
#define __host__
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
extern const uint3 threadIdx;
extern const uint3 blockIdx;
extern const dim3 blockDim;
extern const dim3 gridDim;
extern const int warpSize;
extern "C" void __syncthreads();
enum cudaError_t { cudaSuccess = 0 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
template <class T> cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value);
"""
HEADERS = {
    "cuda_fp16.h": "struct __half { unsigned short x; };\ntypedef __half half;\n",
    "cuda_bf16.h": "struct __nv_bfloat16 { unsigned short x; };\n"
    "typedef __nv_bfloat16 nv_bfloat16;\n",
}


def _request(ids: list[str], name: str, **extra: Any) -> PlanRequest:
    """One buffer per id, live two points each, typed by turns (the type's header included)."""
    buffers = []
    for k, ident in enumerate(ids):
        buffer: dict[str, Any] = {"id": ident, "size": 64 * (1 + k % 3), "start": k % 7}
        buffer["end"] = buffer["start"] + 2
        dtype = DTYPES[k % len(DTYPES)]
        if dtype is not None:
            buffer["dtype"] = dtype
        buffers.append(buffer)
    return parse_request({"name": name, "buffers": buffers, **extra})


def _planned(request: PlanRequest) -> Plan:
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return plan


def _opt_in() -> tuple[PlanRequest, Plan]:
    """Every hostile id, in an arena above 48 KiB: the host code calls the opt-in."""
    request = _request(HOSTILE, "k", options={"sync": "none"})
    big = [b.model_copy(update={"size": b.size * 32}) for b in request.buffers]
    request = request.model_copy(update={"buffers": big})
    plan = _planned(request)
    assert plan.launch.requires_opt_in
    return request, plan


def _spilled() -> tuple[PlanRequest, Plan]:
    """Every hostile id, some spilled to the workspace: the snippet reads blockIdx, gridDim."""
    request = _request(HOSTILE, "k", capacity=4096, options={"overflow": "spill"})
    plan = _planned(request)
    assert 0 < len(plan.spilled) < len(HOSTILE)
    return request, plan


def _pointer_names(device: str) -> list[str]:
    return re.findall(r"\* const (\w+) = reinterpret_cast", device)


def _compile(request: PlanRequest, plan: Plan, tmp_path: Path) -> str:
    """The snippet in a kernel that uses every pointer, and its host code in ``main``, checked
    by ``g++ -std=c++20 -fsyntax-only``; returns the source."""
    s = cuda_snippet(request, plan)
    names = _pointer_names(s.device)
    assert len(names) == len(request.buffers)
    # The harness's own names are reserved ones (``__``), so no identifier made can clash.
    params = (
        "unsigned char* workspace, unsigned char* __sink"
        if plan.spilled
        else ("unsigned char* __sink")
    )
    uses = " ^ ".join(f"(unsigned long long){n}" for n in names) or "0"
    source = (
        f"{s.includes}\n__global__ void {s.kernel}({params}) {{\n{s.device}"
        f"  __sink[0] = (unsigned char)({uses});\n}}\n\nint main() {{\n{s.host}  return 0;\n}}\n"
    )
    (tmp_path / "prelude.h").write_text(PRELUDE)
    for header, text in HEADERS.items():
        (tmp_path / header).write_text(text)
    path = tmp_path / "snippet.cpp"
    path.write_text(source)
    assert GXX is not None
    flags = ["-std=c++20", "-fsyntax-only", "-pedantic-errors", "-I", str(tmp_path)]
    done = subprocess.run(
        [GXX, *flags, "-include", str(tmp_path / "prelude.h"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return source


@needs_gxx
def test_prelude_lets_a_keyword_fail() -> None:
    """The check can fail: a keyword as a pointer's name does not compile."""
    source = "void f() {\n  unsigned char* const and = nullptr;\n}\n"
    done = subprocess.run(
        [GXX or "g++", "-std=c++20", "-fsyntax-only", "-x", "c++", "-"],
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0


@needs_gxx
@pytest.mark.parametrize("kernel", KERNEL_NAMES)
def test_cuda_for_hostile_ids_compiles(kernel: str, tmp_path: Path) -> None:
    request, plan = _opt_in()
    request = request.model_copy(update={"name": kernel})
    assert planner.validate(request, plan).valid
    source = _compile(request, plan, tmp_path)
    assert "cudaFuncSetAttribute(" in source
    assert "#include <cuda_fp16.h>" in source
    assert "#include <cuda_bf16.h>" in source


@needs_gxx
def test_cuda_for_hostile_spilled_ids_compiles(tmp_path: Path) -> None:
    request, plan = _spilled()
    request = request.model_copy(update={"name": "co_yield"})
    source = _compile(request, plan, tmp_path)
    assert "workspace_block = workspace" in source


def test_identifiers_of_hostile_ids_are_unreserved_unique_and_stable() -> None:
    taken = set(SNIPPET_NAMES)
    names = identifiers(HOSTILE, taken)
    assert names == identifiers(HOSTILE, taken)
    assert len(set(names)) == len(names) == len(HOSTILE)
    assert not set(names) & taken
    reserved = {*CPP20_KEYWORDS, *ALTERNATIVE_TOKENS, *CUDA_NAMES}
    assert not set(names) & reserved, sorted(set(names) & reserved)
    for name in names:
        assert C_IDENT.fullmatch(name), name
        assert "__" not in name, name
        assert not name.startswith("_"), name
    # Readable: a plain id keeps its text, a reserved word gains one underscore.
    named = dict(zip(HOSTILE, names, strict=True))
    assert named["x"] == "x"
    assert named["requires"] == "requires_"
    assert named["co_await"] == "co_await_"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(min_size=1, max_size=10),
            st.sampled_from([*CPP20_KEYWORDS, *ALTERNATIVE_TOKENS, *CUDA_NAMES, *RESERVED_FORMS]),
            st.from_regex(r"[A-Za-z0-9_]{1,6}", fullmatch=True),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sets(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), max_size=3),
)
def test_identifiers_property(ids: list[str], taken: set[str]) -> None:
    names = identifiers(ids, taken)
    assert names == identifiers(ids, taken)
    assert len(set(names)) == len(names) == len(ids)
    assert not set(names) & taken
    assert not set(names) & {*CPP20_KEYWORDS, *ALTERNATIVE_TOKENS, *CUDA_NAMES}
    assert all(C_IDENT.fullmatch(n) and "__" not in n for n in names), names


@needs_gxx
@settings(max_examples=6, deadline=None)
@given(
    ids=st.lists(
        st.one_of(
            st.text(min_size=1, max_size=8),
            st.sampled_from([*CPP20_KEYWORDS, *ALTERNATIVE_TOKENS, *CUDA_NAMES, *RESERVED_FORMS]),
        ),
        min_size=1,
        max_size=6,
        unique=True,
    ),
    kernel=st.sampled_from(KERNEL_NAMES),
)
def test_cuda_for_random_ids_compiles(
    ids: list[str], kernel: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    request = _request(ids, kernel, options={"sync": "none"})
    _compile(request, _planned(request), tmp_path_factory.mktemp("snippet"))


# MLIR: ``%`` suffix-id and ``@`` bare-id (the MLIR language reference, "Identifiers").
MLIR_VALUE = re.compile(r"%([A-Za-z_$.\-][\w$.\-]*|\d+)", re.ASCII)
MLIR_SYMBOL = re.compile(r"@[A-Za-z_][\w$.]*", re.ASCII)


@pytest.mark.parametrize("build", [_opt_in, _spilled], ids=["shared", "spilled"])
def test_mlir_names_for_hostile_ids_are_valid_unique_and_defined(
    build: Callable[[], tuple[PlanRequest, Plan]],
) -> None:
    request, plan = build()
    request = request.model_copy(update={"name": "\x01requires"})
    text = emit_mlir(request, plan)
    ops = [line.strip() for line in text.splitlines() if not line.strip().startswith("//")]
    defined: list[str] = []
    for op in ops:
        found = re.match(r"(%\S+) = ", op)
        if found:
            assert MLIR_VALUE.fullmatch(found[1]), op
            # Every value it reads is defined above it (or is the function's argument).
            for used in MLIR_VALUE.findall(op[found.end() :]):
                assert f"%{used}" in {*defined, "%_workspace"}, op
            defined.append(found[1])
    assert len(set(defined)) == len(defined)
    assert sum(" = memref.view " in op for op in ops) == len(HOSTILE)
    symbols = re.findall(r"(?:gpu\.module|gpu\.func) (@\S+?)[ (]", text)
    assert len(symbols) == 2
    assert all(MLIR_SYMBOL.fullmatch(s) for s in symbols), symbols
