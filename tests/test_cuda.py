"""The CUDA harness: generated source (golden files, compiled with nvcc where installed),
the checks made before a launch, and, marked ``gpu``, launches on a real device."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import planner
from planner.io import parse_request
from validators.cuda import (
    GpuOptions,
    cuda_source,
    gpu_available,
    program_from_json,
    program_to_json,
    risky_accesses,
    run_program,
)
from validators.program import AffineAccess, KernelProgram, ProgramBuffer, Step, build_program

GOLDEN = Path(__file__).resolve().parent / "golden" / "cuda"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NVCC = shutil.which("nvcc")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
requires_gpu = pytest.mark.skipif(not gpu_available(), reason="CuPy or a CUDA device is missing")

TX, TY = "threadIdx.x", "threadIdx.y"


def _synthetic(buffer: int, size: int, threads: int, rotate: int) -> tuple[AffineAccess, ...]:
    """DESIGN section 6's pattern for a 1-D block: write ``t + i*T``, read ``t + rotate + i*T``."""
    n = size // 4
    coeffs = ((TX, 1), ("i", threads))
    loops = (("i", -(-n // threads)),)
    return (
        AffineAccess(buffer, "write", 4, coeffs, loops, 0, guarded=True),
        AffineAccess(buffer, "read", 4, coeffs, loops, rotate, guarded=True),
    )


def two_phase() -> KernelProgram:
    """``a`` and ``b`` share bytes [0, 64) across the barrier at 4; ``c`` lives beside both."""
    wa, ra = _synthetic(0, 64, 8, 1)
    wb, rb = _synthetic(1, 64, 8, 1)
    wc, rc = _synthetic(2, 32, 8, 1)
    return KernelProgram(
        arena_bytes=96,
        block=(8, 1, 1),
        grid=(1, 1, 1),
        buffers=(
            ProgramBuffer("a", 0, 64, 0, 4, synthetic=True),
            ProgramBuffer("b", 0, 64, 4, 8, synthetic=True),
            ProgramBuffer("c", 64, 32, 2, 6, synthetic=True),
        ),
        steps=(
            Step(0, False, (wa,)),
            Step(2, False, (wc,)),
            Step(3, False, (ra,)),
            Step(4, True, (wb,)),
            Step(5, False, (rc,)),
            Step(7, False, (rb,)),
        ),
    )


def widths() -> KernelProgram:
    """Every kind of access: 16-byte stores over a 2-D block, a broadcast read, a 3-byte
    element, a negative coefficient, blockIdx, a loop the index does not use, a barrier
    with no access, and a buffer id that needs escaping in a comment."""
    return KernelProgram(
        arena_bytes=4096,
        block=(16, 4, 1),
        grid=(8, 1, 1),
        buffers=(
            ProgramBuffer("tile*/", 0, 2048, 0, 3, synthetic=False),
            ProgramBuffer("odd", 2048, 192, 1, 4, synthetic=False),
            ProgramBuffer("per_block", 2304, 1024, 3, 6, synthetic=False),
        ),
        steps=(
            Step(
                0,
                False,
                (AffineAccess(0, "write", 16, ((TX, 1), (TY, 16), ("k", 64)), (("k", 2),), 0),),
            ),
            Step(
                1,
                True,
                (
                    AffineAccess(0, "read", 2, (), (), 0, broadcast=True),
                    AffineAccess(1, "write", 3, ((TX, -1), (TY, 16)), (("unused", 9),), 15),
                ),
            ),
            Step(2, True, ()),
            Step(
                3,
                False,
                (
                    AffineAccess(1, "read", 3, ((TX, -1), (TY, 16)), (), 15),
                    AffineAccess(2, "write", 4, ((TX, 1), (TY, 16), ("blockIdx.x", 16)), (), 0),
                ),
            ),
            Step(5, True, (AffineAccess(2, "read", 8, ((TX, 1), ("blockIdx.x", 16)), (), 0),)),
        ),
    )


PROGRAMS = {"two_phase": two_phase, "widths": widths}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_source_matches_golden_file(name: str) -> None:
    source = cuda_source(PROGRAMS[name]())
    path = GOLDEN / f"{name}.cu"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(source)
    assert source == path.read_text()


def test_source_is_a_pure_function_of_the_program() -> None:
    assert cuda_source(two_phase()) == cuda_source(two_phase())
    moved = dataclasses.replace(
        two_phase(),
        buffers=(*two_phase().buffers[:2], ProgramBuffer("c", 80, 32, 2, 6, synthetic=True)),
    )
    assert cuda_source(moved) != cuda_source(two_phase())
    assert "write_elem(arena, bits, 2u, 80u," in cuda_source(moved)


def test_barriers_are_exactly_the_programs() -> None:
    for make in PROGRAMS.values():
        program = make()
        source = cuda_source(program)
        assert source.count("__syncthreads();") == sum(s.barrier for s in program.steps)


def test_opt_in_sized_arena_is_in_no_source() -> None:
    """The arena size is a launch parameter, not source: one module serves every arena."""
    program = two_phase()
    bigger = dataclasses.replace(program, arena_bytes=65536)
    assert cuda_source(bigger).replace("65536", "96") == cuda_source(program)


@requires_nvcc
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_golden_source_compiles(name: str, tmp_path: Path) -> None:
    _compile(GOLDEN / f"{name}.cu", tmp_path)


@requires_nvcc
@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_example_programs_compile(path: Path, tmp_path: Path) -> None:
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    if plan.status == "infeasible":
        pytest.skip("no placements to run")
    src = tmp_path / "k.cu"
    src.write_text(cuda_source(build_program(request, plan)))
    _compile(src, tmp_path)


def _compile(source: Path, tmp_path: Path) -> None:
    assert NVCC is not None
    done = subprocess.run(
        [
            NVCC,
            "-arch=sm_90",
            "-cubin",
            "-Werror",
            "all-warnings",
            "-o",
            str(tmp_path / "k.cubin"),
            str(source),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_risky_accesses_name_misaligned_and_outside_buffers() -> None:
    program = two_phase()
    assert risky_accesses(program) == []
    shifted = dataclasses.replace(
        program,
        buffers=(*program.buffers[:2], ProgramBuffer("c", 66, 32, 2, 6, synthetic=True)),
    )
    problems = risky_accesses(shifted)
    assert problems == [
        "buffer 'c' at [66, 98) lies outside the arena of 96 B",
        "buffer 'c' at offset 66 is accessed 4 bytes at a time: misaligned by 2 B",
    ]


def test_program_json_round_trip() -> None:
    for make in PROGRAMS.values():
        program = make()
        assert program_from_json(program_to_json(program)) == program


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_without_a_gpu_the_harness_says_so() -> None:
    report = run_program(two_phase())
    assert report.status == "unavailable"
    assert not report.ok


# --- on a GPU --------------------------------------------------------------------------

FAST = GpuOptions(trials=4, blocks=64)


@pytest.mark.gpu
@requires_gpu
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_gpu_passes_correct_programs(name: str) -> None:
    report = run_program(PROGRAMS[name](), FAST)
    assert report.ok, report.message
    assert report.trials == FAST.trials


@pytest.mark.gpu
@requires_gpu
def test_gpu_sees_an_overlap() -> None:
    program = two_phase()
    # c on top of a while both are live: a's read at 3 finds c's stamps from point 2.
    clash = dataclasses.replace(
        program,
        buffers=(*program.buffers[:2], ProgramBuffer("c", 0, 32, 2, 6, synthetic=True)),
    )
    report = run_program(clash, FAST)
    assert report.status == "mismatch", report.message
    assert report.records
    assert {r.buffer for r in report.records} <= {"a", "b", "c"}


@pytest.mark.gpu
@requires_gpu
def test_gpu_sees_a_dropped_barrier() -> None:
    program = two_phase()
    steps = tuple(dataclasses.replace(s, barrier=False) for s in program.steps)
    report = run_program(dataclasses.replace(program, steps=steps), GpuOptions(trials=16))
    assert report.status == "mismatch", report.message


@pytest.mark.gpu
@requires_gpu
def test_gpu_faults_on_a_misaligned_offset() -> None:
    program = two_phase()
    shifted = dataclasses.replace(
        program,
        arena_bytes=100,
        buffers=(*program.buffers[:2], ProgramBuffer("c", 66, 32, 2, 6, synthetic=True)),
    )
    report = run_program(shifted, FAST)
    assert report.status == "fault", report.message
    assert "misaligned" in report.message
    assert run_program(program, FAST).ok  # this process's context is still usable


@pytest.mark.gpu
@requires_gpu
def test_gpu_refuses_an_arena_over_the_device_limit() -> None:
    program = dataclasses.replace(two_phase(), arena_bytes=1 << 20)
    report = run_program(program, FAST)
    assert report.status == "refused"
    assert str(1 << 20) in report.message
