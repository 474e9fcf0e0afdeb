"""A kernel's structure as a compiler's IR gives it, turned into a request (docs/design.md,
Loops, several live ranges, exclusive branches).

A reader walks the kernel's operations in order and calls ``KernelShape``: every operation
gets one program point, a loop or a block-uniform branch opens a region, a barrier stands at
the point of its operation, and every access of a buffer is recorded at the point of the
operation that makes it. ``KernelShape.request`` then derives each buffer's lifetime:

- it starts at the buffer's first access and ends after its last one (the bytes hold nothing
  the kernel needs before the first write);
- an access inside a loop that does not hold the buffer's allocation may read what an earlier
  iteration wrote, so the lifetime covers that whole loop and the loop's own operation (the
  point before its body): live across the loop's boundary, never taken for a fresh buffer per
  iteration; a buffer allocated inside a loop is
  a fresh buffer per iteration and stays inside it;
- a lifetime that enters or leaves a loop covers the whole loop, and one that crosses the
  boundary of a branch's arm covers the whole branch, as the wire format asks.

Barrier candidates are the points where the reader may put a new barrier: only in code every
thread of the block runs (never inside a thread-dependent ``if`` or loop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["BufferShape", "KernelShape", "Unsupported"]


class Unsupported(Exception):  # noqa: N818  (a reason, not an error of the caller's)
    """The kernel holds something a reader cannot model exactly; the message names it."""


@dataclass
class BufferShape:
    """One buffer as the IR declares it."""

    id: str
    size: int  # bytes
    alignment: int  # bytes, a power of two
    scope: tuple[int, ...]  # the regions around its allocation, outermost first
    accesses: list[int] = field(default_factory=list)  # program points
    offset: int | None = None  # bytes, when the IR already places it
    dtype: str | None = None
    kind: str = "data"  # "mbarrier": an 8-byte mbarrier, accessed through the syncs naming it


@dataclass
class _Region:
    kind: str  # "loop" or "arm"
    start: int
    end: int = -1
    trips: int | None = None  # loops: exact trips when known
    branch: int = -1  # arms: the branch they belong to


class KernelShape:
    """Points, loops, branches, barriers and buffers of one kernel, in program order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.points = 0
        self.regions: list[_Region] = []
        self.branches: list[list[int]] = []  # region ids of each branch's arms
        self.stack: list[int] = []  # open regions
        self.barriers: list[int] = []
        self.candidates: list[int] = []
        self.buffers: dict[str, BufferShape] = {}
        self.divergent = 0  # open thread-dependent regions
        # Buffers whose accesses the reader lists (asynchronous ones among them), and the
        # syncs that complete those.
        self.listed: dict[str, list[dict[str, Any]]] = {}
        self.syncs: list[dict[str, Any]] = []

    # Walking ------------------------------------------------------------------------------

    def point(self, *, candidate: bool = True) -> int:
        """The next program point; a barrier may go before it when ``candidate`` and no
        thread-dependent region is open."""
        p = self.points
        self.points += 1
        if candidate and not self.divergent:
            self.candidates.append(p)
        return p

    def open_loop(self, trips: int | None) -> None:
        """A loop body starts at the next point; ``trips`` when known exactly (at least 1)."""
        self.regions.append(_Region("loop", self.points, trips=trips))
        self.stack.append(len(self.regions) - 1)

    def close(self) -> None:
        """The innermost open loop or arm ends before the next point."""
        region = self.regions[self.stack.pop()]
        if region.start == self.points:  # an empty body or arm: one point with nothing
            self.point(candidate=False)
        region.end = self.points

    def open_branch(self) -> None:
        """A block-uniform branch: its arms follow (``open_arm``, ``close``)."""
        self.branches.append([])

    def open_arm(self) -> None:
        self.regions.append(_Region("arm", self.points, branch=len(self.branches) - 1))
        self.branches[-1].append(len(self.regions) - 1)
        self.stack.append(len(self.regions) - 1)

    def barrier(self, at: int) -> None:
        if self.divergent:
            raise Unsupported(f"a barrier at point {at} inside thread-dependent control flow")
        self.barriers.append(at)

    def allocate(self, buffer: BufferShape) -> None:
        if buffer.id in self.buffers:
            raise Unsupported(f"buffer {buffer.id!r} is allocated twice")
        self.buffers[buffer.id] = buffer

    def scope(self) -> tuple[int, ...]:
        return tuple(self.stack)

    def access(self, buffer_id: str, at: int) -> None:
        self.buffers[buffer_id].accesses.append(at)

    # The request --------------------------------------------------------------------------

    def lifetime(self, b: BufferShape) -> tuple[int, int] | None:
        """``[start, end)`` of a buffer's bytes, or None when it is never accessed."""
        if not b.accesses:
            return None
        lo, hi = min(b.accesses), max(b.accesses) + 1
        for p in b.accesses:
            for r in self._outside_scope(p, b.scope):
                region = self.regions[r]
                if region.kind == "loop":
                    # From the loop's own operation (the point before its body): the bytes
                    # carry from one iteration to the next, so the buffer is live across the
                    # loop's boundary, not a fresh buffer per iteration.
                    lo, hi = min(lo, region.start - 1), max(hi, region.end)
                    break  # the outermost such loop holds the inner ones
        changed = True
        while changed:
            changed = False
            for region in self.regions:
                s, e = region.start, region.end
                if region.kind == "arm":
                    arms = [self.regions[a] for a in self.branches[region.branch]]
                    s, e = arms[0].start, arms[-1].end
                    inside = any(a.start <= lo and hi <= a.end for a in arms)
                    if inside:
                        continue
                inside = s <= lo and hi <= e
                if lo < e and s < hi and not (lo <= s and e <= hi) and not inside:
                    lo, hi = min(lo, s), max(hi, e)  # enters or leaves it: covers it all
                    changed = True
        return lo, hi

    def _outside_scope(self, at: int, scope: tuple[int, ...]) -> list[int]:
        """The regions around point ``at`` that do not hold the allocation, outermost first."""
        around = [r for r, region in enumerate(self.regions) if region.start <= at < region.end]
        around.sort(key=lambda r: (self.regions[r].start, -self.regions[r].end))
        return [r for r in around if r not in scope]

    def request(self, *, target: str | None, time_limit: float) -> dict[str, Any]:
        """The request: buffers that are accessed, with their lifetimes; loops, branches,
        barriers; sync "insert" at the candidate points."""
        buffers = []
        for b in self.buffers.values():
            life = self.lifetime(b)
            if life is None:
                continue
            entry: dict[str, Any] = {
                "id": b.id,
                "size": b.size,
                "start": life[0],
                "end": life[1],
                "alignment": b.alignment,
            }
            if b.kind == "mbarrier":
                entry["kind"] = "mbarrier"
            elif b.id in self.listed:
                entry["accesses"] = self.listed[b.id]
            buffers.append(entry)
        loops = []
        for region in self.regions:
            if region.kind == "loop":
                loop: dict[str, Any] = {"start": region.start, "end": region.end}
                if region.trips is not None and region.trips >= 1:
                    loop["trips"] = region.trips
                loops.append(loop)
        branches = [
            {"arms": [[self.regions[a].start, self.regions[a].end] for a in arms]}
            for arms in self.branches
        ]
        # Points past the last lifetime's end order nothing: the request leaves them out.
        horizon = max((b["end"] for b in buffers), default=0)
        barriers = sorted(p for p in set(self.barriers) if p <= horizon)
        candidates = sorted(p for p in set(self.candidates) - set(barriers) if p <= horizon)
        request: dict[str, Any] = {
            "name": self.name,
            "alignment": 1,
            "barriers": barriers,
            "buffers": buffers,
            "options": {
                "sync": "insert",
                "time_limit": time_limit,
                "barrier_candidates": candidates,
            },
        }
        if target is not None:
            request["target"] = target
        syncs = sorted((s for s in self.syncs if s["at"] <= horizon), key=lambda s: s["at"])
        if syncs:
            request["syncs"] = syncs
        if loops:
            request["loops"] = _merge_same(loops)
        if branches:
            request["branches"] = branches
        return request

    def placed(self) -> dict[str, int]:
        """Offsets of the buffers the IR already places (those accessed)."""
        return {
            b.id: b.offset
            for b in self.buffers.values()
            if b.offset is not None and self.lifetime(b) is not None
        }


def _merge_same(loops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nested loops over the same points as one loop whose trips multiply (unknown when
    either is)."""
    merged: dict[tuple[int, int], dict[str, Any]] = {}
    for loop in loops:
        key = (loop["start"], loop["end"])
        if key not in merged:
            merged[key] = dict(loop)
            continue
        have = merged[key]
        if "trips" in have and "trips" in loop:
            have["trips"] *= loop["trips"]
        else:
            have.pop("trips", None)
    return list(merged.values())
