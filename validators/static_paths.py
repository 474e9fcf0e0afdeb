"""The static check of a request with loops, exclusive branches or several live ranges.

The request is flattened by ``validators.unroll`` into straight-line executions (each choice
of arms, each loop body repeated twice); in each, every buffer range becomes pieces at the
buffer's offset and the barriers are replicated into every copy. The straight-line sweep of
``validators.sweep`` then runs per execution, and every violation is reported once, under the
original buffer ids and program points, with the loop copies it happened in.

Rule (b) (a thread-local alias) is taken per pair of ranges over all the accesses of each
range: stricter than the straight-line rule, which counts the later buffer's accesses only up
to its first barrier. Two pieces of one buffer (a range and its next iteration, or two ranges)
with the same layout need no listing in ``aliases``.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from planner.core.access import OwnerMap, byte_owners, owners_agree
from planner.validators.sweep import Aliasing, Collector, Extent, sweep
from planner.validators.unroll import (
    ControlFlow,
    Copy,
    Execution,
    TooManyExecutionsError,
    executions,
)

if TYPE_CHECKING:
    from planner.core.models import Plan, PlanRequest, ViolationCode

__all__ = ["PathCheck", "control_flow"]


def control_flow(request: PlanRequest) -> ControlFlow:
    """The request's loops and branches as plain integers."""
    return ControlFlow(
        loops=tuple((lp.start, lp.end, lp.fewest, lp.most) for lp in request.loops),
        branches=tuple(
            tuple((arm[0], arm[1]) for arm in branch.arms) for branch in request.branches
        ),
    )


class _PieceAliases:
    """Rule (b) between two ranges: each shared byte untouched by one of them or touched by one
    and the same thread in both, over all the accesses of each range."""

    def __init__(self, request: PlanRequest, plan: Plan, opaque: set[int]) -> None:
        self.request = request
        self.opaque = opaque  # buffers planned as per-block footprints: any thread
        listed = {(pair[0], pair[1]) for pair in plan.aliases if len(pair) == 2}
        self.claimed = listed | {(b.id, b.id) for b in request.buffers}
        self._maps: dict[tuple[int, int], OwnerMap | None] = {}

    def _owners(self, index: int, part: int) -> OwnerMap | None:
        key = (index, part)
        if key not in self._maps:
            b = self.request.buffers[index]
            s, e = b.lifetimes[part]
            kept = [a for a in b.accesses if s <= a.at < e]
            if not kept:
                self._maps[key] = None
            else:
                buffers = list(self.request.buffers)
                buffers[index] = b.model_copy(update={"accesses": kept})
                request = self.request.model_copy(update={"buffers": buffers})
                self._maps[key] = byte_owners(request, index)
        return self._maps[key]

    def holds(self, a: Extent, b: Extent) -> bool:
        if a.buffer in self.opaque or b.buffer in self.opaque:
            return False
        if max(a.lo, b.lo) >= min(a.hi, b.hi):
            return False
        first, later = self._owners(a.buffer, a.part), self._owners(b.buffer, b.part)
        if first is None or later is None:
            return False
        return owners_agree(first, a.lo, later, b.lo)


class PathCheck:
    """The sweeps of one request and plan over every straight-line execution."""

    def __init__(
        self,
        request: PlanRequest,
        plan: Plan,
        barriers: list[int],
        opaque: set[int],
        out: Collector,
    ) -> None:
        self.request = request
        self.barriers = barriers  # run-time barriers, original points
        self.aliases = _PieceAliases(request, plan, opaque)
        self.out = out
        self.claims = [list(pair) for pair in plan.aliases]
        self.stretched: dict[tuple[int, int], tuple[int, ...]] = {}  # (buffer, range) -> loops
        self.seen: set[tuple[str, tuple[str, ...], int | None]] = set()
        horizon = max(
            [request.horizon, *(p + 1 for p in barriers), *(loop.end for loop in request.loops)]
        )
        try:
            self.executions: list[Execution] = list(executions(control_flow(request), horizon))
        except TooManyExecutionsError as exc:
            self.executions = []
            self.add("too_many_paths", f"{exc}; the plan is not checked", [], None)

    def add(self, code: ViolationCode, message: str, buffers: list[str], point: int | None) -> None:
        key = (code, tuple(buffers), point)
        if key not in self.seen:
            self.seen.add(key)
            self.out.add(code, message, buffers, point)

    def check_claims(self, arenas: list[list[Extent]]) -> None:
        """Every claimed alias names two placed buffers that share bytes, and some range of
        one and some range of the other obey rule (b). A claim covers the pair's reuses with
        no barrier between; with several ranges, others may be barrier-protected (a range
        after the barrier that follows the alias) and need not obey it. Every reuse with no
        barrier is judged on its own two ranges by the sweep. The arenas are the shared one
        and the workspace: a claim names two buffers of one."""
        by_id = {e.id: (k, e) for k, extents in enumerate(arenas) for e in extents}
        for pair in self.claims:
            if len(pair) != 2 or pair[0] not in by_id or pair[1] not in by_id:
                self.add("bad_alias", f"alias {pair} does not name two placed buffers", pair, None)
                continue
            (arena_a, a), (arena_b, b) = by_id[pair[0]], by_id[pair[1]]
            parts_a = range(len(self.request.buffers[a.buffer].lifetimes))
            parts_b = range(len(self.request.buffers[b.buffer].lifetimes))
            if arena_a != arena_b:
                why = "is in another memory than"
            elif not (a.lo < b.hi and b.lo < a.hi):
                why = "shares no byte with"
            elif not any(
                self.aliases.holds(a._replace(part=i), b._replace(part=j))
                for i in parts_a
                for j in parts_b
            ):
                why = "shares bytes touched by different threads (or any thread) with"
            else:
                continue
            self.add("bad_alias", f"claimed alias: {a.id!r} {why} {b.id!r}", [a.id, b.id], None)

    def sweep(self, extents: list[Extent]) -> None:
        """The straight-line sweep of ``extents`` (one per buffer, as placed) in every
        execution."""
        if not extents:
            return  # nothing placed: no pair to judge
        ranges = [
            (e, part, s, end, sorted({a.at for a in buffer.accesses if s <= a.at < end}))
            for e in extents
            for buffer in (self.request.buffers[e.buffer],)
            for part, (s, end) in enumerate(buffer.lifetimes)
        ]
        for ex in self.executions:
            pieces: list[Extent] = []
            copies: dict[tuple[int, int, int], Copy] = {}
            stretched = self.stretched
            for e, part, s, end, points in ranges:
                occurrences = ex.occurrences(points) if points else []
                for piece in ex.pieces(s, end):
                    touched = [u for u in occurrences if piece.start <= u < piece.end]
                    first = min(touched, default=piece.start)
                    last = max(touched, default=piece.end - 1)
                    pieces.append(
                        Extent(
                            e.id,
                            e.lo,
                            e.hi,
                            piece.start,
                            piece.end,
                            e.buffer,
                            first,
                            last,
                            part,
                        )
                    )
                    copies[e.buffer, part, piece.start] = piece.copy
                    stretched[e.buffer, part] = piece.stretched
            barriers = ex.occurrences(self.barriers)
            sweep(pieces, barriers, self.aliases, self.out, _Reporter(self, ex, copies))


class _Reporter:
    """Judges a pair of pieces as ``sweep.report_pair`` does; reports it in original terms."""

    def __init__(
        self, check: PathCheck, ex: Execution, copies: dict[tuple[int, int, int], Copy]
    ) -> None:
        self.check = check
        self.ex = ex
        self.copies = copies

    def __call__(
        self, a: Extent, b: Extent, barriers: list[int], aliases: Aliasing, out: Collector
    ) -> None:
        lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)  # shared bytes
        where = self.ex.origin(b.start)
        if b.start >= a.end:
            k = bisect.bisect_right(barriers, a.last)
            if k < len(barriers) and barriers[k] <= b.first:
                return
            if aliases.holds(a, b):
                if (a.id, b.id) in aliases.claimed:
                    return
                self.check.add(
                    "missing_barrier",
                    f"{self._name(b)} reuses bytes [{lo}, {hi}) of {self._name(a)} with no "
                    "barrier; the pair is a thread-local alias but the plan does not list it "
                    "in aliases",
                    [a.id, b.id],
                    where,
                )
                return
            self.check.add(
                "missing_barrier",
                f"{self._name(b)} (first access at point {self._point(b, b.first)}) reuses bytes "
                f"[{lo}, {hi}) of {self._name(a)} (last access at point {self._point(a, a.last)}) "
                "with no barrier between them",
                [a.id, b.id],
                where,
            )
            return
        self.check.add(
            "overlap",
            f"{self._name(a)} at [{a.lo}, {a.hi}) and {self._name(b)} at [{b.lo}, {b.hi}) share "
            f"bytes [{lo}, {hi}) while both are live (from point {where})",
            [a.id, b.id],
            where,
        )

    def _name(self, e: Extent) -> str:
        s, end = self.check.request.buffers[e.buffer].lifetimes[e.part]
        copy = _copy_label(self.copies[e.buffer, e.part, e.start])
        whole = "".join(
            f", live over every iteration of loops.{i}"
            for i in self.check.stretched.get((e.buffer, e.part), ())
        )
        return f"{e.id!r} (range [{s}, {end}){copy}{whole})"

    def _point(self, e: Extent, unrolled: int) -> str:
        """An unrolled point of ``e``'s piece, with the copies of the loops the piece spans."""
        known = {i for i, _ in self.copies[e.buffer, e.part, e.start]}
        inner = tuple(c for c in self.ex.copy_at(unrolled) if c[0] not in known)
        return f"{self.ex.origin(unrolled)}{_copy_label(inner)}"


def _copy_label(copy: Copy) -> str:
    return "".join(f", iteration {k + 1} of loops.{i}" for i, k in copy)
