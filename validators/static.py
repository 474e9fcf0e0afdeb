"""The exact static check of a plan against its request (docs/design.md, Static check).

It depends on the data types alone, never on the graph, the solvers or the pipeline, so it is
an independent check of whatever they produce. A bad plan never raises: every problem becomes
a ``Violation`` whose message names the buffers and the numbers.

Overlaps and missing barriers come from one sweep over *barrier-extended* lifetimes: a
buffer occupies its bytes from its start until its end or, if later, the first run-time
barrier after its last access. A later buffer that starts inside that window and shares a
byte is an ``overlap`` while the first is still live, and a ``missing_barrier`` after,
unless a barrier stands between the first one's last access and the later one's first
access, or the pair is a thread-local alias (docs/design.md, Reuse hazard, rule (b)) listed
in ``aliases`` and proved here from the owner maps of ``planner.core.access``. Every such
pair is reported, exactly.

With ``options.shrink`` a buffer indexed by ``blockIdx`` is placed with its per-block
footprint's size, recomputed here from its accesses.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from planner.core.access import OwnerMap, byte_owners, owners_agree
from planner.core.columns import columns
from planner.core.indexed import Indexed
from planner.core.patterns import block_slice
from planner.core.rings import expand, stride
from planner.validators.sweep import Collector, Columns, Extent, ReportFullError, sweep

if TYPE_CHECKING:
    from planner.core.models import (
        Buffer,
        Placement,
        Plan,
        PlanRequest,
        ValidationReport,
        Violation,
        ViolationCode,
    )
    from planner.validators.partition_paths import PathProgram

__all__ = ["validate_plan"]

# The report is sorted in this order; the checks run in it too, but for bad_barrier, which
# runs before the one sweep that finds overlaps and missing barriers.
_CODES: tuple[ViolationCode, ...] = (
    "missing_buffer",
    "unknown_buffer",
    "duplicate_buffer",
    "wrong_size",
    "bad_footprint",
    "misaligned",
    "pinned_moved",
    "wrong_arena",
    "over_capacity",
    "overlap",
    "bad_barrier",
    "missing_barrier",
    "bad_alias",
    "missing_fence",
    "missing_inval",
    "missing_wait",
    "missing_cluster_barrier",
    "too_many_paths",
)
_CODE_ORDER = {code: rank for rank, code in enumerate(_CODES)}
_FITTING_STATUSES = ("optimal", "feasible")  # plans that claim to fit the capacity
_LIST_PREVIEW = 8  # list items shown in a message before "..."


class _Aliases:
    """Rule (b) for a pair, from the owner maps: each shared byte is untouched by one of the
    two buffers or touched by one and the same thread in both (the later one's accesses
    counted up to its first barrier at or after its first access)."""

    def __init__(self, request: PlanRequest, plan: Plan, barriers: list[int]) -> None:
        self.request = request
        self.barriers = barriers
        self.claimed = {(pair[0], pair[1]) for pair in plan.aliases if len(pair) == 2}
        self.opaque = _shrunk(request)  # bytes move between blocks: any thread
        self._maps: dict[tuple[int, int | None], OwnerMap] = {}

    def _owners(self, index: int, before: int | None) -> OwnerMap:
        if (index, before) not in self._maps:
            self._maps[index, before] = byte_owners(self.request, index, before=before)
        return self._maps[index, before]

    def holds(self, a: Extent, b: Extent) -> bool:
        bufs = self.request.buffers
        if a.buffer in self.opaque or b.buffer in self.opaque:
            return False
        if not (bufs[a.buffer].accesses and bufs[b.buffer].accesses):
            return False
        lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
        if lo >= hi:
            return False
        k = bisect.bisect_left(self.barriers, b.first)
        cut = self.barriers[k] if k < len(self.barriers) else None
        # The placed extent may be smaller than the buffer (a per-block footprint): only the
        # extents' shared bytes count.
        first = _clip(self._owners(a.buffer, None), a.hi - a.lo)
        later = _clip(self._owners(b.buffer, cut), b.hi - b.lo)
        return owners_agree(first, a.lo, later, b.lo)


def _clip(runs: OwnerMap, size: int) -> OwnerMap:
    """The owner map of the first ``size`` bytes."""
    if size >= runs.size:
        return runs
    keep = runs.starts < max(size, 1)
    return replace(runs, starts=runs.starts[keep], values=runs.values[keep], size=size)


def _shrunk(request: PlanRequest) -> dict[int, int]:
    """Buffer index -> planned bytes, for the buffers ``options.shrink`` plans smaller."""
    if not request.options.shrink:
        return {}
    out: dict[int, int] = {}
    for i, b in enumerate(request.buffers):
        part = block_slice(request, b)
        if part is not None and part.size < b.size:
            out[i] = part.size
    return out


def validate_plan(
    request: PlanRequest, plan: Plan, *, max_violations: int = 1000
) -> ValidationReport:
    """Check ``plan`` against ``request`` and return every violation, up to ``max_violations``.

    ``truncated`` is set when more violations exist than are listed; the checks stop there.
    The same request and plan always give the same report. The steps: rings expanded into
    their stages, cluster barriers, then partitions (their own checks) or the asynchronous
    accesses' syncs, then the placements and the reuse of bytes (``_check_lifetimes``).
    """
    # Imported here: planner/__init__ imports the pipeline, which imports this package, so a
    # module-level import would make `import validators` on its own a circular import.
    from planner.core.models import ValidationReport, Violation

    if max_violations < 0:
        raise ValueError(f"max_violations must be >= 0, got {max_violations!r}")
    out = Collector(max_violations, Violation)
    if request.rings:
        expanded = _ring_request(request, plan, out)
        if expanded is None:
            violations = sorted(out.items, key=_sort_key)
            return ValidationReport(valid=False, violations=violations, truncated=False)
        request = expanded
    if request.cluster is not None:
        _check_clusters(request, plan, out)
    if request.partitions:
        _check_partitioned(request, plan, out)
    else:
        if request.has_async:
            request = _check_async(request, plan, out)
        with contextlib.suppress(ReportFullError):  # the report is full: the checks stop
            _check_lifetimes(request, plan, out)
    violations = sorted(out.items, key=_sort_key)
    return ValidationReport(
        valid=not violations and not out.truncated,
        violations=violations,
        truncated=out.truncated,
    )


def _check_async(request: PlanRequest, plan: Plan, out: Collector) -> PlanRequest:
    """Asynchronous accesses: every one waited for, mbarriers invalidated before their bytes
    are taken, proxy fences; then the request with each asynchronous access in flight until
    its covering sync, as the agent's own."""
    from planner.validators.asyncs import in_flight, unfenced, uninvalidated, unwaited
    from planner.validators.program import runtime_barriers as running

    for buffer, at, why in unwaited(request, plan):
        out.add("missing_wait", f"never completes: {why}", [buffer], at)
    for mbarrier, later, why in uninvalidated(request, plan):
        out.add(
            "missing_inval",
            f"{later!r} takes bytes of mbarrier {mbarrier!r}: {why}",
            [mbarrier, later],
        )
    for earlier, later, why in unfenced(request, plan):
        out.add(
            "missing_fence",
            f"{later!r} reads or writes through the async proxy bytes that {earlier!r} wrote "
            f"through the generic proxy: {why}",
            [earlier, later],
        )
    return in_flight(request, running(request, plan), plan)


def _check_lifetimes(request: PlanRequest, plan: Plan, out: Collector) -> None:
    """Placements, alignment, footprints, the arena and the barriers, then every reuse of
    bytes: on the program's paths (loops, branches, ranges) or on one straight line."""
    extents = _check_placements(request, plan, out)
    _check_base_alignment(request, plan, out)
    _check_footprints(request, plan, out)
    _check_arena(request, plan, out)
    runtime_barriers = _check_barriers(request, plan, out)
    workspace = _workspace(request, plan)
    if request.has_control_flow:
        from planner.validators.static_paths import PathCheck  # loops, branches, ranges

        paths = PathCheck(request, plan, runtime_barriers, set(_shrunk(request)), out)
        listed = list(extents)
        paths.check_claims([listed, workspace])
        paths.sweep(listed)
        _check_workspace(request, plan, workspace, out, paths.sweep)
    else:
        aliases = _Aliases(request, plan, runtime_barriers)
        _check_aliases(request, plan, [extents, workspace], aliases, out)
        sweep(extents, runtime_barriers, aliases, out)
        _check_workspace(
            request, plan, workspace, out, lambda e: sweep(e, runtime_barriers, aliases, out)
        )


def _check_partitioned(request: PlanRequest, plan: Plan, out: Collector) -> None:
    """A request with partitions: the placement checks, then every pair on common bytes
    against the partitions' happens-before order (``planner.validators.partitions``)."""
    from planner.validators.partitions import check_partitions

    try:
        _check_placements(request, plan, out)
        _check_base_alignment(request, plan, out)
        _check_arena(request, plan, out)
        runtime = _check_barriers(request, plan, out)
        if request.loops or request.branches:
            from planner.validators.partition_paths import on_paths  # loops, branches

            found = on_paths(request, plan, runtime, _check_path)
            for code, message, buffers, _ in found:
                out.add(code, message, buffers)  # type: ignore[arg-type]
            return
        for code, message, buffers in check_partitions(request, plan, runtime):
            out.add(code, message, buffers)  # type: ignore[arg-type]
    except ReportFullError:
        pass


def _check_path(path: PathProgram) -> list[tuple[str, str, list[str], int | None]]:
    """The partitioned check of one path of a request with loops or branches."""
    from planner.validators.partitions import check_partitions

    found = check_partitions(path.request, path.plan, path.barriers)
    return [(code, message, buffers, None) for code, message, buffers in found]


def _ring_request(request: PlanRequest, plan: Plan, out: Collector) -> PlanRequest | None:
    """The request with every ring at the depth the plan states (docs/design.md, Rings);
    None, with a violation per ring, when the plan states no depth or one out of range."""
    stated = {r.id: r for r in plan.rings or ()}
    copies: dict[str, int] = {}
    for i in request.rings:
        b = request.buffers[i]
        assert b.copies is not None
        ring = stated.get(b.id)
        if ring is None:
            out.add("wrong_size", f"ring {b.id!r} has no depth in the plan's rings", [b.id])
        elif not b.copies.min <= ring.copies <= b.copies.max:
            out.add(
                "wrong_size",
                f"ring {b.id!r} has {ring.copies} copies; the request allows "
                f"{b.copies.min} to {b.copies.max}",
                [b.id],
            )
        elif ring.stride != stride(request, b):
            out.add(
                "wrong_size",
                f"ring {b.id!r} has stride {ring.stride} bytes; its slots are "
                f"{stride(request, b)} bytes apart",
                [b.id],
            )
        else:
            copies[b.id] = ring.copies
    if len(copies) < len(request.rings):
        return None
    return expand(request, copies)


def _sort_key(v: Violation) -> tuple[int, list[str], int, str]:
    return (_CODE_ORDER[v.code], v.buffers, -1 if v.point is None else v.point, v.message)


def _preview(points: Sequence[int]) -> str:
    if len(points) <= _LIST_PREVIEW:
        return str(list(points))
    head = ", ".join(str(p) for p in points[:_LIST_PREVIEW])
    return f"[{head}, ...] ({len(points)} in all)"


def _check_placements(request: PlanRequest, plan: Plan, out: Collector) -> Sequence[Extent]:
    """Placement set, sizes, alignment and pins; returns the extents the arena checks use.

    A buffer placed twice is checked at its first placement only. Placements in global memory
    are outside the shared arena and take no part in the arena checks.
    """
    fast = _planned_extents(request, plan)
    if fast is not None:
        return fast
    first, count = _first_placements(request, plan, out)
    extents: list[Extent] = []
    shrunk = _shrunk(request)
    for index, b in enumerate(request.buffers):
        size = shrunk.get(index, b.size)  # bytes the kernel touches per block
        if b.id not in first:
            out.add(
                "missing_buffer",
                f"buffer {b.id!r} ({b.size} bytes, live [{b.start}, {b.end})) has no placement",
                [b.id],
            )
            continue
        p = first[b.id]
        _check_placement(request, b, p, size, count[b.id], out)
        if p.memory == "shared":
            # The kernel touches the buffer's own size, whatever the placement claims.
            extents.append(_extent(b, index, p.offset, size))
    return extents


def _first_placements(
    request: PlanRequest, plan: Plan, out: Collector
) -> tuple[dict[str, Placement], dict[str, int]]:
    """Each buffer's first placement and how many it has; placements naming no buffer are
    reported."""
    known = {b.id for b in request.buffers}
    first: dict[str, Placement] = {}
    count: dict[str, int] = {}
    unknown: dict[str, list[Placement]] = {}
    for p in plan.placements:
        if p.id in known:
            count[p.id] = count.get(p.id, 0) + 1
            first.setdefault(p.id, p)
        else:
            unknown.setdefault(p.id, []).append(p)

    for pid, ps in unknown.items():
        where = ", ".join(f"offset {p.offset} ({p.size} bytes)" for p in ps[:_LIST_PREVIEW])
        more = f" and {len(ps) - _LIST_PREVIEW} more" if len(ps) > _LIST_PREVIEW else ""
        out.add(
            "unknown_buffer",
            f"placement {pid!r} at {where}{more} names no buffer of the request",
            [pid],
        )
    return first, count


def _check_placement(
    request: PlanRequest, b: Buffer, p: Placement, size: int, count: int, out: Collector
) -> None:
    """One buffer's first placement (of ``count``): size ``size`` bytes, aligned, at its pin."""
    if count > 1:
        out.add(
            "duplicate_buffer",
            f"buffer {b.id!r} has {count} placements; only the first, at offset "
            f"{p.offset}, is checked further",
            [b.id],
        )
    if p.size != size:
        per_block = " per block" if size != b.size else ""
        out.add(
            "wrong_size",
            f"placement of {b.id!r} has size {p.size} bytes; the buffer has {size}{per_block}",
            [b.id],
        )
    align = request.alignment_of(b)
    if p.offset < 0:
        out.add("misaligned", f"buffer {b.id!r} has negative offset {p.offset}", [b.id])
    elif p.offset % align:
        out.add(
            "misaligned",
            f"offset {p.offset} of {b.id!r} is not a multiple of its alignment {align} "
            f"(remainder {p.offset % align})",
            [b.id],
        )
    if b.offset is not None and (p.offset != b.offset or p.memory != "shared"):
        where = f"offset {p.offset}" if p.memory == "shared" else f"{p.memory} memory"
        out.add(
            "pinned_moved",
            f"buffer {b.id!r} is pinned at offset {b.offset} but placed at {where}",
            [b.id],
        )


def _check_base_alignment(request: PlanRequest, plan: Plan, out: Collector) -> None:
    """The base alignment a plan states (``launch.base_alignment``) covers every buffer's
    alignment, since a buffer's absolute address is the base plus its offset (a swizzled TMA
    tile takes its pattern from the address), and stays within what the target guarantees.
    A request with a TMA tile or a target given as figures needs it stated; a version-1 plan
    leaves it out and its base is the request's largest alignment."""
    stated = plan.launch.base_alignment
    tiles = [b.id for b in request.buffers if b.swizzle is not None]
    if stated is None:
        if tiles or not isinstance(request.target, (str, type(None))):
            why = (
                f"TMA tiles ({', '.join(tiles[:_LIST_PREVIEW])})"
                if tiles
                else "a target given as figures"
            )
            out.add(
                "misaligned",
                "the plan does not state the base alignment it assumes "
                f"(launch.base_alignment), which a request with {why} needs",
                tiles,
            )
        return
    if stated < 1 or stated & (stated - 1):
        out.add("misaligned", f"launch.base_alignment {stated} is not a power of two")
        return
    short = [b for b in request.buffers if request.alignment_of(b) > stated]
    for b in short[:_LIST_PREVIEW]:
        out.add(
            "misaligned",
            f"{b.id!r} needs {request.alignment_of(b)}-byte alignment of its absolute address, "
            f"but the plan assumes a base aligned to {stated} bytes only",
            [b.id],
        )
    profile = request.profile
    if profile is not None and stated > profile.base_alignment:
        out.add(
            "misaligned",
            f"the plan assumes a {stated}-byte aligned base; target {profile.name!r} "
            f"guarantees {profile.base_alignment}",
        )


def _planned_extents(request: PlanRequest, plan: Plan) -> _Planned | None:
    """The extents, when the placements are the request's buffers in its order, each once, in
    shared memory, of the right size, aligned and at their pins (as the planner places
    them): then ``_check_placements`` has nothing to report, and these list-wide tests on
    arrays are many times faster at 100 000 buffers. None otherwise."""
    bufs, placed = request.buffers, plan.placements
    n = len(bufs)
    if len(placed) != n or [p.id for p in placed] != [b.id for b in bufs]:
        return None
    if any(p.memory != "shared" for p in placed):
        return None

    def column(values: Iterable[int]) -> npt.NDArray[np.int64]:
        return np.fromiter(values, dtype=np.int64, count=n)

    cols = columns(request)
    size = cols.size.copy()
    for index, planned in _shrunk(request).items():
        size[index] = planned
    offset = column(p.offset for p in placed)
    pin = cols.pinned
    if (
        not np.array_equal(column(p.size for p in placed), size)
        or bool((offset < 0).any())
        or bool((offset % cols.alignment).any())
        or bool(((pin >= 0) & (pin != offset)).any())
    ):
        return None
    start, end = cols.start.copy(), cols.end.copy()
    first, last = start.copy(), end - 1
    for i, b in enumerate(bufs):
        if b.accesses:
            points = [a.at for a in b.accesses]
            first[i], last[i] = min(points), max(points)
    return _Planned(bufs, offset, offset + size, start, end, first, last)


class _Planned(Indexed[Extent]):
    """The extents of a plan as the planner makes them, held as arrays: the compiled
    pre-sweep reads the columns (``validators.sweep``), and ``Extent`` tuples are made only
    when a check needs them."""

    def __init__(
        self,
        bufs: Sequence[Buffer],
        lo: npt.NDArray[np.int64],
        hi: npt.NDArray[np.int64],
        start: npt.NDArray[np.int64],
        end: npt.NDArray[np.int64],
        first: npt.NDArray[np.int64],
        last: npt.NDArray[np.int64],
    ) -> None:
        self.bufs = bufs
        self.lo, self.hi, self.start, self.end = lo, hi, start, end
        self.first, self.last = first, last

    def columns(self) -> Columns:
        return self.lo, self.hi, self.start, self.end, self.last

    def __len__(self) -> int:
        return len(self.bufs)

    def item(self, i: int) -> Extent:
        return Extent(
            self.bufs[i].id,
            int(self.lo[i]),
            int(self.hi[i]),
            int(self.start[i]),
            int(self.end[i]),
            i,
            int(self.first[i]),
            int(self.last[i]),
        )

    def __iter__(self) -> Iterator[Extent]:
        lo, hi, start, end = (c.tolist() for c in (self.lo, self.hi, self.start, self.end))
        first, last = self.first.tolist(), self.last.tolist()
        for i, b in enumerate(self.bufs):
            yield Extent(b.id, lo[i], hi[i], start[i], end[i], i, first[i], last[i])


def _extent(b: Buffer, index: int, offset: int, size: int) -> Extent:
    """Buffer ``b`` (request index ``index``) as placed: ``size`` bytes at ``offset``."""
    if not b.accesses:
        return Extent(b.id, offset, offset + size, b.start, b.end, index, b.start, b.end - 1)
    points = [a.at for a in b.accesses]
    return Extent(b.id, offset, offset + size, b.start, b.end, index, min(points), max(points))


def _check_footprints(request: PlanRequest, plan: Plan, out: Collector) -> None:
    """The plan's footprints are exactly the per-block slices ``options.shrink`` plans."""
    expected: dict[str, tuple[int, int, dict[str, int]]] = {}
    for index, planned in _shrunk(request).items():
        b = request.buffers[index]
        part = block_slice(request, b)
        assert part is not None
        expected[b.id] = (b.size, planned, {**part.coefficients, "constant": part.constant})
    listed: dict[str, tuple[int, int, dict[str, int]]] = {}
    for f in plan.footprints:
        if f.id in listed:
            out.add("bad_footprint", f"footprint of {f.id!r} is listed twice", [f.id])
        listed[f.id] = (f.declared, f.planned, dict(f.index_base))
    for ident in sorted(set(expected) | set(listed)):
        want, got = expected.get(ident), listed.get(ident)
        if want == got:
            continue
        if want is None:
            out.add(
                "bad_footprint",
                f"footprint of {ident!r} is listed but the buffer is planned whole",
                [ident],
            )
        else:
            declared, planned, base = want
            out.add(
                "bad_footprint",
                f"footprint of {ident!r} should be declared {declared}, planned {planned}, "
                f"index_base {base}; the plan says {got}",
                [ident],
            )


def _check_aliases(
    request: PlanRequest,
    plan: Plan,
    arenas: Sequence[Sequence[Extent]],
    aliases: _Aliases,
    out: Collector,
) -> None:
    """Every claimed alias names two sequential buffers of one arena (the shared one or the
    workspace) that share bytes and obey rule (b)."""
    if not plan.aliases:
        return
    by_id = {e.id: (k, e) for k, extents in enumerate(arenas) for e in extents}
    for pair in plan.aliases:
        if len(pair) != 2 or pair[0] not in by_id or pair[1] not in by_id:
            out.add("bad_alias", f"alias {pair} does not name two placed buffers", list(pair))
            continue
        (arena_a, a), (arena_b, b) = by_id[pair[0]], by_id[pair[1]]
        if arena_a != arena_b:
            why = "is in another memory than"
        elif a.end > b.start:
            why = "is not live strictly before"
        elif not (a.lo < b.hi and b.lo < a.hi):
            why = "shares no byte with"
        elif not aliases.holds(a, b):
            why = "shares bytes touched by different threads (or any thread) with"
        else:
            continue
        out.add("bad_alias", f"claimed alias: {a.id!r} {why} {b.id!r}", [a.id, b.id])


def _check_arena(request: PlanRequest, plan: Plan, out: Collector) -> None:
    shared = [p for p in plan.placements if p.memory == "shared"]
    arena = max(0, max((p.offset + p.size for p in shared), default=0))  # bytes
    if plan.arena_bytes != arena:
        top = max(shared, key=lambda p: (p.offset + p.size, p.id, p.offset), default=None)
        why = (
            f", reached by {top.id!r} at [{top.offset}, {top.offset + top.size})"
            if top is not None and arena > 0
            else ""
        )
        out.add(
            "wrong_arena",
            f"arena_bytes is {plan.arena_bytes} but max(offset + size) over shared placements "
            f"is {arena}{why}",
            [top.id] if top is not None and arena > 0 else [],
        )
    capacity = request.effective_capacity
    used = max(arena, plan.arena_bytes)
    if plan.status in _FITTING_STATUSES and capacity is not None and used > capacity:
        out.add(
            "over_capacity",
            f"plan with status {plan.status!r} uses {used} bytes (arena_bytes "
            f"{plan.arena_bytes}, placements reach {arena}), over the capacity of {capacity} "
            f"by {used - capacity}",
        )


def _check_barriers(request: PlanRequest, plan: Plan, out: Collector) -> list[int]:
    """The barrier lists against the request and its sync policy; returns the run-time barriers.

    Run-time barriers are the request's plus the inserted ones, and under sync ``"none"`` also
    the required ones, which the caller guarantees.
    """
    existing = sorted(set(request.barriers))
    inserted = plan.barriers.inserted
    required = plan.barriers.required
    options = request.options
    if plan.barriers.existing != existing:
        out.add(
            "bad_barrier",
            f"barriers.existing is {_preview(plan.barriers.existing)} but the request's "
            f"barriers are {_preview(existing)}",
        )
    if options.sync == "existing" and inserted:
        out.add(
            "bad_barrier",
            f"sync 'existing' allows no new barrier, but {len(inserted)} are inserted: "
            f"{_preview(inserted)}",
        )
    if options.sync == "insert":
        candidates = None if options.barrier_candidates is None else set(options.barrier_candidates)
        existing_set = set(existing)
        seen: set[int] = set()
        for p in inserted:
            if p in seen:
                out.add("bad_barrier", f"inserted barrier at point {p} is listed twice", point=p)
                continue
            seen.add(p)
            if candidates is not None and p not in candidates:
                out.add(
                    "bad_barrier",
                    f"inserted barrier at point {p} is not among options.barrier_candidates",
                    point=p,
                )
            if p in existing_set:
                out.add(
                    "bad_barrier",
                    f"inserted barrier at point {p} is already an existing barrier",
                    point=p,
                )
        cap = options.max_new_barriers
        if cap is not None and len(seen) > cap:
            out.add(
                "bad_barrier",
                f"{len(seen)} barriers inserted, over options.max_new_barriers = {cap}",
            )
    if options.sync in ("existing", "insert"):
        have = set(existing) | set(inserted)
        for p in sorted(set(required) - have):
            out.add(
                "bad_barrier",
                f"required barrier at point {p} is neither existing nor inserted",
                point=p,
            )
    runtime = set(existing) | set(inserted)
    if options.sync == "none":
        runtime |= set(required)
    if request.cluster is not None:
        from planner.validators.clusters import running_cluster_barriers

        runtime |= set(running_cluster_barriers(request, plan))  # block barriers too
    return sorted(runtime)


def _check_clusters(request: PlanRequest, plan: Plan, out: Collector) -> None:
    """The cluster barrier lists against the request and its sync policy, and the cluster rule
    (``planner.validators.clusters``) by this check's own sweep."""
    from planner.validators.clusters import cluster_view, scoped_violations

    listed = plan.cluster_barriers
    if listed is None:
        out.add("bad_barrier", "the request has a cluster but the plan lists no cluster_barriers")
        return
    own = sorted({s.at for s in request.syncs if s.kind == "cluster_barrier"})
    sync = request.options.sync
    if listed.existing != own:
        out.add(
            "bad_barrier",
            f"cluster_barriers.existing is {_preview(listed.existing)} but the request's "
            f"cluster barriers are {_preview(own)}",
        )
    if listed.inserted and sync != "insert":
        out.add(
            "bad_barrier",
            f"sync {sync!r} inserts no cluster barrier, but the plan inserts "
            f"{_preview(listed.inserted)}",
        )
    candidates = request.options.barrier_candidates
    for p in listed.inserted:
        if p in own or (candidates is not None and p not in candidates):
            out.add(
                "bad_barrier",
                f"inserted cluster barrier at point {p} is already the request's or no "
                "barrier candidate",
                point=p,
            )
    if sync != "none":
        for p in sorted(set(listed.required) - set(own) - set(listed.inserted)):
            out.add(
                "bad_barrier",
                f"required cluster barrier at point {p} is neither existing nor inserted",
                point=p,
            )
    if request.partitions:
        # On the partitions' own reading: completions by their covering syncs.
        from planner.validators.partitions import check_cluster_rule

        for code, message, buffers in check_cluster_rule(request, plan):
            out.add(code, message, buffers)  # type: ignore[arg-type]
        return
    view, seen = cluster_view(request, plan)
    found = validate_plan(view, seen, max_violations=out.limit).violations
    for v in scoped_violations(request, found, ("missing_barrier",)):
        out.add(v.code, v.message, v.buffers, point=v.point)


def _workspace(request: PlanRequest, plan: Plan) -> list[Extent]:
    """The buffers placed in the global workspace, as placed."""
    spans = {b.id: b for b in request.buffers}
    index = {b.id: i for i, b in enumerate(request.buffers)}
    placed = [p for p in plan.placements if p.memory == "global" and p.id in spans]
    return [_extent(spans[p.id], index[p.id], p.offset, spans[p.id].size) for p in placed]


def _check_workspace(
    request: PlanRequest,
    plan: Plan,
    workspace: list[Extent],
    out: Collector,
    check_reuse: Callable[[list[Extent]], None],
) -> None:
    """The global workspace of spilled buffers (``workspace``): an arena of its own, checked
    like the shared one (``global_bytes``, overlaps and barriers), and ``spilled`` lists
    exactly its buffers."""
    ids = [e.id for e in workspace]
    if sorted(plan.spilled) != sorted(set(ids)):
        out.add(
            "wrong_arena",
            f"spilled lists {_preview_ids(plan.spilled)} but the placements in global memory "
            f"are {_preview_ids(ids)}",
        )
    top = max((e.hi for e in workspace), default=0)  # bytes
    if plan.global_bytes != top:
        out.add(
            "wrong_arena",
            f"global_bytes is {plan.global_bytes} but max(offset + size) over global "
            f"placements is {top}",
        )
    check_reuse(workspace)


def _preview_ids(ids: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_LIST_PREVIEW])
    return f"[{shown}{', ...' if len(ids) > _LIST_PREVIEW else ''}]"
