"""The CUDA harness (docs/design.md, CUDA harness): a plan's kernel program run on a real GPU.

``run_program`` encodes the kernel program as a table (``validators.cuda_kernel``), and
launches the one harness kernel on it through CuPy (imported only here, the optional ``gpu``
extra): dynamic shared memory of exactly ``arena_bytes`` (with the opt-in attribute above
48 KB), many blocks, several trials, each with a fresh seed for the per-thread delays that
widen race windows. The kernel is compiled once and cached by the hash of its source; seeds,
delays and the table are kernel arguments.

A launch the device refuses (an arena over its per-block limit) is reported with both
numbers. A misaligned access or an out-of-arena buffer would leave the CUDA context
unusable, so such a program runs in a child process (``python -m validators.cuda``); so does
every launch after an unexpected CUDA error in this process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import subprocess
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from planner.validators.cuda_kernel import (
    KERNEL_NAME,
    KERNEL_SOURCE,
    MAX_RECORDS,
    RECORD_WORDS,
    ProgramTable,
    encode_program,
)
from planner.validators.interpreter import TooManyPathsError, build_programs
from planner.validators.program import (
    AffineAccess,
    KernelProgram,
    ProgramBuffer,
    Step,
)

if TYPE_CHECKING:
    from planner.core.models import Plan, PlanRequest

__all__ = [
    "GpuOptions",
    "GpuReport",
    "Mismatch",
    "check_plan",
    "gpu_available",
    "program_from_json",
    "program_to_json",
    "risky_accesses",
    "run_program",
]

_NATIVE_WIDTHS = (1, 2, 4, 8, 16)  # bytes moved by one load or store
_BLOCK_VARS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_BITMAP_LIMIT = 256 << 20  # bytes of written-bitmaps per launch, over all blocks
_STATIC_SMEM_LIMIT = 49152  # bytes; above it the kernel needs the opt-in attribute
_ATTR_SMEM_OPTIN = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin
_CUDA_ERRORS = ("CUDARuntimeError", "CUDADriverError")

GpuStatus = Literal["passed", "mismatch", "refused", "fault", "unavailable"]


@dataclass(frozen=True)
class GpuOptions:
    """How hard to try: launches, blocks per launch and the widest random delay."""

    trials: int = 4  # launches, each with a fresh seed
    blocks: int = 132  # per launch, when no access uses blockIdx (else the program's grid)
    max_delay_ns: int = 2000  # per thread and program point, uniform in [0, max]
    seed: int = 0
    isolate: bool = True  # run programs that would fault in a child process


@dataclass(frozen=True)
class Mismatch:
    """A byte whose stamp was not the one its buffer wrote."""

    buffer: str
    byte: int  # index within the buffer
    expected: int  # stamp, 0..255
    found: int
    point: int  # program point of the read
    block: int  # linear block index
    thread: int  # linear thread index


@dataclass(frozen=True)
class GpuReport:
    """What the device said about one program."""

    status: GpuStatus
    message: str
    trials: int = 0  # launches run
    mismatches: int = 0  # bytes found clobbered, over all launches
    records: tuple[Mismatch, ...] = ()
    arena_bytes: int = 0
    blocks: int = 0  # per launch

    @property
    def ok(self) -> bool:
        """Every launch ran and every checked byte held its own stamp."""
        return self.status == "passed"


# --- checks before launching -----------------------------------------------------------


def risky_accesses(program: KernelProgram) -> list[str]:
    """Why launching ``program`` would fault (and so break the CUDA context), if it would:
    buffers past the arena, and loads or stores not aligned to their width."""
    problems: list[str] = []
    for buf in program.buffers:
        if buf.offset < 0 or buf.offset + buf.size > program.arena_bytes:
            problems.append(
                f"buffer {buf.id!r} at [{buf.offset}, {buf.offset + buf.size}) lies outside "
                f"the arena of {program.arena_bytes} B"
            )
    seen: set[tuple[int, int]] = set()
    for step in program.steps:
        for a in step.accesses:
            buf = program.buffers[a.buffer]
            if (
                a.width in _NATIVE_WIDTHS
                and buf.offset % a.width
                and (a.buffer, a.width) not in seen
            ):
                seen.add((a.buffer, a.width))
                problems.append(
                    f"buffer {buf.id!r} at offset {buf.offset} is accessed {a.width} bytes at a "
                    f"time: misaligned by {buf.offset % a.width} B"
                )
    return problems


def _uses_block_index(program: KernelProgram) -> bool:
    return any(
        var in _BLOCK_VARS and coeff != 0
        for step in program.steps
        for a in step.accesses
        for var, coeff in a.coeffs
    )


def _launch_grid(program: KernelProgram, options: GpuOptions, words: int) -> tuple[int, int, int]:
    """The program's grid when accesses use blockIdx, else ``options.blocks`` in x; either
    way cut to keep the written-bitmaps within ``_BITMAP_LIMIT``."""
    cap = max(1, _BITMAP_LIMIT // (4 * max(words, 1)))
    if not _uses_block_index(program):
        return (max(1, min(options.blocks, cap)), 1, 1)
    gx, gy, gz = program.grid
    while gx * gy * gz > cap:  # fewer blocks, never an index past the program's grid
        if gz > 1:
            gz = max(1, gz // 2)
        elif gy > 1:
            gy = max(1, gy // 2)
        else:
            gx = max(1, gx // 2)
    return (gx, gy, gz)


# --- launching -------------------------------------------------------------------------

_modules: dict[str, Any] = {}  # source sha256 -> compiled kernel
_poisoned = False  # an unexpected CUDA error: launch in child processes from now on


def _cupy() -> Any:
    """CuPy, imported only when a launch needs it (the optional ``gpu`` extra)."""
    return importlib.import_module("cupy")


def gpu_available() -> bool:
    """CuPy imports and sees at least one CUDA device."""
    try:
        cupy = _cupy()
    except Exception:  # not installed, or its CUDA libraries are missing
        return False
    try:
        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # no driver or no device
        return False


def _kernel(source: str) -> Any:
    key = hashlib.sha256(source.encode()).hexdigest()
    kernel = _modules.get(key)
    if kernel is None:
        kernel = _cupy().RawModule(code=source).get_function(KERNEL_NAME)
        _modules[key] = kernel
    return kernel


def _trial_seed(seed: int, trial: int) -> int:
    digest = hashlib.sha256(f"{seed}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def check_plan(request: PlanRequest, plan: Plan, options: GpuOptions | None = None) -> GpuReport:
    """Run the kernel program of ``plan`` on the GPU (see ``run_program``): with loops and
    branches, the program of every path (``validators.interpreter``), until one fails."""
    try:
        programs = build_programs(request, plan)
    except TooManyPathsError as exc:
        return GpuReport("fault", f"cannot run this program: {exc}", arena_bytes=plan.arena_bytes)
    if len(programs) == 1:
        return run_program(programs[0], options)
    passed: list[GpuReport] = []
    for k, program in enumerate(programs):
        report = run_program(program, options)
        if not report.ok:
            where = f"path {k + 1} of {len(programs)} (a choice of branch arms): "
            return dataclasses.replace(report, message=where + report.message)
        passed.append(report)
    return dataclasses.replace(
        passed[0],
        message=f"{len(programs)} paths passed: {passed[0].message}",
        trials=sum(r.trials for r in passed),
    )


def run_program(program: KernelProgram, options: GpuOptions | None = None) -> GpuReport:
    """Launch ``program`` ``options.trials`` times; never raises for a bad plan or device."""
    options = options or GpuOptions()
    if not program.buffers or program.arena_bytes == 0:
        return GpuReport("passed", "no shared memory to check", arena_bytes=program.arena_bytes)
    if not gpu_available():
        return GpuReport("unavailable", "CuPy or a CUDA device is missing")
    problems = risky_accesses(program)
    if (problems or _poisoned) and options.isolate:
        return _run_child(program, options, problems)
    return _run_here(program, options, problems)


def _run_here(program: KernelProgram, options: GpuOptions, problems: list[str]) -> GpuReport:
    global _poisoned
    import numpy as np

    arena = program.arena_bytes
    try:
        table = encode_program(program)
    except ValueError as exc:
        return GpuReport("fault", f"cannot run this program: {exc}", arena_bytes=arena)
    try:
        cupy = _cupy()
        limit = _smem_limit(cupy)
    except Exception as exc:
        return GpuReport("unavailable", f"cannot query the device: {exc}")
    if arena > limit:
        return GpuReport(
            "refused",
            f"the device refuses {arena} B of shared memory per block: its limit is {limit} B "
            "(with the opt-in)",
            arena_bytes=arena,
        )
    grid = _launch_grid(program, options, table.bitmap_words)
    blocks = grid[0] * grid[1] * grid[2]
    try:
        kernel = _kernel(KERNEL_SOURCE)
        if arena > _STATIC_SMEM_LIMIT:
            kernel.max_dynamic_shared_size_bytes = arena
        words = cupy.asarray(np.asarray(table.words, dtype=np.int32))
        result = cupy.zeros(2 + MAX_RECORDS * RECORD_WORDS, dtype=cupy.uint32)
        written = cupy.zeros(blocks * table.bitmap_words, dtype=cupy.uint32)
        total = 0
        records: list[Mismatch] = []
        for trial in range(options.trials):
            result.fill(0)
            written.fill(0)
            args = (
                words,
                result,
                written,
                np.uint32(table.bitmap_words),
                np.uint32(_trial_seed(options.seed, trial)),
                np.uint32(options.max_delay_ns),
            )
            kernel(grid, tuple(program.block), args, shared_mem=arena)
            host = result.get()
            count = int(host[0])
            total += count
            stored = min(int(host[1]), MAX_RECORDS)
            for r in range(min(stored, MAX_RECORDS - len(records))):
                records.append(_record(program, table, host[2 + r * RECORD_WORDS :]))
            if count:
                return _mismatch_report(program, trial + 1, total, records, blocks)
    except Exception as exc:  # CUDA and compile errors, reported with the numbers
        # A fault leaves the context unusable; a refused launch or a compile error does not.
        if type(exc).__name__ in _CUDA_ERRORS and not _is_refusal(exc):
            _poisoned = True
        return _error_report(exc, program, blocks, problems)
    return GpuReport(
        "passed",
        f"{options.trials} launches of {blocks} blocks, every checked byte held its stamp",
        trials=options.trials,
        arena_bytes=arena,
        blocks=blocks,
    )


def _record(program: KernelProgram, table: ProgramTable, words: Any) -> Mismatch:
    """One mismatch record: buffer, byte, expected, found, step, block, thread."""
    b, byte, expected, found, step, block, thread = (int(x) for x in words[:RECORD_WORDS])
    return Mismatch(program.buffers[b].id, byte, expected, found, table.points[step], block, thread)


def _smem_limit(cupy: Any) -> int:
    """Bytes of dynamic shared memory one block may have on the current device (opt-in)."""
    device = cupy.cuda.Device()
    value = device.attributes.get("MaxSharedMemoryPerBlockOptin")
    if value is None:
        value = cupy.cuda.runtime.deviceGetAttribute(_ATTR_SMEM_OPTIN, device.id)
    return int(value)


def _is_refusal(exc: Exception) -> bool:
    """A launch or attribute the device turned down, which leaves the context usable."""
    text = str(exc).replace("_", "").lower()
    return "invalidvalue" in text or "outofresources" in text


def _mismatch_report(
    program: KernelProgram, trials: int, total: int, records: list[Mismatch], blocks: int
) -> GpuReport:
    first = records[0] if records else None
    detail = (
        f"; first: {first.buffer} byte {first.byte} at point {first.point} held stamp "
        f"{first.found}, expected {first.expected} (block {first.block}, thread {first.thread})"
        if first
        else ""
    )
    return GpuReport(
        "mismatch",
        f"{total} clobbered bytes in launch {trials}{detail}",
        trials=trials,
        mismatches=total,
        records=tuple(records[:MAX_RECORDS]),
        arena_bytes=program.arena_bytes,
        blocks=blocks,
    )


def _error_report(
    exc: Exception, program: KernelProgram, blocks: int, problems: list[str]
) -> GpuReport:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if _is_refusal(exc):
        return GpuReport(
            "refused",
            f"the device refused the launch with {program.arena_bytes} B of dynamic shared "
            f"memory per block: {text}",
            arena_bytes=program.arena_bytes,
            blocks=blocks,
        )
    why = f" ({'; '.join(problems)})" if problems else ""
    return GpuReport("fault", f"{text}{why}", arena_bytes=program.arena_bytes, blocks=blocks)


# --- child processes -------------------------------------------------------------------


def program_to_json(program: KernelProgram) -> str:
    """The program as JSON (for a child process)."""
    return json.dumps(dataclasses.asdict(program))


def program_from_json(text: str) -> KernelProgram:
    """The inverse of ``program_to_json``."""
    data = json.loads(text)

    def pairs(xs: list[list[Any]]) -> tuple[tuple[str, int], ...]:
        return tuple((str(v), int(c)) for v, c in xs)

    steps = tuple(
        Step(
            point=s["point"],
            barrier=s["barrier"],
            accesses=tuple(
                AffineAccess(**{**a, "coeffs": pairs(a["coeffs"]), "loops": pairs(a["loops"])})
                for a in s["accesses"]
            ),
            copies=tuple((int(i), int(k)) for i, k in s.get("copies", ())),
        )
        for s in data["steps"]
    )
    return KernelProgram(
        arena_bytes=data["arena_bytes"],
        block=tuple(data["block"]),
        grid=tuple(data["grid"]),
        buffers=tuple(ProgramBuffer(**b) for b in data["buffers"]),
        steps=steps,
        base=int(data.get("base", 0)),
    )


def _report_to_json(report: GpuReport) -> str:
    return json.dumps(dataclasses.asdict(report))


def _report_from_json(text: str) -> GpuReport:
    data = json.loads(text)
    data["records"] = tuple(Mismatch(**r) for r in data["records"])
    return GpuReport(**data)


def _run_child(program: KernelProgram, options: GpuOptions, problems: list[str]) -> GpuReport:
    payload = json.dumps(
        {"program": program_to_json(program), "options": dataclasses.asdict(options)}
    )
    why = f" ({'; '.join(problems)})" if problems else ""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "planner.validators.cuda"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return GpuReport("fault", f"the launch did not finish in 300 s{why}")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = " ".join(done.stderr.split()[-40:])
        return GpuReport("fault", f"child process exited {done.returncode}: {tail}{why}")
    report = _report_from_json(lines[-1])
    if report.status == "fault" and problems:
        return dataclasses.replace(report, message=f"{report.message}{why}")
    return report


def _child_main() -> int:
    request = json.loads(sys.stdin.read())
    program = program_from_json(request["program"])
    options = GpuOptions(**{**request["options"], "isolate": False})
    report = (
        _run_here(program, options, risky_accesses(program))
        if gpu_available()
        else (GpuReport("unavailable", "CuPy or a CUDA device is missing"))
    )
    print(_report_to_json(report))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
