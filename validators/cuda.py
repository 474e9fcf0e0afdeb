"""The CUDA harness (DESIGN section 6): a plan's kernel program run on a real GPU.

``cuda_source(program)`` turns the kernel program into the source of one CUDA kernel; it is
a pure function, so it runs and is tested on any machine. ``run_program`` compiles it
through CuPy (imported only there) and launches it: dynamic shared memory of exactly
``arena_bytes`` (with the opt-in attribute above 48 KB), many blocks, several trials, each
with a fresh seed for the per-thread delays that widen race windows.

What the kernel does at each program point, for every thread: ``__syncthreads()`` if the
program puts a barrier there, a random delay, then its writes and its reads. A write stores
a stamp in each byte (8 bits of a hash of the buffer and the byte's index in it) and then
marks the byte written in a per-block bitmap in global memory; a read loads the bitmap
first and the stamps after (a block fence orders both sides), and counts a byte whose bit
is set but whose stamp is not its own: a byte another buffer clobbered. A byte the buffer
has not written yet is not checked, as in the emulator. Accesses use the element's real
width (1, 2, 4, 8 or 16 bytes: one load or store; other widths byte by byte), so a
misaligned offset faults as it would in the compiled kernel.

A misaligned access or an out-of-arena buffer would leave the CUDA context unusable, so
such a program runs in a child process (``python -m validators.cuda``); so does every launch
after an unexpected CUDA error in this process.
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

from validators.program import AffineAccess, KernelProgram, ProgramBuffer, Step, build_program

if TYPE_CHECKING:
    from planner.models import Plan, PlanRequest

__all__ = [
    "KERNEL_NAME",
    "MAX_RECORDS",
    "GpuOptions",
    "GpuReport",
    "Mismatch",
    "check_plan",
    "cuda_source",
    "gpu_available",
    "program_from_json",
    "program_to_json",
    "risky_accesses",
    "run_program",
]

KERNEL_NAME = "alloc_check"
MAX_RECORDS = 16  # mismatches recorded in full per launch; all are counted
_RECORD_WORDS = 7  # buffer, byte, expected, found, point, block, thread
_NATIVE_WIDTHS = (1, 2, 4, 8, 16)  # bytes moved by one load or store
_THREAD_VARS = {"threadIdx.x": "tx", "threadIdx.y": "ty", "threadIdx.z": "tz"}
_BLOCK_VARS = {"blockIdx.x": "bx", "blockIdx.y": "by", "blockIdx.z": "bz"}
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


# --- code generation -------------------------------------------------------------------

_PRELUDE = """\
// Stamp of byte k of buffer b: 8 bits of a hash of (b, k).
__device__ __forceinline__ unsigned int mix32(unsigned int x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

__device__ __forceinline__ unsigned int stamp8(unsigned int b, unsigned int k) {
    return mix32(b * 0x9e3779b9u + k) & 0xffu;
}

// Stamps of the n <= 4 bytes from k, little-endian.
__device__ __forceinline__ unsigned int stamps(unsigned int b, unsigned int k, unsigned int n) {
    unsigned int v = 0u;
    for (unsigned int j = 0u; j < n; ++j) v |= stamp8(b, k + j) << (8u * j);
    return v;
}

__device__ __forceinline__ void delay(unsigned int seed, unsigned int step, unsigned int blk,
                                      unsigned int t, unsigned int max_ns) {
    if (max_ns == 0u) return;
    const unsigned int h = mix32(seed ^ mix32(step * 0x9e3779b9u ^ mix32(blk * 0x85ebca6bu ^ t)));
    __nanosleep(h % (max_ns + 1u));
}

// Bits [k, k + n) of a written-bitmap.
__device__ __forceinline__ void mark_written(unsigned int* bits, unsigned int k, unsigned int n) {
    const unsigned int stop = k + n;
    while (k < stop) {
        const unsigned int bit = k & 31u;
        const unsigned int run = min(32u - bit, stop - k);
        const unsigned int mask = run == 32u ? 0xffffffffu : ((1u << run) - 1u) << bit;
        atomicOr(bits + (k >> 5), mask);
        k += run;
    }
}

__device__ __forceinline__ bool is_written(const unsigned int* bits, unsigned int k) {
    return (((const volatile unsigned int*)bits)[k >> 5] >> (k & 31u)) & 1u;
}

__device__ void report(unsigned int* result, unsigned int b, unsigned int k, unsigned int expected,
                       unsigned int found, unsigned int point, unsigned int blk, unsigned int t) {
    atomicAdd(result, 1u);
    const unsigned int slot = atomicAdd(result + 1, 1u);
    if (slot < MAX_RECORDS) {
        unsigned int* r = result + 2 + slot * RECORD_WORDS;
        r[0] = b; r[1] = k; r[2] = expected; r[3] = found; r[4] = point; r[5] = blk; r[6] = t;
    }
}

// Element e (w bytes) of buffer b at arena byte `offset`: stamps in, then the written bits.
__device__ __forceinline__ void write_elem(unsigned char* arena, unsigned int* bits,
                                           unsigned int b, unsigned int offset,
                                           unsigned int bitbase, unsigned int e, unsigned int w) {
    const unsigned int k = e * w;
    unsigned char* p = arena + offset + k;
    if (w == 1u) {
        *(volatile unsigned char*)p = (unsigned char)stamp8(b, k);
    } else if (w == 2u) {
        *(volatile unsigned short*)p = (unsigned short)stamps(b, k, 2u);
    } else if (w == 4u) {
        *(volatile unsigned int*)p = stamps(b, k, 4u);
    } else if (w == 8u) {
        const unsigned long long hi = stamps(b, k + 4u, 4u);
        *(volatile unsigned long long*)p = (unsigned long long)stamps(b, k, 4u) | (hi << 32);
    } else if (w == 16u) {
        const unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
        asm volatile("st.volatile.shared.v4.u32 [%0], {%1, %2, %3, %4};"
                     :: "r"(a), "r"(stamps(b, k, 4u)), "r"(stamps(b, k + 4u, 4u)),
                        "r"(stamps(b, k + 8u, 4u)), "r"(stamps(b, k + 12u, 4u)) : "memory");
    } else {
        for (unsigned int j = 0u; j < w; ++j) {
            ((volatile unsigned char*)p)[j] = (unsigned char)stamp8(b, k + j);
        }
    }
    __threadfence_block();  // the stamps before the bits that say they are there
    mark_written(bits, bitbase + k, w);
}

// Check element e (w bytes) of buffer b: every byte it has written must hold its stamp.
__device__ __forceinline__ void read_elem(const unsigned char* arena, const unsigned int* bits,
                                          unsigned int* result, unsigned int b,
                                          unsigned int offset, unsigned int bitbase, unsigned int e,
                                          unsigned int w, unsigned int point, unsigned int blk,
                                          unsigned int t) {
    const unsigned int k = e * w;
    const unsigned char* p = arena + offset + k;
    if (w <= 16u && (w & (w - 1u)) == 0u) {
        unsigned int written = 0u;
        for (unsigned int j = 0u; j < w; ++j) {
            written |= (unsigned int)is_written(bits, bitbase + k + j) << j;
        }
        __threadfence_block();  // the bits before the stamps they vouch for
        unsigned int v[4] = {0u, 0u, 0u, 0u};
        if (w == 1u) {
            v[0] = *(const volatile unsigned char*)p;
        } else if (w == 2u) {
            v[0] = *(const volatile unsigned short*)p;
        } else if (w == 4u) {
            v[0] = *(const volatile unsigned int*)p;
        } else if (w == 8u) {
            const unsigned long long x = *(const volatile unsigned long long*)p;
            v[0] = (unsigned int)x; v[1] = (unsigned int)(x >> 32);
        } else {
            const unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
            asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a) : "memory");
        }
        for (unsigned int j = 0u; j < w; ++j) {
            const unsigned int found = (v[j >> 2] >> (8u * (j & 3u))) & 0xffu;
            const unsigned int expected = stamp8(b, k + j);
            if (((written >> j) & 1u) && found != expected) {
                report(result, b, k + j, expected, found, point, blk, t);
            }
        }
    } else {
        for (unsigned int j = 0u; j < w; ++j) {
            if (!is_written(bits, bitbase + k + j)) continue;
            __threadfence_block();
            const unsigned int found = ((const volatile unsigned char*)p)[j];
            const unsigned int expected = stamp8(b, k + j);
            if (found != expected) report(result, b, k + j, expected, found, point, blk, t);
        }
    }
}
"""

_SIGNATURE = """\
extern "C" __global__ void {name}(unsigned int* __restrict__ result,
                                   unsigned int* __restrict__ written,
                                   unsigned int seed, unsigned int max_delay_ns) {{
    extern __shared__ __align__(16) unsigned char arena[];
    const unsigned int t = threadIdx.x + threadIdx.y * {bx}u + threadIdx.z * {bxy}u;
    const unsigned int blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int* const bits = written + (unsigned long long)blk * BITMAP_WORDS;
"""


def _index_declarations(program: KernelProgram) -> list[str]:
    """``const int tx = (int)threadIdx.x;`` and the like, for the variables accesses use."""
    used = {
        var
        for step in program.steps
        for a in step.accesses
        if not a.broadcast
        for var, coeff in a.coeffs
        if coeff != 0
    }
    return [
        f"    const int {name} = (int){var};"
        for var, name in (_THREAD_VARS | _BLOCK_VARS).items()
        if var in used
    ]


def _bitmap_bases(program: KernelProgram) -> tuple[list[int], int]:
    """Each buffer's first bit in a block's written-bitmap (word-aligned), and its words."""
    bases: list[int] = []
    words = 0
    for buf in program.buffers:
        bases.append(words * 32)
        words += -(-buf.size // 32)
    return bases, words


def _c_ident(text: str) -> str:
    """``text`` made safe for a C comment: no line breaks or comment ends."""
    return text.replace("*/", "* /").replace("\n", " ").replace("\r", " ")


def _index_expr(access: AffineAccess, loop_names: dict[str, str]) -> str:
    """``sum(coeff * var) + constant`` in C, e.g. ``tx + 128 * l0 - 1``."""
    terms: list[tuple[int, str]] = []  # (coefficient, name); name "" for the constant
    for var, coeff in access.coeffs:
        if coeff != 0:
            terms.append((coeff, _THREAD_VARS.get(var) or _BLOCK_VARS.get(var) or loop_names[var]))
    if access.constant or not terms:
        terms.append((access.constant, ""))
    text = ""
    for k, (coeff, name) in enumerate(terms):
        size = abs(coeff)
        term = name if size == 1 and name else f"{size} * {name}" if name else str(size)
        sign = ("-" if coeff < 0 else "") if k == 0 else (" - " if coeff < 0 else " + ")
        text += sign + term
    return text


def _access_lines(
    program: KernelProgram, access: AffineAccess, bitbase: int, point: int
) -> list[str]:
    buf = program.buffers[access.buffer]
    w = access.width
    n = buf.size // w  # elements
    head = f"// {access.op} {_c_ident(buf.id)}: {n} elements of {w} B at arena byte {buf.offset}"
    where = f"{access.buffer}u, {buf.offset}u, {bitbase}u, (unsigned int)e, {w}u"
    if access.op == "write":
        call = f"write_elem(arena, bits, {where});"
    else:
        call = f"read_elem(arena, bits, result, {where}, {point}u, blk, t);"
    if access.broadcast:
        # Every thread touches every element, each starting at its own to spread the banks.
        body = [
            f"for (int j = 0; j < {n}; ++j) {{",
            f"    const int e = (j + (int)t) % {n};",
            f"    {call}",
            "}",
        ]
        return [head, *body]
    used = {var for var, coeff in access.coeffs if coeff != 0}
    # A loop whose variable is not in the index repeats the same access: run it once.
    loops = [(var, extent) for var, extent in access.loops if var in used]
    loop_names = {var: f"l{k}" for k, (var, _) in enumerate(loops)}
    lines = [head]
    indent = ""
    for var, extent in loops:
        name = loop_names[var]
        loop = f"for (int {name} = 0; {name} < {extent}; ++{name}) {{"
        lines.append(f"{indent}{loop}  // {_c_ident(var)}")
        indent += "    "
    lines.append(f"{indent}const int e = {_index_expr(access, loop_names)};")
    if access.guarded:
        lines.append(f"{indent}if (e >= 0 && e < {n}) {call}")
    else:
        lines.append(f"{indent}{call}")
    for _ in loops:
        indent = indent[:-4]
        lines.append(f"{indent}}}")
    return lines


def _step_lines(program: KernelProgram, k: int, step: Step, bases: list[int]) -> list[str]:
    lines = [f"// point {step.point}{' (barrier)' if step.barrier else ''}"]
    if step.barrier:
        lines.append("__syncthreads();")
    if not step.accesses:
        return lines
    lines.append(f"delay(seed, {k}u, blk, t, max_delay_ns);")
    # A thread's writes at a point come before its reads there (program order).
    ordered = [a for a in step.accesses if a.op == "write"] + [
        a for a in step.accesses if a.op == "read"
    ]
    for access in ordered:
        body = _access_lines(program, access, bases[access.buffer], step.point)
        lines.append("{")
        lines.extend(f"    {line}" for line in body)
        lines.append("}")
    return lines


def cuda_source(program: KernelProgram, *, name: str = KERNEL_NAME) -> str:
    """The CUDA source of the kernel that runs ``program``; no CUDA needed to build it.

    Parameters (seed, delays) are kernel arguments, so equal programs give equal sources
    and a compiled module serves every trial and every plan with the same layout.
    """
    bases, words = _bitmap_bases(program)
    bx, by, bz = program.block
    buffers = "\n".join(
        f"//   {k}: {_c_ident(b.id)} [{b.offset}, {b.offset + b.size}) on [{b.start}, {b.end})"
        + (" synthetic" if b.synthetic else "")
        for k, b in enumerate(program.buffers)
    )
    out = [
        "// Generated by alloc-planner: the kernel program of one plan, checked byte by byte.",
        f"// arena {program.arena_bytes} B, block ({bx}, {by}, {bz});"
        " buffers: arena bytes on program points",
        buffers or "//   (none)",
        f"#define MAX_RECORDS {MAX_RECORDS}u",
        f"#define RECORD_WORDS {_RECORD_WORDS}u",
        f"#define BITMAP_WORDS {max(words, 1)}u",
        "",
        _PRELUDE,
        _SIGNATURE.format(name=name, bx=bx, bxy=bx * by).rstrip("\n"),
        *_index_declarations(program),
    ]
    for k, step in enumerate(program.steps):
        out.extend(f"    {line}" for line in _step_lines(program, k, step, bases))
    out.append("}")
    return "\n".join(out) + "\n"


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
    """Run the kernel program of ``plan`` on the GPU (see ``run_program``)."""
    return run_program(build_program(request, plan), options)


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

    cupy = _cupy()

    arena = program.arena_bytes
    try:
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
    bases, words = _bitmap_bases(program)
    del bases
    grid = _launch_grid(program, options, words)
    blocks = grid[0] * grid[1] * grid[2]
    try:
        kernel = _kernel(cuda_source(program))
        if arena > _STATIC_SMEM_LIMIT:
            kernel.max_dynamic_shared_size_bytes = arena
        result = cupy.zeros(2 + MAX_RECORDS * _RECORD_WORDS, dtype=cupy.uint32)
        written = cupy.zeros(blocks * max(words, 1), dtype=cupy.uint32)
        total = 0
        records: list[Mismatch] = []
        for trial in range(options.trials):
            result.fill(0)
            written.fill(0)
            kernel(
                grid,
                tuple(program.block),
                (
                    result,
                    written,
                    np.uint32(_trial_seed(options.seed, trial)),
                    np.uint32(options.max_delay_ns),
                ),
                shared_mem=arena,
            )
            host = result.get()
            count = int(host[0])
            total += count
            stored = min(int(host[1]), MAX_RECORDS)
            for r in range(min(stored, MAX_RECORDS - len(records))):
                rec = host[2 + r * _RECORD_WORDS : 2 + (r + 1) * _RECORD_WORDS].tolist()
                records.append(Mismatch(program.buffers[rec[0]].id, *(int(x) for x in rec[1:])))
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


def _smem_limit(cupy: Any) -> int:
    """Bytes of dynamic shared memory one block may have on the current device (opt-in)."""
    device = cupy.cuda.Device()
    value = device.attributes.get("MaxSharedMemoryPerBlockOptin")
    if value is None:
        value = cupy.cuda.runtime.deviceGetAttribute(_ATTR_SMEM_OPTIN, device.id)
    return int(value)


def _is_refusal(exc: Exception) -> bool:
    text = str(exc)
    return "INVALID_VALUE" in text or "OUT_OF_RESOURCES" in text


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
        )
        for s in data["steps"]
    )
    return KernelProgram(
        arena_bytes=data["arena_bytes"],
        block=tuple(data["block"]),
        grid=tuple(data["grid"]),
        buffers=tuple(ProgramBuffer(**b) for b in data["buffers"]),
        steps=steps,
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
            [sys.executable, "-m", "validators.cuda"],
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
