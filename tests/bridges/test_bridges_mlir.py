"""The MLIR bridge: IREE's own dispatches (a matmul, a softmax, a row reduction, a convolution
and an attention, compiled here with ``iree-compile`` for CUDA sm_80 and ROCm gfx942) and a
hand-written ``gpu`` module are imported, planned, rewritten and verified; the rewritten module
read back has no two live buffers sharing a byte; planted faults in it are caught; what the
bridge cannot read is left as it was, with the operation named."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest

import planner
from planner.core.errors import MissingExtraError, RequestError

pytest.importorskip("iree.compiler")

from planner.bridges.mlir import check_module, plan_module, requests_of
from tests.support.iree_dispatches import (
    COMPILE,
    DISPATCHES,
    SOURCES,
    TARGETS,
    Compiled,
    compile_dispatch,
)

WS = "#gpu.address_space<workgroup>"
HAND = f"""
module attributes {{gpu.container_module}} {{
  gpu.module @kernels [#nvvm.target<chip = "sm_90">] {{
    gpu.func @two_phase(%out: memref<256xf32>) workgroup(%w : memref<64xf32, {WS}>) kernel {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %f = arith.constant 1.0 : f32
      %tid = gpu.thread_id x
      %a = memref.alloc() : memref<256xf32, {WS}>
      %b = memref.alloc() : memref<256xf32, {WS}>
      memref.store %f, %a[%tid] : memref<256xf32, {WS}>
      gpu.barrier
      %x = memref.load %a[%c0] : memref<256xf32, {WS}>
      memref.store %x, %w[%c0] : memref<64xf32, {WS}>
      %v = memref.subview %b[0] [128] [1] : memref<256xf32, {WS}> to memref<128xf32, {WS}>
      memref.store %x, %v[%tid] : memref<128xf32, {WS}>
      gpu.barrier
      %y = memref.load %b[%c1] : memref<256xf32, {WS}>
      scf.for %i = %c0 to %c4 step %c1 {{
        %t = memref.alloc() : memref<128xf32, {WS}>
        memref.store %y, %t[%tid] : memref<128xf32, {WS}>
        %z = memref.load %t[%i] : memref<128xf32, {WS}>
        memref.store %z, %out[%tid] : memref<256xf32>
      }}
      gpu.return
    }}
  }}
  func.func @host(%out: memref<256xf32>) {{
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kernels::@two_phase blocks in (%c1, %c1, %c1)
        threads in (%c256, %c1, %c1) args(%out : memref<256xf32>)
    return
  }}
}}
"""


@pytest.fixture(scope="module")
def iree(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Compiled]:
    """Every dispatch, compiled once for CUDA sm_80 and ROCm gfx942."""
    if not COMPILE.exists() and shutil.which("iree-compile") is None:
        pytest.skip("iree-compile is missing")
    out: dict[tuple[str, str], Compiled] = {}
    for target, name in DISPATCHES:
        tmp = tmp_path_factory.mktemp(f"{target}-{name}")
        out[(target, name)] = compile_dispatch(SOURCES[name], TARGETS[target], tmp)
    return out


@pytest.fixture(scope="module")
def iree_cuda(iree: dict[tuple[str, str], Compiled]) -> dict[str, Compiled]:
    return {name: iree[("cuda", name)] for name in SOURCES}


def _validated(kernel: object) -> None:
    """Every plan a test produces goes through the static validator."""
    request, plan = getattr(kernel, "request", None), getattr(kernel, "plan", None)
    assert request is not None
    assert plan is not None
    assert planner.validate(request, plan).valid


def _placed(module: str) -> list[list[int | None]]:
    """Per kernel, the byte shift of each buffer view in a rewritten module, in program order
    (the order of the allocations they replace)."""
    from planner.bridges.mlir import parse_module
    from planner.bridges.mlir_read import kernels, read_kernel

    parsed = parse_module(module)
    with parsed.context:
        reads = [read_kernel(f, placed=True) for f in kernels(parsed)]
    return [[b.offset for b in r.shape.buffers.values()] for r in reads]


@pytest.mark.parametrize(("target", "name"), DISPATCHES, ids=[f"{t}-{n}" for t, n in DISPATCHES])
def test_iree_dispatch_is_planned_rewritten_and_checked(
    iree: dict[tuple[str, str], Compiled], target: str, name: str
) -> None:
    dump, exported = iree[(target, name)]
    result = plan_module(dump, time_limit=2.0)
    (kernel,) = result.kernels
    assert kernel.status == "rewritten", kernel.reason
    _validated(kernel)
    assert kernel.buffers >= 1
    # IREE's own figure: the export's workgroup memory (CUDA), else its allocations' sum.
    iree_bytes = exported if exported is not None else kernel.compiler_bytes
    if target == "cuda":
        assert exported == kernel.compiler_bytes
    assert kernel.lower_bound <= kernel.arena_bytes <= iree_bytes
    if kernel.compiler_bytes > kernel.lower_bound:  # buffers IREE keeps apart need not be
        assert kernel.arena_bytes < iree_bytes
    # One arena: a workgroup allocation of its bytes (an IREE executable lowers no
    # gpu.dynamic_shared_memory), every buffer a view of it.
    dispatch = result.module.split("util.func")[0]
    arena = rf"memref\.alloc\(\) alignment = \d+ : memref<{kernel.arena_bytes}xi8, {WS}>"
    assert len(re.findall(arena, dispatch)) == 1
    assert dispatch.count("memref.alloc") == 1
    # IREE's own lowering to NVVM or ROCDL still takes the rewritten dispatch.
    _lower(result.module, target)
    if target == "cuda":
        assert f"workgroup_local_memory = {kernel.arena_bytes}" in result.module
    # Read back: the views sit at their shifts and no two buffers live together share a byte.
    checks = check_module(result.module)
    assert [c.verdict is not None and c.verdict.valid for c in checks] == [True]
    assert checks[0].arena_bytes == kernel.arena_bytes
    ((_, original, why),) = requests_of(dump)
    assert why is None
    assert original is not None
    (shifts,) = _placed(result.module)
    at = dict(zip(_allocations(dump), shifts, strict=True))
    live = original["buffers"]
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            if a["start"] < b["end"] and b["start"] < a["end"]:
                lo_a, lo_b = at[a["id"]], at[b["id"]]
                assert lo_a is not None
                assert lo_b is not None
                assert lo_a + a["size"] <= lo_b or lo_b + b["size"] <= lo_a, (a, b)


def _lower(module: str, target: str) -> None:
    """The rest of IREE's lowering of a dispatch from where the dump was taken: GPU ops
    expanded, vectors lowered, structured control flow to a CFG, then LLVM with NVVM or
    ROCDL."""
    from iree.compiler import ir, passmanager

    final = "iree-convert-to-nvvm" if target == "cuda" else "iree-convert-to-rocdl"
    steps = "iree-codegen-expand-gpu-ops,iree-llvmgpu-vector-lowering,convert-scf-to-cf"
    pipeline = (
        "builtin.module(hal.executable(hal.executable.variant(builtin.module("
        f"func.func({steps}),{final}))))"
    )
    with ir.Context():
        parsed = ir.Module.parse(module)
        passmanager.PassManager.parse(pipeline).run(parsed.operation)
        assert parsed.operation.verify()
        lowered = str(parsed)
    assert "llvm.func" in lowered
    assert "addr_space = 3" in lowered  # the arena is workgroup memory still


def _allocations(dump: str) -> list[str]:
    """The buffer ids of IREE's module, in program order."""
    from planner.bridges.mlir import parse_module
    from planner.bridges.mlir_read import kernels, read_kernel

    parsed = parse_module(dump)
    with parsed.context:
        (read,) = [read_kernel(f) for f in kernels(parsed)]
    return list(read.shape.buffers)


def test_softmax_reuses_the_first_reduction_buffer(
    iree_cuda: dict[str, tuple[str, int | None]],
) -> None:
    dump, iree_bytes = iree_cuda["softmax"]
    (kernel,) = plan_module(dump, time_limit=2.0).kernels
    assert (iree_bytes, kernel.compiler_bytes, kernel.arena_bytes) == (80, 80, 40)
    assert kernel.arena_bytes == kernel.lower_bound
    assert kernel.barriers_inserted == 0


def _dynamic_views(module: str) -> list[tuple[str, str]]:
    return re.findall(r"memref\.view %\w+\[(%\w+)\]\[\] : [^\n]+ to (memref<[^>]+>)", module)


def _set_constant(module: str, name: str, value: int) -> str:
    pattern = rf"{re.escape(name)} = arith\.constant \d+ : index"
    planted, n = re.subn(pattern, f"{name} = arith.constant {value} : index", module)
    assert n == 1
    return planted


def test_planted_overlap_and_misalignment_are_caught(
    iree_cuda: dict[str, tuple[str, int | None]],
) -> None:
    module = plan_module(iree_cuda["matmul"][0], time_limit=2.0).module
    shifts = [s for s, _ in _dynamic_views(module)]
    assert len(shifts) == 2  # the two operand tiles, live together in the K loop
    overlap = check_module(_set_constant(module, shifts[1], 0), emulation=False)
    assert overlap[0].verdict is not None
    assert not overlap[0].verdict.valid
    assert any(v.startswith("overlap") for v in overlap[0].verdict.static)
    crooked = check_module(_set_constant(module, shifts[1], 17410), emulation=False)
    assert crooked[0].verdict is not None
    assert any(v.startswith("misaligned") for v in crooked[0].verdict.static)


def test_planted_dropped_barrier_is_caught(
    iree_cuda: dict[str, tuple[str, int | None]],
) -> None:
    module = plan_module(iree_cuda["softmax"][0], time_limit=2.0).module
    lines = module.splitlines()
    barriers = [i for i, line in enumerate(lines) if "gpu.barrier" in line]
    assert len(barriers) == 4
    # The third barrier separates the first buffer's last read from the second's write.
    dropped = "\n".join(line for i, line in enumerate(lines) if i != barriers[2])
    (check,) = check_module(dropped)
    assert check.verdict is not None
    assert not check.verdict.valid
    assert check.verdict.static
    assert check.verdict.emulated


def test_hand_written_gpu_module() -> None:
    result = plan_module(HAND, time_limit=2.0)
    (kernel,) = result.kernels
    _validated(kernel)
    assert kernel.status == "rewritten"
    assert (kernel.buffers, kernel.compiler_bytes) == (4, 2816)
    assert kernel.arena_bytes == kernel.lower_bound == 1024
    assert kernel.barriers_existing == 2
    assert kernel.barriers_inserted >= 1
    assert f"dynamic_shared_memory_size %c{kernel.arena_bytes}_i32" in result.module
    assert "workgroup(" not in result.module  # the attribution is a view now
    assert result.module.count("gpu.barrier") == 2 + kernel.barriers_inserted
    request = kernel.request
    assert request is not None
    assert request["loops"] == [
        {"start": request["loops"][0]["start"], "end": request["loops"][0]["end"], "trips": 4}
    ]
    (check,) = check_module(result.module)
    assert check.verdict is not None
    assert check.verdict.valid


def test_bytecode_in_and_out() -> None:
    from iree.compiler import ir

    with ir.Context():
        module = ir.Module.parse(HAND)
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
    result = plan_module(buffer.getvalue(), time_limit=2.0, bytecode=True)
    assert result.kernels[0].status == "rewritten"
    assert result.bytecode is not None
    assert result.bytecode.startswith(b"ML\xefR")
    again = plan_module(result.bytecode, time_limit=2.0)  # a planned module reads back
    assert again.kernels[0].status == "skipped"
    assert "already places" in (again.kernels[0].reason or "")


def _kernel(body: str, extra: str = "") -> str:
    return f"""
module attributes {{gpu.container_module}} {{
  gpu.module @m {{
    {extra}
    gpu.func @k(%n: index, %out: memref<64xf32>) kernel {{
      %c0 = arith.constant 0 : index
      %f = arith.constant 1.0 : f32
      {body}
      gpu.return
    }}
  }}
}}
"""


@pytest.mark.parametrize(
    ("body", "extra", "named"),
    [
        (
            f"%a = memref.alloc(%n) : memref<?xf32, {WS}>\n"
            f"memref.store %f, %a[%c0] : memref<?xf32, {WS}>",
            "",
            "dynamic size",
        ),
        (
            f"%a = memref.alloc() : memref<64xf32, {WS}>\n"
            f"%p = memref.extract_aligned_pointer_as_index %a : memref<64xf32, {WS}> -> index",
            "",
            "memref.extract_aligned_pointer_as_index",
        ),
        (
            f"%a = memref.alloc() : memref<64xf32, {WS}>\n"
            f"func.call @ext(%a) : (memref<64xf32, {WS}>) -> ()",
            f"func.func private @ext(memref<64xf32, {WS}>)",
            "func.call",
        ),
        (
            f"%a = memref.alloc() : memref<64xf32, {WS}>\n"
            "%t = gpu.thread_id x\n%c = arith.cmpi eq, %t, %c0 : index\n"
            "scf.if %c {\n gpu.barrier\n}\n"
            f"memref.store %f, %a[%c0] : memref<64xf32, {WS}>",
            "",
            "thread-dependent",
        ),
        (
            f"%a = memref.alloc() : memref<8x8xf32, strided<[16, 1]>, {WS}>\n"
            f"memref.store %f, %a[%c0, %c0] : memref<8x8xf32, strided<[16, 1]>, {WS}>",
            "",
            "with a layout",
        ),
    ],
    ids=["dynamic_size", "escaping_pointer", "unknown_call", "divergent_barrier", "layout"],
)
def test_what_cannot_be_read_is_left_as_it_was(body: str, extra: str, named: str) -> None:
    source = _kernel(body, extra)
    result = plan_module(source, time_limit=1.0)
    (kernel,) = result.kernels
    assert kernel.status == "skipped"
    assert kernel.reason is not None
    assert named in kernel.reason
    assert "gpu.dynamic_shared_memory" not in result.module
    assert result.diagnostics == [f"@k: {kernel.reason}"]


def test_requests_of_lists_every_kernel() -> None:
    ((name, request, why),) = requests_of(HAND)
    assert (name, why) == ("two_phase", None)
    assert request is not None
    assert request["target"] == "sm_90"
    assert planner.plan(request).arena_bytes == 1024


def test_bad_module_names_the_field() -> None:
    with pytest.raises(RequestError) as info:
        plan_module("module { not.an.op }")
    assert info.value.errors[0]["loc"] == ["module"]
    assert "not a valid MLIR module" in info.value.errors[0]["msg"]


def test_missing_extra_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.bridges._plans as plans

    monkeypatch.setattr(plans, "available", lambda extra: False)
    with pytest.raises(MissingExtraError) as info:
        plan_module(HAND)
    assert info.value.extra == "mlir"
    assert "[mlir]" in str(info.value)


# --- the command line and the service ----------------------------------------------------


def test_cli_plans_rewrites_and_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from planner.cli import main

    source = tmp_path / "hand.mlir"
    source.write_text(HAND)
    out = tmp_path / "hand.planned.mlir"
    assert main(["mlir", str(source), "-o", str(out), "--time-limit", "2"]) == 0
    err = capsys.readouterr().err
    assert "@two_phase: 4 buffers, 2816 B allocated -> arena 1024 B" in err
    assert "gpu.dynamic_shared_memory" in out.read_text()
    assert main(["mlir", "--check", str(out)]) == 0
    assert "@two_phase: valid, 4 buffers in 1024 B" in capsys.readouterr().err
    broken = tmp_path / "broken.mlir"
    broken.write_text(out.read_text().replace("gpu.barrier\n", ""))  # every barrier
    assert main(["mlir", "--check", str(broken)]) == 1
    assert "INVALID" in capsys.readouterr().err


def test_cli_bad_module_and_missing_extra_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import planner.bridges._plans as plans
    from planner.cli import main

    bad = tmp_path / "bad.mlir"
    bad.write_text("module { not.an.op }")
    assert main(["mlir", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "module: not a valid MLIR module" in err[0]
    monkeypatch.setattr(plans, "available", lambda extra: False)
    assert main(["mlir", str(bad)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "planner mlir needs the [mlir] extra" in line


def test_post_mlir(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    import planner.bridges._plans as plans
    from planner.api.bridges import _EXAMPLE_MODULE
    from tests.support.apps import threads_app

    with TestClient(threads_app()) as client:
        response = client.post("/mlir", json={"module": _EXAMPLE_MODULE, "time_limit": 2})
        assert response.status_code == 200, response.text
        body = response.json()
        (kernel,) = body["kernels"]
        assert (kernel["status"], kernel["arena_bytes"], kernel["compiler_bytes"]) == (
            "rewritten",
            256,
            512,
        )
        assert "gpu.dynamic_shared_memory" in body["module"]
        bad = client.post("/mlir", json={"module": "module { not.an.op }"})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "module"]
        spec = client.get("/openapi.json").json()
        for name in ("MlirAnswer", "MlirKernel"):
            properties = spec["components"]["schemas"][name]["properties"]
            assert all("description" in p for p in properties.values()), name
        monkeypatch.setattr(plans, "available", lambda extra: False)
        missing = client.post("/mlir", json={"module": _EXAMPLE_MODULE})
        assert missing.status_code == 501
        assert "[mlir] extra" in missing.json()["detail"][0]["msg"]


def test_batch_runs_a_folder_of_mlir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from planner.cli import main

    (tmp_path / "hand.mlir").write_text(HAND)
    (tmp_path / "left.mlir").write_text(_kernel(f"%a = memref.alloc(%n) : memref<?xf32, {WS}>"))
    (tmp_path / "bad.mlir").write_text("module { not.an.op }")
    assert main(["batch", str(tmp_path), "--emulate", "--quiet"]) == 1  # bad.mlir
    table = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:] if line.strip()}
    assert rows["hand.mlir"][1:6] == ["4", "optimal", "1024", "pass", "pass"]
    assert rows["left.mlir"][2] == "partial"
    assert rows["bad.mlir"][2:4] == ["bad", "input"]


BRANCHES = f"""
module attributes {{gpu.container_module}} {{
  gpu.module @m {{
    gpu.func @k(%out: memref<64xf32>) kernel {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %f = arith.constant 1.0 : f32
      %bid = gpu.block_id x
      %tid = gpu.thread_id x
      %even = arith.cmpi eq, %bid, %c0 : index
      scf.if %even {{
        %a = memref.alloc() : memref<256xf32, {WS}>
        memref.store %f, %a[%tid] : memref<256xf32, {WS}>
        gpu.barrier
        %x = memref.load %a[%c0] : memref<256xf32, {WS}>
        memref.store %x, %out[%c0] : memref<64xf32>
      }} else {{
        %b = memref.alloc() : memref<128xf32, {WS}>
        memref.store %f, %b[%tid] : memref<128xf32, {WS}>
        gpu.barrier
        %y = memref.load %b[%c0] : memref<128xf32, {WS}>
        memref.store %y, %out[%c0] : memref<64xf32>
      }}
      %p = memref.alloc() : memref<64xf32, {WS}>
      %q = memref.alloc() : memref<64xf32, {WS}>
      %r:2 = scf.for %i = %c0 to %c8 step %c1 iter_args(%cur = %p, %next = %q)
          -> (memref<64xf32, {WS}>, memref<64xf32, {WS}>) {{
        %v = memref.load %cur[%tid] : memref<64xf32, {WS}>
        memref.store %v, %next[%tid] : memref<64xf32, {WS}>
        gpu.barrier
        scf.yield %next, %cur : memref<64xf32, {WS}>, memref<64xf32, {WS}>
      }}
      %z = memref.load %r#0[%c0] : memref<64xf32, {WS}>
      memref.store %z, %out[%c0] : memref<64xf32>
      gpu.return
    }}
  }}
}}
"""


def test_uniform_branches_share_and_swapped_buffers_stay_apart() -> None:
    (kernel,) = plan_module(BRANCHES, time_limit=2.0).kernels
    _validated(kernel)
    request = kernel.request
    assert request is not None
    assert len(request["branches"]) == 1  # block-uniform: the arms exclude each other
    assert request["loops"][0]["trips"] == 8
    # The arms' buffers share bytes; the two swapped through iter_args are live together
    # over the loop, and the branch's bytes are free again by then.
    assert kernel.lower_bound == max(1024, 2 * 256)
    assert kernel.arena_bytes == kernel.lower_bound
    plan = kernel.plan
    assert plan is not None
    swapped = [p.offset for p in plan.placements if p.size == 256]  # %p and %q
    assert len(swapped) == 2
    assert swapped[0] != swapped[1]
    (check,) = check_module(plan_module(BRANCHES, time_limit=2.0).module)
    assert check.verdict is not None
    assert check.verdict.valid


def test_the_rewrite_survives_canonicalize_and_cse(
    iree_cuda: dict[str, tuple[str, int | None]],
) -> None:
    from iree.compiler import ir, passmanager

    module = plan_module(iree_cuda["softmax"][0], time_limit=2.0).module
    with ir.Context():
        parsed = ir.Module.parse(module)
        passmanager.PassManager.parse("builtin.module(canonicalize,cse)").run(parsed.operation)
        assert parsed.operation.verify()
        simplified = str(parsed)
    assert simplified.count(f"memref<40xi8, {WS}>") >= 1  # the arena, once allocated
    assert simplified.split("util.func")[0].count("memref.alloc") == 1
    (check,) = check_module(simplified)
    assert check.verdict is not None
    assert check.verdict.valid
    assert check.arena_bytes == 40
