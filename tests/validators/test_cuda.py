"""The CUDA harness: the kernel (the packaged ``kernel.cu``, compiled with nvcc where
installed), the table that encodes a plan's program (golden files, and read back by its
documented layout), the checks made before a launch, and, marked ``gpu``, launches on a real
device."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.validators.cuda import (
    GpuOptions,
    _error_report,
    gpu_available,
    program_from_json,
    program_to_json,
    risky_accesses,
    run_program,
)
from planner.validators.cuda_kernel import (
    ACCESS_WORDS,
    HEADER_WORDS,
    KERNEL_NAME,
    KERNEL_SOURCE,
    LOOP_WORDS,
    MAX_RECORDS,
    RECORD_WORDS,
    STEP_WORDS,
    encode_program,
    format_table,
)
from planner.validators.program import (
    AffineAccess,
    KernelProgram,
    ProgramBuffer,
    Step,
    build_program,
)
from tests.support.cuda_tables import check_table, decode, requires_gpu
from tests.support.paths import ROOT, TESTS

GOLDEN = TESTS / "golden" / "cuda"
ROOT = ROOT
EXAMPLES = ROOT / "examples"
KERNEL = ROOT / "validators" / "kernel.cu"
NVCC = shutil.which("nvcc")
requires_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

TX, TY = "threadIdx.x", "threadIdx.y"


def _synthetic(buffer: int, size: int, threads: int, rotate: int) -> tuple[AffineAccess, ...]:
    """The synthetic pattern (docs/design.md, Emulator) for a 1-D block: write ``t + i*T``,
    read ``t + rotate + i*T``."""
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


def test_kernel_source_is_the_packaged_file() -> None:
    assert KERNEL.read_text(encoding="utf-8") == KERNEL_SOURCE
    assert f'extern "C" __global__ void {KERNEL_NAME}(' in KERNEL_SOURCE


def test_kernel_defines_are_the_table_layout() -> None:
    defines = dict(re.findall(r"^#define (\w+) (\w+)$", KERNEL_SOURCE, flags=re.MULTILINE))
    layout = {
        "MAX_RECORDS": MAX_RECORDS,
        "RECORD_WORDS": RECORD_WORDS,
        "HEADER_WORDS": HEADER_WORDS,
        "STEP_WORDS": STEP_WORDS,
        "ACCESS_WORDS": ACCESS_WORDS,
        "LOOP_WORDS": LOOP_WORDS,
    }
    assert {name: int(value.rstrip("u")) for name, value in defines.items()} == layout


def test_packaging_ships_the_kernel() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    assert KERNEL.name in package_data["planner.validators"]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_table_matches_golden_file(name: str) -> None:
    program = PROGRAMS[name]()
    text = format_table(program, encode_program(program))
    path = GOLDEN / f"{name}.table"
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_table_runs_the_programs_accesses(name: str) -> None:
    check_table(PROGRAMS[name]())


@pytest.mark.parametrize("path", request_files(EXAMPLES), ids=lambda p: p.name)
def test_example_programs_encode(path: Path) -> None:
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    check_table(build_program(request, plan))


def test_bitmaps_start_each_buffer_on_a_word() -> None:
    table = encode_program(widths())
    # 2048 B -> 64 words, 192 B -> 6 words, 1024 B -> 32 words
    assert table.bitmap_words == 102
    bases = [row[4] for _, _, rows in decode(table.words) for row in rows]
    assert set(bases) == {0, 64 * 32, 70 * 32}


def test_values_past_32_bits_are_refused() -> None:
    program = two_phase()
    huge = dataclasses.replace(
        program,
        buffers=(*program.buffers[:2], ProgramBuffer("c", 1 << 31, 32, 2, 6, synthetic=True)),
    )
    with pytest.raises(ValueError, match="does not fit the kernel's 32-bit table"):
        encode_program(huge)


@requires_nvcc
def test_kernel_compiles_without_warnings(tmp_path: Path) -> None:
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
            str(KERNEL),
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


class CUDADriverError(Exception):
    """Stands in for CuPy's exception of the same name (matched by name)."""


@pytest.mark.parametrize(
    ("message", "refused"),
    [
        ("CUDA_ERROR_INVALID_VALUE: invalid argument", True),
        ("cudaErrorInvalidValue: invalid argument", True),
        ("CUDA_ERROR_OUT_OF_RESOURCES: too many resources requested for launch", True),
        ("cudaErrorMisalignedAddress: misaligned address", False),
    ],
)
def test_refused_launches_are_told_from_faults(message: str, refused: bool) -> None:
    report = _error_report(CUDADriverError(message), two_phase(), 8, [])
    assert report.status == ("refused" if refused else "fault")
    assert message in report.message
    if refused:
        assert "96 B of dynamic shared memory" in report.message
