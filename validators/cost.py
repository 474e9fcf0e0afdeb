"""What emulating a plan costs, bounded from above before anything runs (docs/design.md, Emulator).

The emulator (``validators.emulator``) runs one straight-line program per path of the control
flow (``validators.interpreter``: every choice of arms and of skipping a loop that may run zero
times, each loop body run ``min(2, most)`` times), and each program once per emulated block.
On each it enumerates every access: ``threads x loop iterations`` elements (two stand-in
threads over every element for a broadcast, one round of the threads over the buffer for the
synthetic pattern of a buffer without accesses), keeps at most two threads per element, and
spreads those over the element's bytes; every range of a buffer gets a fresh slot per
iteration of the loops around it, and every barrier and the path's end check the arena's bytes
for races.

``emulation_cost`` adds all of that up, in units of one (thread, byte) access, over every path
and every block, with a fixed charge for each access and barrier run: it is never below what
the emulator does, so a request within a budget of units runs within the time and memory that
budget allows. ``peak`` is the most one path and block costs: what the emulator holds at once
is proportional to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planner.validators.interpreter import ITERATIONS
from planner.validators.program import block_of, dims3, runtime_barriers

if TYPE_CHECKING:
    from planner.core.models import Access, Plan, PlanRequest

__all__ = ["RUN_CHARGE", "EmulationCost", "emulation_cost"]

# Units charged for each access and each barrier the emulator runs, whatever their bytes: the
# numpy calls around one cost about as much as a thousand (thread, byte) accesses.
RUN_CHARGE = 1024
_BLOCK_VARS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_ROOT = 0


@dataclass(frozen=True)
class EmulationCost:
    """An upper bound on one emulation's work, and where most of it comes from."""

    total: int  # units over every path and block
    peak: int  # units of the costliest path in one block
    paths: int  # straight-line programs the control flow gives
    blocks: int  # blocks emulated per path
    costliest: str  # the buffer whose accesses cost most ("" when none)
    costliest_units: int  # their units over every path and block


@dataclass
class _Sum:
    """Over the paths through one region: how many, their total cost, the largest one's,
    and per buffer its share of the total."""

    paths: int = 1
    total: int = 0
    peak: int = 0
    by_buffer: dict[int, int] = field(default_factory=dict)


def emulation_cost(request: PlanRequest, plan: Plan, max_blocks: int) -> EmulationCost:
    """The cost of ``emulate(request, plan, max_blocks=max_blocks)``, from above."""
    found = _cost(request, plan, max_blocks)
    if request.cluster is None:
        return found
    from planner.validators.clusters import cluster_view

    # With a cluster the emulator also runs the kernel as the cluster rule sees it.
    more = _cost(*cluster_view(request, plan), max_blocks)
    top = found if found.costliest_units >= more.costliest_units else more
    return EmulationCost(
        total=found.total + more.total,
        peak=max(found.peak, more.peak),
        paths=max(found.paths, more.paths),
        blocks=found.blocks,
        costliest=top.costliest,
        costliest_units=top.costliest_units,
    )


def _cost(request: PlanRequest, plan: Plan, max_blocks: int) -> EmulationCost:
    if request.has_async:
        from planner.validators.asyncs import in_flight

        # What the emulator runs: each asynchronous access in flight until its covering sync.
        request = in_flight(request, runtime_barriers(request, plan), plan)
    block = block_of(request)
    threads = math.prod(block)
    grid = dims3(request.grid)
    used_axes = {
        axis
        for b in request.buffers
        for a in b.accesses or ()
        for axis, var in enumerate(_BLOCK_VARS)
        if (a.index or {}).get(var, 0) != 0
    }
    blocks = min(max_blocks, math.prod(grid[axis] for axis in used_axes))
    shared = {p.id for p in plan.placements if p.memory == "shared"}
    sizes = {b.id: b.size for b in request.buffers}
    placed = [p for p in plan.placements if p.memory == "shared"]
    span = max([0, *(p.offset + max(p.size, sizes.get(p.id, 0)) for p in placed)]) - min(
        [0, *(p.offset for p in placed)]
    )
    tree = _Regions(request)
    # Work items, each in the smallest region that holds it: (region, units, buffer or -1).
    items: list[tuple[int, int, int]] = []
    for i, b in enumerate(request.buffers):
        if b.id not in shared:
            continue
        for s, e in b.lifetimes:
            units = b.size  # the slot's record of written bytes
            if not b.accesses:
                units += 2 * _synthetic(b.size, threads)
            items.append((tree.holding(s, e), units, i))
        for a in b.accesses or ():
            items.append((tree.holding(a.at, a.at + 1), _access(a, b.size, threads), i))
    for p in runtime_barriers(request, plan):
        items.append((tree.holding(p, p + 1), span + RUN_CHARGE, -1))
    root_extra = 2 * span + RUN_CHARGE  # the arena, and the race check at the path's end
    whole = tree.sum(items, root_extra)
    by_buffer = {i: units * blocks for i, units in whole.by_buffer.items()}
    worst = max(by_buffer, key=lambda i: by_buffer[i], default=-1)
    return EmulationCost(
        total=whole.total * blocks,
        peak=whole.peak,
        paths=whole.paths,
        blocks=blocks,
        costliest="" if worst < 0 else request.buffers[worst].id,
        costliest_units=by_buffer.get(worst, 0),
    )


def _access(a: Access, size: int, threads: int) -> int:
    """Units of one run of access ``a`` on a buffer of ``size`` bytes."""
    n = size // a.bytes  # elements
    if a.threads == "all":
        return min(threads, 2) * n * a.bytes + RUN_CHARGE
    index = a.index or {}
    enumerated = threads * math.prod(extent for var, extent in a.loops.items() if index.get(var))
    # Every (thread, iteration) element, then at most two threads per element in the buffer,
    # each over the element's bytes.
    return enumerated + min(enumerated, 2 * n) * a.bytes + RUN_CHARGE


def _synthetic(size: int, threads: int) -> int:
    """Units of one of the synthetic write and read of a buffer without accesses."""
    width = 4 if size % 4 == 0 else 1
    n = size // width
    return threads * -(-n // threads) + size + RUN_CHARGE


class _Regions:
    """The program's regions: the whole program (0), each loop body, each arm; every loop and
    branch lies in the smallest region around it (as ``count_paths`` nests them)."""

    def __init__(self, request: PlanRequest) -> None:
        self.request = request
        # (start, end, rank): on equal ranges a loop lies inside an arm, a branch in a loop.
        self.spans: list[tuple[int, int, int]] = [(-(1 << 62), 1 << 62, 2)]
        self.loop_region: list[int] = []
        for loop in request.loops:
            self.loop_region.append(len(self.spans))
            self.spans.append((loop.start, loop.end, 0))
        self.arm_regions: list[list[int]] = []
        for br in request.branches:
            ids = []
            for s, e in br.arms:
                ids.append(len(self.spans))
                self.spans.append((s, e, 1))
            self.arm_regions.append(ids)
        self.children: dict[int, list[tuple[str, int]]] = {}
        for i, loop in enumerate(request.loops):
            r = self._smallest(loop.start, loop.end, {self.loop_region[i]}, loop_item=True)
            self.children.setdefault(r, []).append(("loop", i))
        for j, br in enumerate(request.branches):
            r = self._smallest(br.start, br.end, set(self.arm_regions[j]), loop_item=False)
            self.children.setdefault(r, []).append(("branch", j))

    def _smallest(self, lo: int, hi: int, exclude: set[int], *, loop_item: bool) -> int:
        best, key = _ROOT, (1 << 63, 0)
        for r, (s, e, rank) in enumerate(self.spans):
            if r == _ROOT or r in exclude or not (s <= lo and hi <= e):
                continue
            k = (e - s, (1 - rank) if loop_item else rank)
            if k < key:
                best, key = r, k
        return best

    def holding(self, lo: int, hi: int) -> int:
        """The innermost region holding points ``[lo, hi)`` (a loop before an equal arm)."""
        best, key = _ROOT, (1 << 63, 0)
        for r, (s, e, rank) in enumerate(self.spans):
            if r != _ROOT and s <= lo and hi <= e and (e - s, rank) < key:
                best, key = r, (e - s, rank)
        return best

    def sum(self, items: list[tuple[int, int, int]], root_extra: int) -> _Sum:
        """The sum over every path of the whole program."""
        direct: dict[int, list[tuple[int, int]]] = {}
        for region, units, buffer in items:
            direct.setdefault(region, []).append((units, buffer))
        direct.setdefault(_ROOT, []).append((root_extra, -1))
        return self._region(_ROOT, direct)

    def _region(self, region: int, direct: dict[int, list[tuple[int, int]]]) -> _Sum:
        # Its own items run once on every path through it; its loops and branches follow in
        # sequence: the paths multiply, and each part's total counts once per path of the rest.
        here = direct.get(region, [])
        own = sum(units for units, _ in here)
        result = _Sum(paths=1, total=own, peak=own)
        for units, buffer in here:
            if buffer >= 0:
                result.by_buffer[buffer] = result.by_buffer.get(buffer, 0) + units
        for kind, index in self.children.get(region, ()):
            part = self._loop(index, direct) if kind == "loop" else self._branch(index, direct)
            by_buffer = {i: u * part.paths for i, u in result.by_buffer.items()}
            for i, u in part.by_buffer.items():
                by_buffer[i] = by_buffer.get(i, 0) + u * result.paths
            result = _Sum(
                paths=result.paths * part.paths,
                total=result.total * part.paths + part.total * result.paths,
                peak=result.peak + part.peak,
                by_buffer=by_buffer,
            )
        return result

    def _loop(self, index: int, direct: dict[int, list[tuple[int, int]]]) -> _Sum:
        loop = self.request.loops[index]
        body = self._region(self.loop_region[index], direct)
        most = loop.most
        runs = ITERATIONS if most is None else max(1, min(ITERATIONS, most))
        # ``runs`` bodies in sequence, each on any of its paths; and the path that skips it.
        scale = runs * body.paths ** (runs - 1)
        return _Sum(
            paths=body.paths**runs + (1 if loop.fewest == 0 else 0),
            total=body.total * scale,
            peak=body.peak * runs,
            by_buffer={i: u * scale for i, u in body.by_buffer.items()},
        )

    def _branch(self, index: int, direct: dict[int, list[tuple[int, int]]]) -> _Sum:
        arms = [self._region(r, direct) for r in self.arm_regions[index]]
        by_buffer: dict[int, int] = {}
        for arm in arms:
            for i, u in arm.by_buffer.items():
                by_buffer[i] = by_buffer.get(i, 0) + u
        return _Sum(
            paths=sum(a.paths for a in arms),
            total=sum(a.total for a in arms),
            peak=max(a.peak for a in arms),
            by_buffer=by_buffer,
        )
