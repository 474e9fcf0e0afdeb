"""The CUDA kernel of the GPU harness, and the table that tells it what a plan's program does.

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

KERNEL_SOURCE = (
    f"""\
// alloc-planner GPU harness: runs any plan's kernel program, given as a table of int32.
#define MAX_RECORDS {MAX_RECORDS}u
#define RECORD_WORDS {RECORD_WORDS}u
#define HEADER_WORDS {HEADER_WORDS}
#define STEP_WORDS {STEP_WORDS}
#define ACCESS_WORDS {ACCESS_WORDS}
#define LOOP_WORDS {LOOP_WORDS}
"""
    + """
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

// Sleep a hash of (seed, step, block, thread) nanoseconds, at most max_ns.
__device__ __forceinline__ void delay(unsigned int seed, unsigned int step, unsigned int blk,
                                      unsigned int t, unsigned int max_ns) {
    if (max_ns == 0u) return;
    const unsigned int h = mix32(seed ^ mix32(step * 0x9e3779b9u ^ mix32(blk * 0x85ebca6bu ^ t)));
    __nanosleep(h % (max_ns + 1u));
}

// Set bits [k, k + n) of a written-bitmap.
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

__device__ __forceinline__ unsigned int is_written(const unsigned int* bits, unsigned int k) {
    return (((const volatile unsigned int*)bits)[k >> 5] >> (k & 31u)) & 1u;
}

__device__ void report(unsigned int* result, unsigned int b, unsigned int k, unsigned int expected,
                       unsigned int found, unsigned int step, unsigned int blk, unsigned int t) {
    atomicAdd(result, 1u);
    const unsigned int slot = atomicAdd(result + 1, 1u);
    if (slot < MAX_RECORDS) {
        unsigned int* r = result + 2 + slot * RECORD_WORDS;
        r[0] = b; r[1] = k; r[2] = expected; r[3] = found; r[4] = step; r[5] = blk; r[6] = t;
    }
}

// Element e (w bytes) of buffer b at arena byte `offset`: the stamps, then the written bits.
__device__ void write_elem(unsigned char* arena, unsigned int* bits, unsigned int b,
                           unsigned int offset, unsigned int bitbase, unsigned int e,
                           unsigned int w) {
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

// Check element e (w bytes) of buffer b: each byte it has written must hold its stamp.
__device__ void read_elem(const unsigned char* arena, const unsigned int* bits,
                          unsigned int* result, unsigned int b, unsigned int offset,
                          unsigned int bitbase, unsigned int e, unsigned int w,
                          unsigned int step, unsigned int blk, unsigned int t) {
    const unsigned int k = e * w;
    const unsigned char* p = arena + offset + k;
    if (w == 1u || w == 2u || w == 4u || w == 8u || w == 16u) {
        // bitbase is a multiple of 32 and k of w, so the w bits lie in one bitmap word.
        const unsigned int at = bitbase + k;
        const unsigned int word = ((const volatile unsigned int*)bits)[at >> 5];
        const unsigned int written = (word >> (at & 31u)) & ((1u << w) - 1u);
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
            v[0] = (unsigned int)x;
            v[1] = (unsigned int)(x >> 32);
        } else {
            const unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
            asm volatile("ld.volatile.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                         : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a) : "memory");
        }
        for (unsigned int j = 0u; j < w; ++j) {
            const unsigned int found = (v[j >> 2] >> (8u * (j & 3u))) & 0xffu;
            const unsigned int expected = stamp8(b, k + j);
            if (((written >> j) & 1u) && found != expected) {
                report(result, b, k + j, expected, found, step, blk, t);
            }
        }
    } else {
        for (unsigned int j = 0u; j < w; ++j) {
            if (!is_written(bits, bitbase + k + j)) continue;
            __threadfence_block();
            const unsigned int found = ((const volatile unsigned char*)p)[j];
            const unsigned int expected = stamp8(b, k + j);
            if (found != expected) report(result, b, k + j, expected, found, step, blk, t);
        }
    }
}

// This thread's elements of one access.
__device__ void run_access(const int* acc, const int* loop_table, unsigned char* arena,
                           unsigned int* bits, unsigned int* result, unsigned int step,
                           unsigned int blk, unsigned int t) {
    const unsigned int b = (unsigned int)acc[0];
    const bool write = acc[1] == 0;
    const unsigned int w = (unsigned int)acc[2];
    const unsigned int offset = (unsigned int)acc[3];
    const unsigned int bitbase = (unsigned int)acc[4];
    const long long n = acc[5];
    if (acc[6]) {  // broadcast: every element, each thread starting at its own
        for (long long j = 0; j < n; ++j) {
            const unsigned int e = (unsigned int)((j + t) % n);
            if (write) write_elem(arena, bits, b, offset, bitbase, e, w);
            else read_elem(arena, bits, result, b, offset, bitbase, e, w, step, blk, t);
        }
        return;
    }
    const long long base = (long long)acc[7] * threadIdx.x + (long long)acc[8] * threadIdx.y
        + (long long)acc[9] * threadIdx.z + (long long)acc[10] * blockIdx.x
        + (long long)acc[11] * blockIdx.y + (long long)acc[12] * blockIdx.z + acc[13];
    const int* loops = loop_table + LOOP_WORDS * acc[14];
    const int nloops = acc[15];
    long long total = 1;
    for (int l = 0; l < nloops; ++l) total *= loops[LOOP_WORDS * l + 1];
    for (long long j = 0; j < total; ++j) {
        long long rest = j;
        long long e = base;
        for (int l = 0; l < nloops; ++l) {  // odometer: the first loop varies fastest
            const long long extent = loops[LOOP_WORDS * l + 1];
            e += loops[LOOP_WORDS * l] * (rest % extent);
            rest /= extent;
        }
        if (e < 0 || e >= n) continue;
        if (write) write_elem(arena, bits, b, offset, bitbase, (unsigned int)e, w);
        else read_elem(arena, bits, result, b, offset, bitbase, (unsigned int)e, w, step, blk, t);
    }
}

extern "C" __global__ void alloc_check(const int* __restrict__ table,
                                       unsigned int* __restrict__ result,
                                       unsigned int* __restrict__ written,
                                       unsigned int bitmap_words, unsigned int seed,
                                       unsigned int max_delay_ns) {
    extern __shared__ __align__(16) unsigned char arena[];
    const unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned int blk = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned int* const bits = written + (unsigned long long)blk * bitmap_words;
    const int steps = table[0];
    const int* const access_table = table + table[1];
    const int* const loop_table = table + table[2];
    for (int s = 0; s < steps; ++s) {
        const int* const step = table + HEADER_WORDS + STEP_WORDS * s;
        // Every thread reads the same table: a uniform branch, so the barrier is legal.
        if (step[1]) __syncthreads();
        if (step[3] == 0) continue;
        delay(seed, (unsigned int)s, blk, t, max_delay_ns);
        for (int a = step[2]; a < step[2] + step[3]; ++a) {
            run_access(access_table + ACCESS_WORDS * a, loop_table, arena, bits, result,
                       (unsigned int)s, blk, t);
        }
    }
}
"""
)


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
            f"step {row[0]} (point {table.points[s]}){barrier}: accesses {row[2]}..+{row[3]}"
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
