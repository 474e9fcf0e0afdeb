"""The kernel program a plan implies: what every thread touches at every point, and the barriers.

Shared by the CPU emulator and the CUDA harness, which compiles it unchanged. It stays affine
(coefficients and loop extents, never one entry per thread) so the harness turns each access
into a loop nest and the emulator enumerates it with numpy.

A buffer without access patterns gets the synthetic pattern (docs/design.md, Emulator): at its start
every thread ``t`` writes elements ``t + i*T``; at ``end - 1`` it reads elements
``t + 1 + i*T``, what thread ``t + 1`` wrote, so a hazard across threads is real.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from planner.core.models import Access, Plan, PlanRequest

__all__ = [
    "SYNTHETIC_LOOP",
    "UNKNOWN_BLOCK",
    "AffineAccess",
    "KernelProgram",
    "Op",
    "ProgramBuffer",
    "Step",
    "affine_access",
    "block_of",
    "build_program",
    "dims3",
    "rebased",
    "runtime_barriers",
    "synthetic_accesses",
    "with_plan_syncs",
]

Op = Literal["read", "write"]
SYNTHETIC_LOOP = "i"  # loop variable of the synthetic pattern
_THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# Threads run for a request without ``block``: it has more than one thread, how many is not
# said. No index of such a request uses threadIdx, so every thread touches the same bytes and
# two threads show every hazard that more would.
UNKNOWN_BLOCK = (2, 1, 1)


@dataclass(frozen=True)
class AffineAccess:
    """One access by every thread: element ``sum(coeff * var) + constant`` over the loops."""

    buffer: int  # index into KernelProgram.buffers
    op: Op
    width: int  # bytes per element
    coeffs: tuple[tuple[str, int], ...]  # (variable, coefficient): threadIdx/blockIdx/loops
    loops: tuple[tuple[str, int], ...]  # (loop variable, extent)
    constant: int  # element offset
    broadcast: bool = False  # "threads": "all": every thread touches [0, size // width)
    guarded: bool = False  # elements outside [0, size // width) are skipped
    agent: bool = False  # made by an asynchronous agent (with broadcast): no thread's
    # Byte address in the arena of element e: buffers[buffer].offset + e * width.


@dataclass(frozen=True)
class Step:
    """The accesses at one program point; all threads run them concurrently."""

    point: int
    barrier: bool  # a __syncthreads() runs before this point's accesses
    accesses: tuple[AffineAccess, ...]
    copies: tuple[tuple[int, int], ...] = ()  # (loop index, iteration from 0) of loops around

    @property
    def label(self) -> str:
        """The point, and the iterations of the loops around it when there are any."""
        where = "".join(f", iteration {k + 1} of loops.{i}" for i, k in self.copies)
        return f"{self.point} ({where[2:]})" if where else str(self.point)


@dataclass(frozen=True)
class ProgramBuffer:
    """A buffer placed in the shared arena."""

    id: str
    offset: int  # bytes in the arena
    size: int  # bytes; a footprint's planned size when the plan shrinks the buffer
    start: int  # program point
    end: int  # program point, half-open
    synthetic: bool  # True: no access pattern in the request
    alignment: int = 1  # bytes: the request's alignment for the buffer; offset is a multiple


@dataclass(frozen=True)
class KernelProgram:
    """Every point with a barrier or an access, in order, over the shared placements."""

    arena_bytes: int
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    buffers: tuple[ProgramBuffer, ...]
    steps: tuple[Step, ...]  # sorted by point
    # bytes: the address the arena runs at (see ``arena_base``); 0 runs offsets as addresses
    base: int = 0

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]


def arena_base(request: PlanRequest, plan: Plan) -> int:
    """The least aligned address the arena may get on the device (bytes): the base alignment
    the plan assumes (its ``launch.base_alignment``, else the request's largest alignment),
    lowered to what the target guarantees where the plan states one. An address that is a
    multiple of it and of nothing larger, so a buffer aligned only relative to the base runs
    misaligned here as it may on the device (docs/design.md, Offsets and the arena)."""
    assumed = plan.launch.base_alignment
    if assumed is None:
        # A version-1 plan: the request's alignments are the caller's promise for the base.
        return max([request.alignment, *(request.alignment_of(b) for b in request.buffers)])
    profile = request.profile
    return assumed if profile is None else min(assumed, profile.base_alignment)


def runtime_barriers(request: PlanRequest, plan: Plan) -> list[int]:
    """Barriers that run: the request's and the inserted ones; under sync "none" also the
    required ones, which the caller guarantees; and the cluster barriers that run."""
    points = set(request.barriers) | set(plan.barriers.inserted)
    if request.options.sync == "none":
        points |= set(plan.barriers.required)
    if request.cluster is not None:
        from planner.validators.clusters import running_cluster_barriers

        # A cluster barrier orders the CTA's own threads too.
        points |= set(running_cluster_barriers(request, plan))
    return sorted(points)


def with_plan_syncs(request: PlanRequest, plan: Plan) -> PlanRequest:
    """A partitioned request with the named barriers, proxy fences and wait_groups its plan
    adds or requires among its syncs: the kernel as it runs (the caller's under sync "none").
    A wait or fence of the plan that names no partition runs in none."""
    if (
        not plan.named_barriers
        and not any(f.partition for f in plan.fences)
        and not any(w.partition for w in plan.waits)
    ):
        return request
    from planner.core.models import Sync

    added = [
        Sync(kind="named_barrier", at=nb.at, id=nb.id, partitions=nb.partitions)
        for nb in plan.named_barriers
    ]
    added += [
        Sync(kind="fence_proxy_async", at=f.at, partition=f.partition)
        for f in plan.fences
        if f.partition is not None
    ]
    added += [
        Sync(kind="wait_group", at=w.at, group=w.kind, read=w.kind == "bulk", partition=w.partition)
        for w in plan.waits
        if w.partition is not None
    ]
    return request.model_copy(update={"syncs": [*request.syncs, *added]})


def build_program(request: PlanRequest, plan: Plan) -> KernelProgram:
    """The kernel program of ``plan``: buffers at their shared offsets, accesses, barriers.

    Buffers placed in global memory and placements naming no request buffer are left out; a
    buffer placed twice keeps its first placement. A buffer with a footprint (``shrink``) has
    its planned size, and its accesses subtract the footprint's per-block ``index_base``.
    Raises ValueError for a footprint whose base is not a whole number of elements.
    """
    block = block_of(request)
    grid = dims3(request.grid)
    placed: dict[str, int] = {}
    for p in plan.placements:
        if p.memory == "shared":
            placed.setdefault(p.id, p.offset)
    footprints = {f.id: f for f in plan.footprints}
    buffers: list[ProgramBuffer] = []
    by_point: dict[int, list[AffineAccess]] = {}
    for b in request.buffers:
        if b.id not in placed:
            continue
        index = len(buffers)
        footprint = footprints.get(b.id)
        size = b.size if footprint is None else footprint.planned
        buffers.append(
            ProgramBuffer(
                b.id,
                placed[b.id],
                size,
                b.start,
                b.end,
                synthetic=not b.accesses,
                alignment=request.alignment_of(b),
            )
        )
        if b.accesses:
            for a in b.accesses:
                access = affine_access(index, a)
                if footprint is not None:
                    access = rebased(access, footprint.index_base, b.id)
                by_point.setdefault(a.at, []).append(access)
        else:
            for at, access in synthetic_accesses(index, b.size, b.start, b.end, block):
                by_point.setdefault(at, []).append(access)
    barriers = set(runtime_barriers(request, plan))
    points = sorted(barriers | set(by_point))
    steps = tuple(Step(p, p in barriers, tuple(by_point.get(p, ()))) for p in points)
    return KernelProgram(
        plan.arena_bytes, block, grid, tuple(buffers), steps, arena_base(request, plan)
    )


def block_of(request: PlanRequest) -> tuple[int, int, int]:
    """The threads per block the kernel program runs: the request's, else ``UNKNOWN_BLOCK``
    (never one thread unless the request says so)."""
    return UNKNOWN_BLOCK if request.block is None else dims3(request.block)


def dims3(value: list[int] | None) -> tuple[int, int, int]:
    if value is None:
        return (1, 1, 1)
    x, y, z = [*value, 1, 1][:3]
    return (x, y, z)


def affine_access(index: int, a: Access) -> AffineAccess:
    if a.threads == "all":
        agent = a.agent != "threads"
        return AffineAccess(index, a.op, a.bytes, (), (), 0, broadcast=True, agent=agent)
    coeffs = tuple((a.index or {}).items())
    return AffineAccess(index, a.op, a.bytes, coeffs, tuple(a.loops.items()), a.offset)


def rebased(access: AffineAccess, base: dict[str, int], buffer_id: str) -> AffineAccess:
    """``access`` with the footprint's per-block base subtracted, in elements.

    The planner keeps each base a multiple of every access width (its blockIdx strides are
    the accesses' own, its constant a multiple of their least common multiple), so the
    rebased index stays affine; a base that is not is a bad footprint.
    """
    width = access.width
    terms = dict(access.coeffs)
    for var, per_block in base.items():
        if per_block % width:
            raise ValueError(
                f"footprint of {buffer_id!r}: index_base[{var!r}] = {per_block} bytes is not a "
                f"multiple of the {width}-byte elements of an access"
            )
        if var == "constant":
            continue
        terms[var] = terms.get(var, 0) - per_block // width
    constant = access.constant - base.get("constant", 0) // width
    return replace(access, coeffs=tuple(terms.items()), constant=constant)


def synthetic_accesses(
    index: int, size: int, start: int, end: int, block: tuple[int, int, int]
) -> list[tuple[int, AffineAccess]]:
    """The write at ``start`` and the rotated read at ``end - 1`` (docs/design.md, Emulator)
    of a buffer of ``size`` bytes live on ``[start, end)``."""
    width = 4 if size % 4 == 0 else 1  # bytes
    n = size // width  # elements
    bx, by, bz = block
    threads = bx * by * bz
    coeffs = (*zip(_THREAD_AXES, (1, bx, bx * by), strict=True), (SYNTHETIC_LOOP, threads))
    loops = ((SYNTHETIC_LOOP, -(-n // threads)),)
    write = AffineAccess(index, "write", width, coeffs, loops, 0, guarded=True)
    last = end - 1
    rotate = 0 if last == start else 1  # one point: each thread reads back its own write
    read = AffineAccess(index, "read", width, coeffs, loops, rotate, guarded=True)
    return [(start, write), (last, read)]
