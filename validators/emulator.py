"""The exact CPU emulation of a plan's kernel program (docs/design.md, Emulator).

Every thread's accesses are enumerated with numpy, per block when an index uses ``blockIdx``
(shared memory belongs to one block, so blocks run on fresh arenas). Two checks:

- **clobbered**: a shadow arena holds, per byte, the stamp of its last write: the buffer and
  the byte's index in it. A read of a byte its buffer wrote earlier must find that stamp;
  another buffer's is a clobber. Steps run in point order; in one step all writes land
  before the reads.
- **race**: within a barrier epoch (from one barrier to the next) any byte touched by two
  different threads for two different buffers, with a write among them. No interleaving is
  chosen: per byte and buffer the epoch's smallest and largest thread, over all accesses and
  over the writes, decide exactly whether such a pair exists.

An access that reaches outside the bytes placed for its buffer (possible only when a
footprint is too small) is a ``bad_footprint``. Misalignment, capacity and the barrier lists
are the static validator's; the emulator only
runs what the plan places in the shared arena.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from planner.validators.interpreter import TooManyPathsError, build_programs
from planner.validators.program import (
    AffineAccess,
    KernelProgram,
    Step,
    block_of,
    runtime_barriers,
)

if TYPE_CHECKING:
    from planner.core.models import Plan, PlanRequest, Violation, ViolationCode

__all__ = ["DEFAULT_MAX_BLOCKS", "EmulationReport", "emulate", "run_program"]

DEFAULT_MAX_BLOCKS = 16  # distinct blocks emulated; past it an evenly spaced subset
_BLOCK_VARS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_THREAD_VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_NO_THREAD = np.iinfo(np.int32).max  # smallest-writer sentinel of a group without writes

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]


class EmulationReport(BaseModel):
    """Every race and clobber the emulation found; ``valid`` when there is none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    valid: bool
    violations: list[Violation] = Field(default_factory=list)
    truncated: bool = False  # more violations exist than are listed
    threads: int  # per block
    blocks: list[tuple[int, int, int]]  # the blocks emulated
    blocks_total: int  # distinct blocks the blockIdx terms tell apart (1 when none is used)
    exhaustive: bool  # every distinct block was emulated
    byte_accesses: int  # (thread, byte) accesses checked, over all blocks
    notes: list[str] = Field(default_factory=list)


def emulate(
    request: PlanRequest,
    plan: Plan,
    *,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    max_violations: int = 1000,
) -> EmulationReport:
    """Run the kernel program of ``plan`` on a shadow arena; report races and clobbers.

    An asynchronous access runs as its agent's (a stand-in no thread is) from its issue point
    until its covering sync (``planner.validators.asyncs``); a missing proxy fence is judged
    on the placement before the run."""
    from planner.core.models import Violation

    if request.partitions:
        return _run_partitions(request, plan, max_violations)
    fences: list[Violation] = []
    original = request
    if request.has_async:
        from planner.validators.asyncs import in_flight, unfenced, uninvalidated, unwaited

        fences = [
            Violation(code="missing_wait", message=f"still in flight: {why}", buffers=[b], point=at)
            for b, at, why in unwaited(request, plan)
        ]
        fences += [
            Violation(
                code="missing_fence",
                message=f"{later!r} touches through the async proxy bytes {earlier!r} wrote "
                f"through the generic proxy: {why}",
                buffers=[earlier, later],
            )
            for earlier, later, why in unfenced(request, plan)
        ]
        fences += [
            Violation(
                code="missing_inval",
                message=f"{later!r} runs over the bytes of mbarrier {mbarrier!r}: {why}",
                buffers=[mbarrier, later],
            )
            for mbarrier, later, why in uninvalidated(request, plan)
        ]
        request = in_flight(request, runtime_barriers(request, plan), plan)
    if request.cluster is not None:
        from planner.validators.clusters import cluster_view, scoped_violations

        view, seen = cluster_view(original, plan)
        ran = emulate(view, seen, max_blocks=max_blocks, max_violations=max_violations)
        fences += scoped_violations(original, ran.violations, ("race", "clobbered"))
    report = _emulate(request, plan, max_blocks, max_violations)
    if not fences:
        return report
    return report.model_copy(
        update={"valid": False, "violations": sorted([*fences, *report.violations], key=_sort_key)}
    )


def _run_partitions(request: PlanRequest, plan: Plan, max_violations: int) -> EmulationReport:
    """A request with partitions: the vector-clock run (``planner.validators.partition_run``)."""
    from planner.core.models import Violation
    from planner.validators.partition_run import run_partitions

    found = _misaligned(request, plan)
    if request.loops or request.branches:
        from planner.validators.partition_paths import on_paths  # loops, branches

        found += [
            (code, message, buffers, point if point is not None else 0)
            for code, message, buffers, point in on_paths(
                request,
                plan,
                runtime_barriers(request, plan),
                lambda p: [(*f,) for f in run_partitions(p.request, p.plan, p.barriers)],
            )
        ]
    else:
        found += run_partitions(request, plan, runtime_barriers(request, plan))
    violations = sorted(
        (
            Violation(code=code, message=message, buffers=buffers, point=point)
            for code, message, buffers, point in found
        ),
        key=_sort_key,
    )
    return EmulationReport(
        valid=not violations,
        violations=violations[:max_violations],
        truncated=len(violations) > max_violations,
        threads=sum(p.size for p in request.partitions),
        blocks=[(0, 0, 0)],
        blocks_total=1,
        exhaustive=True,
        byte_accesses=0,
        notes=[f"ran {len(request.partitions)} partitions with vector clocks"],
    )


def _misaligned(request: PlanRequest, plan: Plan) -> list[tuple[str, str, list[str], int]]:
    """(code, message, buffers, point) per shared buffer whose absolute address (the arena's
    base plus its offset) is not a multiple of its alignment: running the kernel there is
    undefined whatever the accesses."""
    from planner.validators.program import arena_base

    base = arena_base(request, plan)
    where = {p.id: p.offset for p in plan.placements if p.memory == "shared"}
    out: list[tuple[str, str, list[str], int]] = []
    for b in request.buffers:
        if b.id not in where:
            continue
        alignment = request.alignment_of(b)
        address = base + where[b.id]
        if address % alignment:
            out.append(
                (
                    "misaligned",
                    f"{b.id!r} runs at offset {where[b.id]} of an arena at address {base}, not "
                    f"a multiple of its alignment {alignment} (remainder {address % alignment})",
                    [b.id],
                    b.start,
                )
            )
    return out


def _emulate(
    request: PlanRequest, plan: Plan, max_blocks: int, max_violations: int
) -> EmulationReport:
    from planner.core.models import Violation

    try:
        programs = build_programs(request, plan)
    except TooManyPathsError as exc:
        return _not_run(request, Violation(code="too_many_paths", message=str(exc)))
    except ValueError as exc:  # a footprint that no affine program can follow
        return _not_run(request, Violation(code="bad_footprint", message=str(exc)))
    if len(programs) == 1:
        return run_program(programs[0], max_blocks=max_blocks, max_violations=max_violations)
    known: dict[tuple[AffineAccess, int, int, tuple[int, int, int]], _Shape] = {}  # all paths
    reports = [
        run_program(p, max_blocks=max_blocks, max_violations=max_violations, known=known)
        for p in programs
    ]
    return _merged(reports, max_violations)


def _not_run(request: PlanRequest, violation: Violation) -> EmulationReport:
    return EmulationReport(
        valid=False,
        violations=[violation],
        threads=math.prod(block_of(request)),
        blocks=[],
        blocks_total=0,
        exhaustive=False,
        byte_accesses=0,
        notes=["the kernel program could not be built; nothing was emulated"],
    )


def _merged(reports: list[EmulationReport], max_violations: int) -> EmulationReport:
    """The reports of every path of a program with branches, as one: each violation once."""
    found: dict[tuple[str, tuple[str, ...], int], Violation] = {}
    for r in reports:
        for v in r.violations:
            found.setdefault((v.code, tuple(v.buffers), -1 if v.point is None else v.point), v)
    violations = sorted(found.values(), key=_sort_key)
    truncated = any(r.truncated for r in reports) or len(violations) > max_violations
    violations = violations[:max_violations]
    first = reports[0]
    notes = [f"emulated {len(reports)} paths (one per choice of branch arms and of skipped loops)"]
    notes += sorted({n for r in reports for n in r.notes})
    return EmulationReport(
        valid=not violations and not truncated,
        violations=violations,
        truncated=truncated,
        threads=first.threads,
        blocks=first.blocks,
        blocks_total=first.blocks_total,
        exhaustive=all(r.exhaustive for r in reports),
        byte_accesses=sum(r.byte_accesses for r in reports),
        notes=notes,
    )


def run_program(
    program: KernelProgram,
    *,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
    max_violations: int = 1000,
    known: dict[tuple[AffineAccess, int, int, tuple[int, int, int]], _Shape] | None = None,
) -> EmulationReport:
    """Emulate ``program``: every thread of each chosen block, every step, exactly.
    ``known``: accesses already enumerated, shared by the paths of one request."""
    if max_blocks < 1:
        raise ValueError(f"max_blocks must be >= 1, got {max_blocks!r}")
    if max_violations < 0:
        raise ValueError(f"max_violations must be >= 0, got {max_violations!r}")
    from planner.core.models import Violation

    blocks, total = _choose_blocks(program, max_blocks)
    known = {} if known is None else known
    shapes = [_shape_of(a, program, known) for s in program.steps for a in s.accesses]
    found = _Found(max_violations, Violation, several_blocks=len(blocks) > 1)
    misaligned: set[str] = set()  # once per buffer, not per range or iteration
    for buf in program.buffers:
        address = program.base + buf.offset  # the absolute address (swizzled TMA tiles)
        if address % buf.alignment and buf.id not in misaligned:
            misaligned.add(buf.id)
            # The kernel declares the buffer aligned (vector loads, typed pointers, a TMA
            # swizzle taken from the address bits): running it at this address is undefined
            # whatever the accesses, so it counts before them.
            where = f"offset {buf.offset}"
            if buf.offset % buf.alignment == 0:
                where += f" of an arena at address {program.base}"
            found.add(
                "misaligned",
                f"{buf.id!r} runs at {where}, not a multiple of its alignment "
                f"{buf.alignment} (remainder {address % buf.alignment})",
                [buf.id],
                buf.start,
            )
    count = 0
    for block in blocks:
        count += _run_block(program, shapes, block, found)
        if found.full:
            break
    notes: list[str] = []
    if len(blocks) < total:
        notes.append(
            f"emulated {len(blocks)} of {total} distinct blocks (evenly spaced, the first and "
            "the last included); raise max_blocks to emulate more"
        )
    violations = sorted(found.items.values(), key=_sort_key)
    return EmulationReport(
        valid=not violations and not found.truncated,
        violations=violations,
        truncated=found.truncated,
        threads=program.threads,
        blocks=blocks,
        blocks_total=total,
        exhaustive=len(blocks) == total,
        byte_accesses=count,
        notes=notes,
    )


def _sort_key(v: Violation) -> tuple[str, list[str], int, str]:
    return (v.code, v.buffers, -1 if v.point is None else v.point, v.message)


class _Found:
    """Violations so far, one per (code, buffers, point), capped at ``limit``."""

    def __init__(self, limit: int, violation: type[Violation], *, several_blocks: bool) -> None:
        self.limit = limit
        self.violation = violation
        self.several_blocks = several_blocks
        self.items: dict[tuple[str, tuple[str, ...], int], Violation] = {}
        self.truncated = False

    @property
    def full(self) -> bool:
        return self.truncated

    def add(self, code: ViolationCode, message: str, buffers: list[str], point: int) -> None:
        key = (code, tuple(buffers), point)
        if key in self.items:
            return
        if len(self.items) >= self.limit:
            self.truncated = True
            return
        self.items[key] = self.violation(code=code, message=message, buffers=buffers, point=point)

    def where(self, block: tuple[int, int, int]) -> str:
        return f" in block {block}" if self.several_blocks else ""


def _shape_of(
    a: AffineAccess,
    program: KernelProgram,
    known: dict[tuple[AffineAccess, int, int, tuple[int, int, int]], _Shape],
) -> _Shape:
    """``_Shape.of``, once per access, buffer size, thread count and block shape."""
    key = (a, program.buffers[a.buffer].size, program.threads, program.block)
    shape = known.get(key)
    if shape is None:
        shape = known[key] = _Shape.of(a, program)
    return shape


@dataclass(frozen=True)
class _Shape:
    """An access enumerated once: its elements in block (0, 0, 0) and the threads on them.

    Only the smallest and the largest thread per element are kept: the stamps need the
    elements alone, and the race check needs only those two threads per byte.
    """

    access: AffineAccess
    elements: I64  # elements before the block shift and the bounds filter
    threads: I32  # the thread of each element
    block_coeffs: tuple[int, int, int]  # elements per unit of blockIdx.x, .y, .z
    n: int  # elements in the buffer: the access keeps [0, n)
    accesses: int  # (thread, byte) pairs the access makes, before the bounds filter
    # block -> bytes_in(block), read-only arrays
    memo: dict[tuple[int, int, int], tuple[I64, I32, I64]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @staticmethod
    def of(a: AffineAccess, program: KernelProgram) -> _Shape:
        size = program.buffers[a.buffer].size
        n = size // a.width
        count = program.threads
        if a.broadcast:
            # Every thread touches every element; the race check only needs the smallest and
            # the largest thread per byte, so two threads stand for all of them.
            # An asynchronous agent is no thread: it stands as one past the last, beside the
            # first, so it differs from every thread and from another agent's stand-ins.
            edge = np.array(sorted({0, count if a.agent else count - 1}), np.int32)
            elements = np.tile(np.arange(n, dtype=np.int64), edge.size)
            return _Shape(a, elements, np.repeat(edge, n), (0, 0, 0), n, count * n * a.width)
        coeffs = dict(a.coeffs)
        bx, by, _ = program.block
        t = np.arange(count, dtype=np.int64)
        coords = (t % bx, t // bx % by, t // (bx * by))
        per_thread = np.zeros(count, np.int64)
        for axis, var in enumerate(_THREAD_VARS):
            per_thread += coeffs.get(var, 0) * coords[axis]
        rest = np.array([a.constant], np.int64)  # distinct loop parts: duplicates add nothing
        for var, extent in a.loops:
            coeff = coeffs.get(var, 0)
            if coeff != 0:
                steps = coeff * np.arange(extent, dtype=np.int64)
                rest = np.unique((rest[:, None] + steps[None, :]).ravel())
        elements = (per_thread[:, None] + rest[None, :]).ravel()
        threads = np.repeat(np.arange(count, dtype=np.int32), rest.size)
        accesses = elements.size * a.width
        elements, threads = _extremes(elements, threads)
        block_coeffs = (
            coeffs.get("blockIdx.x", 0),
            coeffs.get("blockIdx.y", 0),
            coeffs.get("blockIdx.z", 0),
        )
        return _Shape(a, elements, threads, block_coeffs, n, accesses)

    def bytes_in(self, block: tuple[int, int, int]) -> tuple[I64, I32, I64]:
        """Buffer bytes and their threads in ``block``, and the elements outside the buffer,
        which are dropped (skipped by a guarded access, out of bounds for any other); computed
        once per block, as read-only arrays."""
        found = self.memo.get(block)
        if found is None:
            found = self.memo[block] = self._bytes_in(block)
            for array in found:
                array.flags.writeable = False
        return found

    def _bytes_in(self, block: tuple[int, int, int]) -> tuple[I64, I32, I64]:
        shift = sum(c * b for c, b in zip(self.block_coeffs, block, strict=True))
        elements = self.elements + shift if shift else self.elements
        threads = self.threads
        inside = (elements >= 0) & (elements < self.n)
        outside = elements[~inside]
        if outside.size:
            elements, threads = elements[inside], threads[inside]
        width = self.access.width
        if width == 1:
            return elements, threads, outside
        lanes = np.arange(width, dtype=np.int64)
        return (elements[:, None] * width + lanes).ravel(), np.repeat(threads, width), outside


def _extremes(elements: I64, threads: I32) -> tuple[I64, I32]:
    """Each distinct element with its smallest thread, and again with its largest if other.

    Elements in a dense range are counted in place; sparse ones are sorted.
    """
    if elements.size == 0:
        return elements, threads
    first = int(elements.min())
    span = int(elements.max()) - first + 1
    keep: I64 | None = None
    if span <= 4 * elements.size + 1024:
        slot = elements - first
        counts = np.bincount(slot, minlength=span)
        if counts.max() <= 1:
            return elements, threads
        keep = np.flatnonzero(counts)
        unique = keep + first
        slots = span
    else:
        unique, slot = np.unique(elements, return_inverse=True)
        if unique.size == elements.size:
            return elements, threads
        slots = unique.size
    low = np.full(slots, np.iinfo(np.int32).max, np.int32)
    high = np.full(slots, -1, np.int32)
    np.minimum.at(low, slot, threads)
    np.maximum.at(high, slot, threads)
    if keep is not None:
        low, high = low[keep], high[keep]
    several = low != high
    return np.concatenate((unique, unique[several])), np.concatenate((low, high[several]))


def _choose_blocks(
    program: KernelProgram, max_blocks: int
) -> tuple[list[tuple[int, int, int]], int]:
    """The blocks to emulate and how many distinct ones the program's blockIdx terms allow."""
    used = [
        axis
        for axis, var in enumerate(_BLOCK_VARS)
        if any(dict(a.coeffs).get(var, 0) != 0 for s in program.steps for a in s.accesses)
    ]
    extents = [program.grid[axis] for axis in used]
    total = math.prod(extents)
    if total <= max_blocks:
        picks = list(range(total))
    elif max_blocks == 1:
        picks = [0]
    else:
        picks = sorted({round(k * (total - 1) / (max_blocks - 1)) for k in range(max_blocks)})
    blocks: list[tuple[int, int, int]] = []
    for linear in picks:
        coords = [0, 0, 0]
        for axis, extent in zip(used, extents, strict=True):
            coords[axis] = linear % extent
            linear //= extent
        blocks.append((coords[0], coords[1], coords[2]))
    return blocks, total


@dataclass(frozen=True)
class _Touch:
    """One access's bytes in one block: ``rel`` in its buffer, ``addr`` in the shadow arena."""

    access: AffineAccess
    point: int
    label: str  # the point, with its loop iterations
    rel: I64
    addr: I64
    threads: I32


class _Arena:
    """The shadow arena of one block: per byte, the stamp of its last write."""

    def __init__(self, program: KernelProgram) -> None:
        buffers = program.buffers
        self.program = program
        self.base = min([0, *(b.offset for b in buffers)])  # bytes; a bad plan may go below 0
        top = max([0, *(b.offset + b.size for b in buffers)])  # only buffers are touched
        self.bytes = top - self.base
        self.stamp_buffer = np.full(self.bytes, -1, np.int32)  # last writer's buffer
        self.stamp_byte = np.full(self.bytes, -1, np.int64)  # byte index in that buffer
        self.written = [np.zeros(b.size, np.bool_) for b in buffers]  # since the start

    def touch(
        self, shape: _Shape, block: tuple[int, int, int], step: Step, found: _Found
    ) -> _Touch:
        point = step.point
        rel, threads, outside = shape.bytes_in(block)
        if outside.size and not shape.access.guarded:
            mine = self.program.buffers[shape.access.buffer]
            e = int(outside.min()) if outside.min() < 0 else int(outside.max())
            width = shape.access.width
            found.add(
                "bad_footprint",
                f"{mine.id!r}: an access at point {step.label}{found.where(block)} reaches bytes "
                f"[{e * width}, {(e + 1) * width}), outside the {mine.size} bytes placed for "
                f"it; {outside.size} element{'s' if outside.size != 1 else ''} skipped",
                [mine.id],
                point,
            )
        offset = self.program.buffers[shape.access.buffer].offset - self.base
        return _Touch(shape.access, point, step.label, rel, rel + offset, threads)

    def write(self, t: _Touch) -> None:
        self.stamp_buffer[t.addr] = t.access.buffer
        self.stamp_byte[t.addr] = t.rel
        self.written[t.access.buffer][t.rel] = True

    def read(self, t: _Touch, block: tuple[int, int, int], found: _Found) -> None:
        """A read of bytes its buffer wrote must find that buffer's stamp on each."""
        b = t.access.buffer
        bad = self.written[b][t.rel] & (
            (self.stamp_buffer[t.addr] != b) | (self.stamp_byte[t.addr] != t.rel)
        )
        if not bad.any():
            return
        hits = np.flatnonzero(bad)
        culprits = self.stamp_buffer[t.addr[hits]]
        mine = self.program.buffers[b]
        for culprit in np.unique(culprits).tolist():
            rel = t.rel[hits[culprits == culprit]]
            byte = int(rel.min())
            other = self.program.buffers[culprit]
            found.add(
                "clobbered",
                f"{mine.id!r} reads byte {byte} (arena byte {mine.offset + byte}) at point "
                f"{t.label}{found.where(block)} after {other.id!r} overwrote it; "
                f"{np.unique(rel).size} bytes in all",
                [mine.id, other.id],
                t.point,
            )


def _run_block(
    program: KernelProgram, shapes: list[_Shape], block: tuple[int, int, int], found: _Found
) -> int:
    """Emulate one block; returns the (thread, byte) accesses it made."""
    arena = _Arena(program)
    epoch: list[_Touch] = []
    opened = program.steps[0].label if program.steps else "0"  # where the epoch began
    count = 0
    k = 0
    for step in program.steps:
        if step.barrier:
            _check_races(arena, epoch, opened, step.label, block, found)
            epoch, opened = [], step.label
        touches = [
            arena.touch(shapes[k + j], block, step, found) for j in range(len(step.accesses))
        ]
        count += sum(shapes[k + j].accesses for j in range(len(step.accesses)))
        k += len(step.accesses)
        epoch.extend(touches)
        for t in touches:
            if t.access.op == "write":
                arena.write(t)
        for t in touches:
            if t.access.op == "read":
                arena.read(t, block, found)
        if found.full:
            return count
    _check_races(arena, epoch, opened, None, block, found)
    return count


def _check_races(
    arena: _Arena,
    epoch: list[_Touch],
    opened: str,
    end: str | None,
    block: tuple[int, int, int],
    found: _Found,
) -> None:
    """Report every pair of buffers that race on a byte in the epoch ``[opened, end)``."""
    buffers = arena.program.buffers
    touched = sorted({t.access.buffer for t in epoch})
    if len(touched) < 2:
        return
    crowded = _crowded(arena, touched)
    if crowded is None:
        return
    accesses = _crowded_accesses(epoch, crowded)
    if accesses is None:
        return
    pairs = _racing_pairs(_ByteGroups.of(*accesses, len(buffers)))
    until = "the end" if end is None else f"the barrier at {end}"
    for (a, b), hits in pairs.items():
        ba, bb = buffers[a], buffers[b]
        byte, at, ta, tb, a_writes = min(hits, key=lambda h: (h[1], h[0]))
        arena_byte = byte + arena.base
        first_op, second_op = ("writes", "touches") if a_writes else ("touches", "writes")
        found.add(
            "race",
            f"thread {ta} {first_op} {ba.id!r} (byte {arena_byte - ba.offset}) and thread {tb} "
            f"{second_op} {bb.id!r} (byte {arena_byte - bb.offset}) at arena byte "
            f"{arena_byte} with no barrier between, in the epoch from point {opened} to "
            f"{until}{found.where(block)}; {len({h[0] for h in hits})} bytes in all",
            [ba.id, bb.id],
            at,
        )


def _crowded(arena: _Arena, touched: list[int]) -> Bool | None:
    """The arena bytes inside the ranges of two or more of the buffers ``touched`` (only
    those can race), found by a sweep over the ranges' ends; None when there are none."""
    buffers = arena.program.buffers
    ends: list[tuple[int, int]] = []
    for b in touched:
        lo = buffers[b].offset - arena.base
        ends += [(lo, 1), (lo + buffers[b].size, -1)]
    ends.sort()
    crowded = np.zeros(arena.bytes, np.bool_)
    depth = 0
    any_crowded = False
    for (at, step), (stop, _) in itertools.pairwise(ends):
        depth += step
        if depth >= 2 and stop > at:
            crowded[at:stop] = True
            any_crowded = True
    return crowded if any_crowded else None


def _crowded_accesses(epoch: list[_Touch], crowded: Bool) -> tuple[I64, I32, I32, Bool, I64] | None:
    """(byte, buffer, thread, a write, point) of each access of the epoch to a crowded byte;
    None when there is none."""
    parts: list[tuple[I64, I32, I32, Bool, I64]] = []
    for t in epoch:
        keep = crowded[t.addr]
        if keep.any():
            n = int(np.count_nonzero(keep))
            parts.append(
                (
                    t.addr[keep],
                    np.full(n, t.access.buffer, np.int32),
                    t.threads[keep],
                    np.full(n, t.access.op == "write"),
                    np.full(n, t.point, np.int64),
                )
            )
    if not parts:
        return None
    addr, buffer, thread, write, point = (np.concatenate(c) for c in zip(*parts, strict=True))
    return addr, buffer, thread, write, point


@dataclass(frozen=True)
class _ByteGroups:
    """The accesses grouped by (byte, buffer), sorted by byte then buffer: per group its
    threads' extremes, its writers' extremes and its first point."""

    addr: I64
    buf: I32
    lo_all: I32
    hi_all: I32
    lo_w: I32  # ``_NO_THREAD`` without writes
    hi_w: I32  # -1 without writes
    first: I64

    @classmethod
    def of(
        cls, addr: I64, buffer: I32, thread: I32, write: Bool, point: I64, nbuf: int
    ) -> _ByteGroups:
        """Group the accesses (one entry per byte each) by byte and buffer."""
        key = addr * nbuf + buffer
        order = np.argsort(key, kind="stable")
        key, thread, write, point = key[order], thread[order], write[order], point[order]
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
        return cls(
            addr=key[starts] // nbuf,
            buf=(key[starts] % nbuf).astype(np.int32),
            lo_all=np.minimum.reduceat(thread, starts),
            hi_all=np.maximum.reduceat(thread, starts),
            lo_w=np.minimum.reduceat(np.where(write, thread, _NO_THREAD), starts),
            hi_w=np.maximum.reduceat(np.where(write, thread, -1), starts),
            first=np.minimum.reduceat(point, starts),
        )


def _racing_pairs(
    groups: _ByteGroups,
) -> dict[tuple[int, int], list[tuple[int, int, int, int, bool]]]:
    """Per pair of buffers (lower index first) that race, each racing byte as (byte, point,
    thread of the first, thread of the second, the first one writes)."""
    g_addr, g_buf, first = groups.addr, groups.buf, groups.first
    lo_all, hi_all, lo_w, hi_w = groups.lo_all, groups.hi_all, groups.lo_w, groups.hi_w
    # Groups are sorted by byte, then buffer: compare each with the d-th next on one byte.
    pairs: dict[tuple[int, int], list[tuple[int, int, int, int, bool]]] = {}
    count = g_addr.size
    for d in range(1, count):
        i = np.arange(count - d)
        j = i + d
        same = g_addr[i] == g_addr[j]
        if not same.any():
            break
        i, j = i[same], j[same]
        w_then_a = _differ(lo_w[i], hi_w[i], lo_all[j], hi_all[j])
        a_then_w = _differ(lo_all[i], hi_all[i], lo_w[j], hi_w[j])
        for x in np.flatnonzero(w_then_a | a_then_w).tolist():
            gi, gj = int(i[x]), int(j[x])  # g_buf[gi] < g_buf[gj]
            if w_then_a[x]:  # a writer of gi's buffer and another thread of gj's
                ti, tj = _witness(lo_w[gi], hi_w[gi], lo_all[gj], hi_all[gj])
            else:
                tj, ti = _witness(lo_w[gj], hi_w[gj], lo_all[gi], hi_all[gi])
            at = max(int(first[gi]), int(first[gj]))
            hit = (int(g_addr[gi]), at, ti, tj, bool(w_then_a[x]))
            pairs.setdefault((int(g_buf[gi]), int(g_buf[gj])), []).append(hit)
    return pairs


def _differ(xlo: I32, xhi: I32, ylo: I32, yhi: I32) -> Bool:
    """Whether thread sets X and Y (given by their extremes) hold two different threads.

    Empty sets have ``lo > hi``. Two nonempty sets always do, unless both are one thread.
    """
    nonempty = (xlo <= xhi) & (ylo <= yhi)
    one_and_same = (xlo == xhi) & (ylo == yhi) & (xlo == ylo)
    result: Bool = nonempty & ~one_and_same
    return result


def _witness(xlo: np.int32, xhi: np.int32, ylo: np.int32, yhi: np.int32) -> tuple[int, int]:
    """Two different threads, the first from X and the second from Y (``_differ`` holds)."""
    x0, x1, y0, y1 = int(xlo), int(xhi), int(ylo), int(yhi)
    for t1, t2 in ((x0, y0), (x0, y1), (x1, y0)):
        if t1 != t2:
            return t1, t2
    return x1, y1
