"""Reading the CUDA harness's table back by its documented layout, and checking that it runs
exactly the accesses of the kernel program it encodes (for the harness tests); the mark of
the tests that launch it on a device."""

from __future__ import annotations

import itertools

import pytest

from planner.validators.cuda import gpu_available
from planner.validators.cuda_kernel import (
    ACCESS_WORDS,
    HEADER_WORDS,
    LOOP_WORDS,
    STEP_WORDS,
    encode_program,
)
from planner.validators.program import AffineAccess, KernelProgram

__all__ = ["check_table", "decode", "requires_gpu"]

# A launch needs CuPy and a CUDA device; without them the test says so and skips.
requires_gpu = pytest.mark.skipif(not gpu_available(), reason="CuPy or a CUDA device is missing")

VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y", "blockIdx.z")


def decode(words: tuple[int, ...]) -> list[tuple[int, bool, list[list[int]]]]:
    """The table read back by its documented layout: per step, (point index, barrier,
    access rows each followed by its (coefficient, extent) loop pairs)."""
    steps, access_at, loop_at, total = words[:HEADER_WORDS]
    assert total == len(words)
    out = []
    for s in range(steps):
        point, barrier, first, count = words[HEADER_WORDS + STEP_WORDS * s :][:STEP_WORDS]
        rows = []
        for a in range(first, first + count):
            row = list(words[access_at + ACCESS_WORDS * a :][:ACCESS_WORDS])
            loops = words[loop_at + LOOP_WORDS * row[14] :][: LOOP_WORDS * row[15]]
            rows.append(row + list(loops))
        out.append((point, bool(barrier), rows))
    return out


def _table_elements(row: list[int], thread: tuple[int, ...], block: tuple[int, ...]) -> set[int]:
    """Elements one access row touches for one thread, as the kernel walks them."""
    n = row[5]
    if row[6]:
        return set(range(n))
    base = sum(c * v for c, v in zip(row[7:13], (*thread, *block), strict=True)) + row[13]
    pairs = row[ACCESS_WORDS:]
    ranges = [range(pairs[k + 1]) for k in range(0, len(pairs), 2)]
    coeffs = pairs[0::2]
    found = {
        base + sum(c * i for c, i in zip(coeffs, idx, strict=True))
        for idx in itertools.product(*ranges)
    }
    return {e for e in found if 0 <= e < n}


def _program_elements(
    program: KernelProgram, access: AffineAccess, thread: tuple[int, ...], block: tuple[int, ...]
) -> set[int]:
    """Elements straight from the access's definition, every loop enumerated."""
    n = program.buffers[access.buffer].size // access.width
    if access.broadcast:
        return set(range(n))
    values = dict(zip(VARS, (*thread, *block), strict=True))
    names = [var for var, _ in access.loops]
    out = set()
    for idx in itertools.product(*(range(extent) for _, extent in access.loops)):
        env = {**values, **dict(zip(names, idx, strict=True))}
        e = sum(coeff * env[var] for var, coeff in access.coeffs) + access.constant
        if not access.guarded or 0 <= e < n:
            out.add(e)
    return out


def _threads(program: KernelProgram) -> list[tuple[int, int, int]]:
    bx, by, bz = program.block
    every = list(itertools.product(range(bx), range(by), range(bz)))
    return every if len(every) <= 64 else every[:: len(every) // 64]


def check_table(program: KernelProgram) -> None:
    table = encode_program(program)
    decoded = decode(table.words)
    assert [s.point for s in program.steps] == list(table.points)
    assert [b for _, b, _ in decoded] == [s.barrier for s in program.steps]
    gx, gy, gz = program.grid
    blocks = {(0, 0, 0), (gx - 1, gy - 1, gz - 1)}
    for (k, _, rows), step in zip(decoded, program.steps, strict=True):
        assert table.points[k] == step.point
        ops = [row[1] for row in rows]
        assert ops == sorted(ops)  # writes (0) before reads (1)
        expected = sorted(step.accesses, key=lambda a: a.op != "write")
        for row, access in zip(rows, expected, strict=True):
            buf = program.buffers[access.buffer]
            assert (row[0], row[2], row[3]) == (access.buffer, access.width, buf.offset)
            for block in blocks:
                for thread in _threads(program):
                    got = _table_elements(row, thread, block)
                    assert got == _program_elements(program, access, thread, block)
