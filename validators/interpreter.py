"""The kernel programs of a request with loops and branches: its control flow, run for real.

An interpreter walks the program points in order and follows the control flow as the kernel
would: at a loop's end it jumps back to the loop's start until the loop has run ``min(2,
most)`` times (two when its trips have no upper bound), a loop that may run zero times is
also skipped whole, and at a branch it takes one arm and skips the others. Every choice of
arms and of skipping, made afresh each time a branch or such a loop is reached, gives one
path; each path is a straight-line ``KernelProgram`` that the emulator and the CUDA harness run
unchanged. Barriers run wherever the walk passes their point.

A buffer range gets a fresh slot in the program (a ``ProgramBuffer`` at the buffer's offset)
each time the walk enters it anew: once per iteration of the loops wholly containing it. So
two iterations of a body, or two ranges of one buffer, are two buffers to the emulator: a
thread writing one while another thread reads the other, with no barrier between, is a race,
and the stamps of one never vouch for the other. A buffer without access patterns gets the
synthetic pattern per range: every thread writes at the range's start, reads rotated at its
last point.

Requests without loops, branches or ranges have one path: ``build_program``'s program.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from planner.core.rings import expand
from planner.validators.program import (
    AffineAccess,
    KernelProgram,
    ProgramBuffer,
    Step,
    affine_access,
    arena_base,
    block_of,
    build_program,
    dims3,
    rebased,
    runtime_barriers,
    synthetic_accesses,
)

if TYPE_CHECKING:
    from planner.core.models import Footprint, Plan, PlanRequest

__all__ = ["ITERATIONS", "MAX_PATHS", "TooManyPathsError", "build_programs"]

ITERATIONS = 2  # iterations run of a loop with more (or unbounded) trips
MAX_PATHS = 4096  # paths (choices of arms) a request may have
MAX_STEPS = 1 << 20  # steps on one path


class TooManyPathsError(ValueError):
    """The control flow has more paths, or a path more steps, than the limits allow."""


@dataclass(frozen=True)
class _Range:
    """One live range of a placed buffer, with the accesses that fall in it."""

    buffer: int  # request index
    part: int  # range index in the buffer
    start: int
    end: int
    size: int  # bytes placed: a footprint's planned size when the plan shrinks the buffer
    synthetic: bool  # no access pattern: the synthetic write and read, placed per path
    loops: tuple[int, ...]  # the loops wholly containing the range (one slot per iteration)
    at: dict[int, tuple[AffineAccess, ...]]  # point -> accesses (buffer 0: set per slot)


@dataclass
class _Frame:
    """A loop or a taken arm the walk is inside."""

    kind: str  # "loop" or "arm"
    index: int  # loop or branch index
    start: int
    end: int  # the loop's end, or the arm's
    rest: int  # loop: iterations left after this one; arm: the branch's end
    iteration: int = 0


def build_programs(request: PlanRequest, plan: Plan) -> list[KernelProgram]:
    """One kernel program per path of the request's control flow, in a fixed order.

    Raises ValueError for a footprint whose base is not a whole number of elements (as
    ``build_program``) and TooManyPathsError past ``MAX_PATHS`` paths or ``MAX_STEPS`` steps.
    Rings run at the depths the plan states (docs/design.md, Rings).
    """
    stated = {r.id: r.copies for r in plan.rings or ()}
    if request.rings and all(request.buffers[i].id in stated for i in request.rings):
        request = expand(request, stated)
    if not request.has_control_flow:
        return [build_program(request, plan)]
    return list(_Walker(request, plan).paths())


class _Walker:
    """Walks the points of one request and plan, one path at a time."""

    def __init__(self, request: PlanRequest, plan: Plan) -> None:
        self.request = request
        self.plan = plan
        self.block = block_of(request)
        self.grid = dims3(request.grid)
        self.barriers = set(runtime_barriers(request, plan))
        placed: dict[str, int] = {}
        for p in plan.placements:
            if p.memory == "shared":
                placed.setdefault(p.id, p.offset)
        self.offsets = placed
        footprints = {f.id: f for f in plan.footprints}
        self.ranges: list[_Range] = []
        for i, b in enumerate(request.buffers):
            if b.id in placed:
                for k, (s, e) in enumerate(b.lifetimes):
                    self.ranges.append(self._range(i, k, s, e, footprints.get(b.id)))
        self.loops = [(lp.start, lp.end, lp.fewest, lp.most) for lp in request.loops]
        self.branches = [[(arm[0], arm[1]) for arm in br.arms] for br in request.branches]
        events: set[int] = set(self.barriers)
        for r in self.ranges:
            events |= set(r.at) | ({r.start, r.end - 1} if r.synthetic else set())
        for s, e, _, _ in self.loops:
            events |= {s, e - 1, e}
        for arms in self.branches:
            events |= {s for s, _ in arms} | {e - 1 for _, e in arms} | {arms[-1][1]}
        self.events = sorted(events)
        # Synthetic ranges around each event: written at the first point a path runs in them,
        # read at the last (a point in an arm not taken does not run).
        self.synthetic_at: list[list[int]] = [[] for _ in self.events]
        for k, r in enumerate(self.ranges):
            if r.synthetic:
                lo = bisect.bisect_left(self.events, r.start)
                hi = bisect.bisect_left(self.events, r.end)
                for at in range(lo, hi):
                    self.synthetic_at[at].append(k)
        # Constructs entered at a point, outer first: a longer span first, a loop before a
        # branch of the same span (the loop holds the branch).
        self.entering: dict[int, list[tuple[str, int]]] = {}
        spans = [("loop", i, s, e) for i, (s, e, _, _) in enumerate(self.loops)]
        spans += [("branch", j, arms[0][0], arms[-1][1]) for j, arms in enumerate(self.branches)]
        for kind, index, s, _ in sorted(spans, key=lambda c: (c[2], -c[3], c[0] != "loop", c[1])):
            self.entering.setdefault(s, []).append((kind, index))
        self.live_at: dict[int, list[int]] = {}  # point -> ranges with accesses there
        for k, r in enumerate(self.ranges):
            for at in r.at:
                self.live_at.setdefault(at, []).append(k)

    def _range(self, index: int, part: int, s: int, e: int, footprint: Footprint | None) -> _Range:
        b = self.request.buffers[index]
        loops = tuple(
            i for i, loop in enumerate(self.request.loops) if loop.start <= s and e <= loop.end
        )
        at: dict[int, list[AffineAccess]] = {}
        size = b.size if footprint is None else footprint.planned
        if b.accesses:
            for a in b.accesses:
                if s <= a.at < e:
                    access = affine_access(0, a)
                    if footprint is not None:
                        access = rebased(access, footprint.index_base, b.id)
                    at.setdefault(a.at, []).append(access)
        return _Range(
            index, part, s, e, size, not b.accesses, loops, {p: tuple(v) for p, v in at.items()}
        )

    def paths(self) -> Iterator[KernelProgram]:
        """Every path, choices of arms in the order the walk meets them counted like an
        odometer (the last choice fastest)."""
        choices: list[int] = []
        count = 0
        while True:
            count += 1
            if count > MAX_PATHS:
                raise TooManyPathsError(
                    f"the loops and branches have more than {MAX_PATHS} paths to emulate"
                )
            program, arms = self._walk(choices)
            yield program
            taken = choices + [0] * (len(arms) - len(choices))
            k = len(arms) - 1
            while k >= 0 and taken[k] + 1 >= arms[k]:
                k -= 1
            if k < 0:
                return
            choices = [*taken[:k], taken[k] + 1]

    def _walk(self, choices: list[int]) -> tuple[KernelProgram, list[int]]:
        """The program of the path that takes ``choices`` at its first branches (arm 0 after
        them), and how many arms each branch it reached had."""
        events = self.events
        stack: list[_Frame] = []
        arms_seen: list[int] = []
        slots: dict[tuple[int, tuple[int, ...]], int] = {}  # (range, iterations) -> slot
        buffers: list[ProgramBuffer] = []
        steps: list[_Visit] = []
        spans: dict[int, list[int]] = {}  # synthetic slot -> [first step, last step]
        pos = 0
        while pos < len(events):
            p = events[pos]
            if stack and stack[-1].end <= p:  # leave what ends here, innermost first
                top = stack[-1]
                if top.kind == "loop" and top.rest > 0:  # the next iteration
                    top.rest -= 1
                    top.iteration += 1
                    pos = bisect.bisect_left(events, top.start)
                    continue
                stack.pop()
                if top.kind == "arm" and top.rest > p:  # skip the arms not taken
                    pos = bisect.bisect_left(events, top.rest)
                continue
            jump = self._enter(p, stack, arms_seen, choices)
            if jump is not None:
                pos = jump
            else:
                self._step(pos, stack, slots, buffers, steps, spans)
                pos += 1
        return self._program(buffers, steps, spans), arms_seen

    def _enter(
        self, p: int, stack: list[_Frame], arms_seen: list[int], choices: list[int]
    ) -> int | None:
        """Enter the loops and the chosen arms that start at point ``p`` (pushed on ``stack``,
        each choice's arm count on ``arms_seen``); the event index to go on from where a
        skipped loop or a later arm jumps ahead, else None."""
        events = self.events
        inside = {(f.kind, f.index) for f in stack}
        for kind, index in self.entering.get(p, ()):
            if kind == "loop" and ("loop", index) not in inside:
                s, e, fewest, most = self.loops[index]
                if fewest == 0:  # a choice: 0 runs the body, 1 skips it
                    d = len(arms_seen)
                    arms_seen.append(2)
                    if d < len(choices) and choices[d] == 1:
                        return bisect.bisect_left(events, e)
                runs = ITERATIONS if most is None else min(ITERATIONS, most)
                stack.append(_Frame("loop", index, s, e, runs - 1))
            elif kind == "branch" and ("arm", index) not in inside:
                arms = self.branches[index]
                d = len(arms_seen)
                chosen = choices[d] if d < len(choices) else 0
                arms_seen.append(len(arms))
                s, e = arms[chosen]
                stack.append(_Frame("arm", index, s, e, arms[-1][1]))
                if s > p:
                    return bisect.bisect_left(events, s)
        return None

    def _program(
        self, buffers: list[ProgramBuffer], steps: list[_Visit], spans: dict[int, list[int]]
    ) -> KernelProgram:
        """The walked steps as a program: each synthetic slot written at its first step and
        read at its last, steps with neither an access nor a barrier left out."""
        for slot, (first, last) in spans.items():
            size = buffers[slot].size
            write, read = (
                a for _, a in synthetic_accesses(slot, size, 0, 1 + (last > first), self.block)
            )
            steps[first].accesses.append(write)
            steps[last].accesses.append(read)
        kept = tuple(
            Step(v.point, v.barrier, tuple(v.accesses), v.copies)
            for v in steps
            if v.accesses or v.barrier
        )
        return KernelProgram(
            self.plan.arena_bytes,
            self.block,
            self.grid,
            tuple(buffers),
            kept,
            arena_base(self.request, self.plan),
        )

    def _step(
        self,
        pos: int,
        stack: list[_Frame],
        slots: dict[tuple[int, tuple[int, ...]], int],
        buffers: list[ProgramBuffer],
        steps: list[_Visit],
        spans: dict[int, list[int]],
    ) -> None:
        """Run the event at ``pos``: its accesses, and note it in the synthetic ranges around."""
        if len(steps) >= MAX_STEPS:
            raise TooManyPathsError(
                f"a path of the loops and branches runs more than {MAX_STEPS} steps"
            )
        p = self.events[pos]
        iteration = {f.index: f.iteration for f in stack if f.kind == "loop"}
        copies = tuple((f.index, f.iteration) for f in stack if f.kind == "loop")
        visit = _Visit(p, p in self.barriers, [], copies)
        for k in self.live_at.get(p, ()):
            slot = self._slot(k, iteration, slots, buffers)
            visit.accesses += [_for_slot(a, slot) for a in self.ranges[k].at[p]]
        for k in self.synthetic_at[pos]:
            span = spans.setdefault(self._slot(k, iteration, slots, buffers), [len(steps), 0])
            span[1] = len(steps)
        steps.append(visit)

    def _slot(
        self,
        k: int,
        iteration: dict[int, int],
        slots: dict[tuple[int, tuple[int, ...]], int],
        buffers: list[ProgramBuffer],
    ) -> int:
        """The program buffer of range ``k`` in the current iterations of its loops."""
        r = self.ranges[k]
        key = (k, tuple(iteration.get(i, 0) for i in r.loops))
        if key not in slots:
            slots[key] = len(buffers)
            b = self.request.buffers[r.buffer]
            buffers.append(
                ProgramBuffer(
                    b.id,
                    self.offsets[b.id],
                    r.size,
                    r.start,
                    r.end,
                    synthetic=r.synthetic,
                    alignment=self.request.alignment_of(b),
                )
            )
        return slots[key]


@dataclass
class _Visit:
    """A point the walk ran: a step of the program once its accesses are known."""

    point: int
    barrier: bool
    accesses: list[AffineAccess]
    copies: tuple[tuple[int, int], ...]  # (loop index, iteration) of the loops around


def _for_slot(access: AffineAccess, slot: int) -> AffineAccess:
    return replace(access, buffer=slot)
