"""The CUDA kernel of the GPU harness (``kernel.cu``), and the table that tells it what a
plan's program does.

One kernel runs every plan: the kernel program (``validators.program``) is encoded as a
table of 32-bit integers that the kernel walks, step by step. So the kernel is compiled once
per device (CuPy caches it on disk too) and a batch of plans costs one table upload and a
few launches each, instead of a compile per plan.

What the kernel does at each step, for every thread: ``__syncthreads()`` if the step has a
barrier (every thread reads the same table, so the branch is uniform and the barrier legal),
a random delay, then the step's writes and its reads, element by element. A write stores a
stamp in each byte (8 bits of a hash of the buffer and the byte's index in it) and then marks
the byte written in the block's bitmap in global memory; a read loads the bitmap first and
the stamps after (a block fence orders both sides) and counts each byte its buffer has
written that holds another stamp: a byte another buffer clobbered. A byte the buffer has not
written yet is not checked, as in the emulator. Loads and stores have the element's width
(1, 2, 4, 8 or 16 bytes at once; other widths byte by byte), so a misaligned offset faults as
it would in the compiled kernel.

Table layout (all ``int32``)::

    header   steps, first access word, first loop word, words in all
    step     point index (the report maps it back), barrier, first access, accesses
    access   buffer, op (0 write, 1 read), width, arena offset, bitmap base, elements,
             broadcast, coefficients of threadIdx.x/y/z and blockIdx.x/y/z, constant,
             first loop, loops
    loop     coefficient, extent    (only loops whose variable is in the index)

Element ``e`` of an access is ``sum(coeff * var) + constant`` over the loops' odometer (the
first loop varies fastest); elements outside ``[0, elements)`` are skipped (the guarded
synthetic pattern; a validated request never has others).

A request with loops and branches comes as one straight-line program per path of its control
flow (``validators.interpreter``): the loop bodies repeated, the arms not taken left out, and
each iteration of a buffer range a buffer of its own, so its stamps and written-bitmap are its
own and a read of one iteration never trusts a write of another.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files

from planner.validators.program import AffineAccess, KernelProgram

__all__ = [
    "ACCESS_WORDS",
    "HEADER_WORDS",
    "KERNEL_NAME",
    "KERNEL_SOURCE",
    "LOOP_WORDS",
    "MAX_RECORDS",
    "RECORD_WORDS",
    "STEP_WORDS",
    "ProgramTable",
    "encode_program",
    "format_table",
]

KERNEL_NAME = "alloc_check"
MAX_RECORDS = 16  # mismatches recorded in full per launch; all are counted
RECORD_WORDS = 7  # buffer, byte, expected, found, step, block, thread
HEADER_WORDS = 4
STEP_WORDS = 4
ACCESS_WORDS = 16
LOOP_WORDS = 2
_VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y", "blockIdx.z")
_INT32 = (-(1 << 31), (1 << 31) - 1)

# The kernel ships as a file of its own beside this module, so that it reads, diffs and
# compiles (nvcc) as CUDA; its #defines are the layout constants above.
KERNEL_SOURCE = (files("planner.validators") / "kernel.cu").read_text(encoding="utf-8")


@dataclass(frozen=True)
class ProgramTable:
    """A kernel program encoded for the kernel, and the sizes a launch needs."""

    words: tuple[int, ...]  # int32 values
    bitmap_words: int  # 32-bit words of written-bitmap per block
    points: tuple[int, ...]  # program point of each step (reports name points, not steps)


def _int32(value: int, what: str) -> int:
    if not _INT32[0] <= value <= _INT32[1]:
        raise ValueError(f"{what} {value} does not fit the kernel's 32-bit table")
    return value


def _access_words(
    program: KernelProgram, access: AffineAccess, bitbase: int, loops: list[int]
) -> list[int]:
    buf = program.buffers[access.buffer]
    n = buf.size // access.width  # elements
    coeffs = dict(access.coeffs)
    extents = dict(access.loops)
    for var in coeffs:
        if var not in _VARS and var not in extents:
            raise ValueError(f"index variable {var!r} of buffer {buf.id!r} has no loop extent")
    first = len(loops) // LOOP_WORDS
    used = [(var, extent) for var, extent in access.loops if coeffs.get(var, 0) != 0]
    iterations = 1
    for var, extent in used:
        loops += [_int32(coeffs[var], f"coefficient of {var!r}"), _int32(extent, "extent")]
        iterations *= extent
    _int32(iterations, f"iterations of an access of {buf.id!r}")
    words = [
        access.buffer,
        0 if access.op == "write" else 1,
        access.width,
        buf.offset,
        bitbase,
        n,
        int(access.broadcast),
        *(coeffs.get(var, 0) for var in _VARS),
        access.constant,
        first,
        len(used),
    ]
    return [_int32(w, f"table value of buffer {buf.id!r}") for w in words]


def encode_program(program: KernelProgram) -> ProgramTable:
    """The table the kernel runs; raises ValueError for a program it cannot hold."""
    bases: list[int] = []
    bitmap_words = 0
    for buf in program.buffers:
        bases.append(bitmap_words * 32)  # each buffer starts a bitmap word
        bitmap_words += -(-buf.size // 32)
    steps: list[int] = []
    accesses: list[int] = []
    loops: list[int] = []
    for k, step in enumerate(program.steps):
        # A thread's writes at a point come before its reads there (program order).
        ordered = [a for a in step.accesses if a.op == "write"]
        ordered += [a for a in step.accesses if a.op == "read"]
        steps += [k, int(step.barrier), len(accesses) // ACCESS_WORDS, len(ordered)]
        for access in ordered:
            accesses += _access_words(program, access, bases[access.buffer], loops)
    access_at = HEADER_WORDS + len(steps)
    loop_at = access_at + len(accesses)
    total = loop_at + len(loops)
    header = [len(program.steps), access_at, loop_at, total]
    return ProgramTable(
        words=tuple(header + steps + accesses + loops),
        bitmap_words=max(bitmap_words, 1),
        points=tuple(step.point for step in program.steps),
    )


def format_table(program: KernelProgram, table: ProgramTable) -> str:
    """The table as text, one row per step, access and loop (for review and golden files)."""
    w = table.words
    steps, access_at, loop_at, total = w[:HEADER_WORDS]
    lines = [
        f"header: steps {steps}, accesses at {access_at}, loops at {loop_at}, {total} words; "
        f"bitmap {table.bitmap_words} words per block"
    ]
    for s in range(steps):
        row = w[HEADER_WORDS + STEP_WORDS * s : HEADER_WORDS + STEP_WORDS * (s + 1)]
        barrier = " barrier" if row[1] else ""
        lines.append(
            f"step {row[0]} (point {program.steps[s].label}){barrier}: accesses {row[2]}..+{row[3]}"
        )
    for a in range((loop_at - access_at) // ACCESS_WORDS):
        row = w[access_at + ACCESS_WORDS * a : access_at + ACCESS_WORDS * (a + 1)]
        name = program.buffers[row[0]].id
        op = "write" if row[1] == 0 else "read"
        terms = " ".join(f"{c:+d}*{v}" for v, c in zip(_VARS, row[7:13], strict=True) if c)
        shape = "broadcast" if row[6] else f"e = {terms} {row[13]:+d}".replace("  ", " ")
        lines.append(
            f"access {a}: {op} {name} (buffer {row[0]}), width {row[2]}, arena offset {row[3]}, "
            f"bitmap bit {row[4]}, {row[5]} elements, {shape}, loops {row[14]}..+{row[15]}"
        )
    for k in range((total - loop_at) // LOOP_WORDS):
        coeff, extent = w[loop_at + LOOP_WORDS * k : loop_at + LOOP_WORDS * (k + 1)]
        lines.append(f"loop {k}: coefficient {coeff}, extent {extent}")
    return "\n".join(lines) + "\n"
