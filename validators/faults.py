"""Planted faults: break a good plan on purpose so the validators can be seen to catch it.

Each kind breaks one rule of docs/design.md (Program points and lifetimes, Offsets and
the arena, Reuse hazard), and only when the break is real:

- ``overlap``: slide a buffer over one that is live at the same time;
- ``drop_barrier``: drop a barrier some reuse needs, one that leaves a byte touched by two
  different threads with no barrier between (an inserted barrier, a required one under sync
  "none", or, changing the request, one of the request's);
- ``misalign``: move a buffer off its alignment;
- ``misalign_tile``: put a swizzled TMA tile at an address off its swizzle's alignment, by
  moving it half its alignment (still a multiple of every smaller alignment) or by halving
  the base alignment the plan states (needs a buffer with ``swizzle``);
- ``early_barrier``: move the one barrier that orders a reuse after an asynchronous access's
  covering sync to just before that sync, so the later buffer takes the bytes while the
  access may still run (a reuse before the covering wait; needs an asynchronous access);
- ``drop_fence``: drop the ``fence_proxy_async`` that a reuse of thread-written bytes by TMA or
  wgmma needs: one the plan adds or requires, or (changing the request) the request's;
- ``drop_inval``: drop the mbarrier_inval an mbarrier's bytes wait for before a later buffer
  takes them (one the plan inserts or requires; or, changing the request, the request's), with
  partitions or without;
- ``drop_wait``: drop the wait_group that completes an asynchronous access (one the plan
  inserts or requires; or, changing the request, the request's), so the access never completes
  in its scope and live range, with partitions or without;
- ``break_alias``: make the later buffer of a thread-local alias touch its bytes from every
  thread (changes the request; needs a plan with ``aliases``);
- ``drop_back_edge``: drop a barrier of a loop body that the body's own buffer needs between
  its last access in one iteration and its first in the next;
- ``arm_overlap``: slide a buffer of one branch arm over a buffer live across the whole branch
  (sharing bytes with a buffer of another arm is legal: never that);
- ``range_overlap``: slide a buffer with several live ranges over one that is live during its
  second or a later range (and not during its first);
- ``drop_cluster_barrier``: drop the cluster barrier that orders a reuse of cluster-scoped bytes
  by another buffer (one the plan inserts or requires, or, changing the request, the
  request's), so a peer CTA may still touch the earlier buffer's bytes (straight-line
  requests with a cluster, with partitions or without).
- ``drop_partition_sync``: in a request with partitions, drop a sync that orders a reuse across
  (or within) partitions: a barrier, named barrier or proxy fence the plan inserts or
  requires, or (changing the request) a
  named barrier, an mbarrier arrive or a proxy fence of the request, such that two buffers on
  common bytes are left unordered (cross-partition reuse without its arrive/wait edge).

The last three need loops, branches or several ranges, and take buffers without access
patterns, whose synthetic accesses (every thread writes at a range's start, a rotated read at
its last point) make the break visible to the emulator too.

``plant_fault`` returns the faulty request and plan; ``plant`` only faults that leave the
request as it is. Both return ``None`` when no fault of the kind fits the plan, and are
deterministic for a given generator state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_args

import numpy as np

from planner.core.access import ANY, NONE, byte_owners
from planner.validators.program import block_of, runtime_barriers

if TYPE_CHECKING:
    from planner.core.models import Buffer, Placement, Plan, PlanRequest
    from planner.core.models.plan import Fence, Wait

__all__ = ["FAULT_KINDS", "Fault", "FaultKind", "live_together", "plant", "plant_fault"]

FaultKind = Literal[
    "overlap",
    "drop_barrier",
    "misalign",
    "misalign_tile",
    "early_barrier",
    "drop_fence",
    "drop_inval",
    "drop_wait",
    "break_alias",
    "drop_back_edge",
    "arm_overlap",
    "range_overlap",
    "drop_cluster_barrier",
    "drop_partition_sync",
]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
Rng = np.random.Generator | random.Random
_T = TypeVar("_T")
_F = TypeVar("_F")  # a hazard a dropped synchronisation leaves


@dataclass(frozen=True)
class Fault:
    """A broken plan and the request to check it against."""

    kind: FaultKind
    request: PlanRequest  # the original, unless the fault had to change it
    plan: Plan
    buffers: tuple[str, ...]  # the buffers the fault involves
    description: str
    point: int | None = None  # the program point involved, where one applies


def plant(request: PlanRequest, plan: Plan, kind: FaultKind, rng: Rng) -> Plan | None:
    """A copy of ``plan`` with one fault of ``kind`` that needs no change to ``request``."""
    fault = _plant(request, plan, kind, rng, plan_only=True)
    return None if fault is None else fault.plan


def plant_fault(request: PlanRequest, plan: Plan, kind: FaultKind, rng: Rng) -> Fault | None:
    """One fault of ``kind``, changing the request too when the fault needs it."""
    return _plant(request, plan, kind, rng, plan_only=False)


_PARTITION_KINDS = (
    "overlap",
    "misalign",
    "misalign_tile",
    "drop_partition_sync",
    "drop_cluster_barrier",
    "drop_inval",
    "drop_wait",
)


def _plant(
    request: PlanRequest, plan: Plan, kind: FaultKind, rng: Rng, *, plan_only: bool
) -> Fault | None:
    if request.partitions and kind not in _PARTITION_KINDS:
        return None  # the kinds built on the block-wide program order have no place here
    if kind == "drop_partition_sync":
        return _drop_partition_sync(request, plan, rng, plan_only=plan_only)
    if kind == "overlap":
        return _overlap(request, plan, rng)
    if kind == "drop_barrier":
        return _drop_barrier(request, plan, rng, plan_only=plan_only)
    if kind == "misalign":
        return _misalign(request, plan, rng)
    if kind == "misalign_tile":
        return _misalign_tile(request, plan, rng)
    if kind == "early_barrier":
        return _early_barrier(request, plan, rng, plan_only=plan_only)
    if kind == "drop_fence":
        return _drop_fence(request, plan, rng, plan_only=plan_only)
    if kind == "drop_inval":
        return _drop_inval(request, plan, rng, plan_only=plan_only)
    if kind == "drop_wait":
        return _drop_wait(request, plan, rng, plan_only=plan_only)
    if kind == "break_alias":
        return None if plan_only else _break_alias(request, plan, rng)
    if kind == "drop_back_edge":
        return _drop_back_edge(request, plan, rng, plan_only=plan_only)
    if kind == "arm_overlap":
        return _arm_overlap(request, plan, rng)
    if kind == "range_overlap":
        return _range_overlap(request, plan, rng)
    if kind == "drop_cluster_barrier":
        return _drop_cluster_barrier(request, plan, rng, plan_only=plan_only)
    raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")


def _shuffled(rng: Rng, items: Sequence[_T]) -> list[_T]:
    order = list(items)
    if isinstance(rng, random.Random):
        rng.shuffle(order)
        return order
    return [order[k] for k in rng.permutation(len(order)).tolist()]


def _shared(plan: Plan) -> dict[str, Placement]:
    out: dict[str, Placement] = {}
    for p in plan.placements:
        if p.memory == "shared":
            out.setdefault(p.id, p)
    return out


def _moved(plan: Plan, buffer_id: str, offset: int) -> Plan:
    """``plan`` with ``buffer_id`` at ``offset``, arena and launch size kept consistent."""
    placements = [
        p.model_copy(update={"offset": offset}) if p.id == buffer_id else p for p in plan.placements
    ]
    arena = max((p.offset + p.size for p in placements if p.memory == "shared"), default=0)
    launch = plan.launch.model_copy(update={"dynamic_smem_bytes": arena})
    return plan.model_copy(
        update={"placements": placements, "arena_bytes": arena, "launch": launch}
    )


def _as_placed(request: PlanRequest, plan: Plan) -> PlanRequest:
    """``request`` as the kernel runs it: a shrunk buffer has its planned size and accesses
    that subtract the footprint's per-block base (as the kernel program does)."""
    footprints = {f.id: f for f in plan.footprints}
    if not footprints:
        return request
    buffers = list(request.buffers)
    for i, b in enumerate(buffers):
        f = footprints.get(b.id)
        if f is None:
            continue
        accesses = []
        for a in b.accesses:
            if a.index is not None and all(v % a.bytes == 0 for v in f.index_base.values()):
                index = dict(a.index)
                for var, per_block in f.index_base.items():
                    if var != "constant":
                        index[var] = index.get(var, 0) - per_block // a.bytes
                offset = a.offset - f.index_base.get("constant", 0) // a.bytes
                a = a.model_copy(update={"index": index, "offset": offset})
            accesses.append(a)
        buffers[i] = b.model_copy(update={"size": f.planned, "accesses": accesses})
    return request.model_copy(update={"buffers": buffers})


def _window(buffer: Buffer) -> tuple[int, int]:
    """First and last point with an access (the lifetime's ends without patterns)."""
    if not buffer.accesses:
        return buffer.start, buffer.end - 1
    points = [a.at for a in buffer.accesses]
    return min(points), max(points)


def _overlap(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    shared = _shared(plan)
    buffers = [b for b in _as_placed(request, plan).buffers if b.id in shared]
    pairs = [
        (a, b)
        for a in buffers
        for b in buffers
        if a.id != b.id and b.offset is None and live_together(request, a, b)
    ]

    # Prefer pairs that are accessed at the same time, not only live together.
    def busy(pair: tuple[Buffer, Buffer]) -> bool:
        (a0, a1), (b0, b1) = _window(pair[0]), _window(pair[1])
        return a0 <= b1 and b0 <= a1

    for a, b in sorted(_shuffled(rng, pairs), key=lambda pair: not busy(pair)):
        target = shared[a.id].offset
        align = request.alignment_of(b)
        down = target // align * align
        up = down if down == target else down + align
        for offset in (down, up):
            if offset >= 0 and offset < target + a.size and target < offset + b.size:
                moved = _moved(plan, b.id, offset)
                return Fault(
                    "overlap",
                    request,
                    moved,
                    (a.id, b.id),
                    f"slid {b.id!r} (live [{b.start}, {b.end})) from offset "
                    f"{shared[b.id].offset} to {offset}, over {a.id!r} at [{target}, "
                    f"{target + a.size}) live [{a.start}, {a.end})",
                    max(a.start, b.start),
                )
    return None


def _misalign(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    shared = _shared(plan)
    for b in _shuffled(rng, request.buffers):
        align = request.alignment_of(b)
        if b.id in shared and b.offset is None and align > 1:
            offset = shared[b.id].offset + align // 2
            return Fault(
                "misalign",
                request,
                _moved(plan, b.id, offset),
                (b.id,),
                f"moved {b.id!r} to offset {offset}, off its alignment {align}",
            )
    return None


def _misalign_tile(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    shared = _shared(plan)
    base = plan.launch.base_alignment
    for b in _shuffled(rng, [b for b in request.buffers if b.swizzle is not None]):
        align = request.alignment_of(b)
        if b.id not in shared:
            continue
        if base is not None and base >= align and rng.random() < 0.5:
            lowered = align // 2
            launch = plan.launch.model_copy(update={"base_alignment": lowered})
            return Fault(
                "misalign_tile",
                request,
                plan.model_copy(update={"launch": launch}),
                (b.id,),
                f"stated a {lowered}-byte base alignment under {b.id!r}, a swizzle "
                f"{b.swizzle} tile that needs {align}",
            )
        if b.offset is None:
            offset = shared[b.id].offset + align // 2
            return Fault(
                "misalign_tile",
                request,
                _moved(plan, b.id, offset),
                (b.id,),
                f"moved {b.id!r} (swizzle {b.swizzle}) to offset {offset}, off its {align}-byte "
                "alignment",
            )
    return None


def _early_barrier(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    from planner.core.models.sync import completions
    from planner.validators.asyncs import running_syncs

    syncs = running_syncs(request, plan)
    covered, _ = completions(request.buffers, syncs, request.loops, request.branches)
    if not covered or request.loops or request.branches or request.cluster is not None:
        return None
    shared = _shared(plan)
    runtime = runtime_barriers(request, plan)
    for c in _shuffled(rng, covered):
        a = request.buffers[c.buffer]
        if a.id not in shared:
            continue
        alo, ahi = shared[a.id].offset, shared[a.id].offset + a.size
        for b in request.buffers:
            if b.id not in shared or b is a or b.start < a.end:
                continue
            blo, bhi = shared[b.id].offset, shared[b.id].offset + b.size
            if not (alo < bhi and blo < ahi):
                continue
            first = min((x.at for x in b.accesses), default=b.start)
            window = [p for p in runtime if c.done <= p <= first]
            if len(window) != 1 or c.done - 1 in runtime or c.done - 1 < 0:
                continue
            p, q = window[0], c.done - 1
            moved = sorted({*[x for x in runtime if x != p], q})
            agent = a.accesses[c.access].agent
            what = (
                f"moved the barrier at {p} that orders {b.id!r} after {a.id!r}'s {agent} "
                f"access (issued at {c.issue}, covered at {c.done}) to {q}, before the "
                "covering sync"
            )
            if p in request.barriers:
                if plan_only:
                    continue
                barriers = sorted({*[x for x in request.barriers if x != p], q})
                changed = request.model_copy(update={"barriers": barriers})
                existing = plan.barriers.model_copy(
                    update={
                        "existing": barriers,
                        "required": [x for x in moved if x in plan.barriers.required or x == q],
                    }
                )
                return Fault(
                    "early_barrier",
                    changed,
                    plan.model_copy(update={"barriers": existing}),
                    (a.id, b.id),
                    what,
                    p,
                )
            inserted = sorted({*[x for x in plan.barriers.inserted if x != p], q})
            required = sorted({*[x for x in plan.barriers.required if x != p], q})
            listed = plan.barriers.model_copy(update={"inserted": inserted, "required": required})
            if request.options.sync != "insert":
                listed = plan.barriers.model_copy(update={"required": required})
            return Fault(
                "early_barrier",
                request,
                plan.model_copy(update={"barriers": listed}),
                (a.id, b.id),
                what,
                p,
            )
    return None


def _drop_fence(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    from planner.validators.asyncs import unfenced

    def says(finding: tuple[str, str, str]) -> tuple[tuple[str, ...], str]:
        earlier, later, _ = finding
        what = f"orders {earlier!r}'s writes before {later!r}'s async-proxy access"
        return (earlier, later), what

    return _drop_sync(
        _Dropped("drop_fence", "fences", "fence_proxy_async", unfenced, says, _fence_name),
        request,
        plan,
        rng,
        plan_only=plan_only,
    )


def _drop_inval(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    later_of = _partitioned_uninvalidated if request.partitions else _uninvalidated
    for v in _shuffled(rng, plan.invals):
        by = "" if v.partition is None else f" by {v.partition!r}"
        if v.origin != "existing":
            changed_plan = plan.model_copy(update={"invals": [x for x in plan.invals if x != v]})
            later = later_of(request, changed_plan, v.mbarrier)
            if later is not None:
                return Fault(
                    "drop_inval",
                    request,
                    changed_plan,
                    (v.mbarrier, later),
                    f"dropped the {v.origin} mbarrier_inval of {v.mbarrier!r}{by} at {v.at}",
                    v.at,
                )
            continue
        if plan_only:
            continue
        syncs = [
            s
            for s in request.syncs
            if not (s.kind == "mbarrier_inval" and s.mbarrier == v.mbarrier)
        ]
        changed = request.model_copy(update={"syncs": syncs})
        later = later_of(changed, plan, v.mbarrier)
        if later is not None:
            return Fault(
                "drop_inval",
                changed,
                plan,
                (v.mbarrier, later),
                f"dropped the request's mbarrier_inval of {v.mbarrier!r}{by} at {v.at}",
                v.at,
            )
    return None


def _uninvalidated(request: PlanRequest, plan: Plan, mbarrier: str) -> str | None:
    """A buffer that takes an mbarrier's bytes with no inval before it (the block-wide
    check, which names the first such pair whatever the mbarrier)."""
    from planner.validators.asyncs import uninvalidated

    broken = uninvalidated(request, plan)
    return broken[0][1] if broken else None


def _partitioned_uninvalidated(request: PlanRequest, plan: Plan, mbarrier: str) -> str | None:
    """The buffer that takes ``mbarrier``'s bytes with no inval, by the partitioned static
    check."""
    from planner.validators.partitions import check_partitions

    found = check_partitions(request, plan, runtime_barriers(request, plan))
    return next(
        (b[1] for code, _, b in found if code == "missing_inval" and b[0] == mbarrier), None
    )


def _drop_wait(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    # With partitions, the partitioned static check finds the access left in flight.
    if request.partitions:
        from planner.validators.partitions import unwaited
    else:
        from planner.validators.asyncs import unwaited

    def says(finding: tuple[str, int, str]) -> tuple[tuple[str, ...], str]:
        buffer, at, _ = finding
        return (buffer,), f"completes the asynchronous access of {buffer!r} at {at}"

    return _drop_sync(
        _Dropped("drop_wait", "waits", "wait_group", unwaited, says, _wait_name),
        request,
        plan,
        rng,
        plan_only=plan_only,
    )


def _fence_name(fence: Fence) -> str:
    return f"{fence.origin} fence_proxy_async"


def _wait_name(wait: Wait) -> str:
    return f"{wait.origin} {wait.kind} wait_group"


@dataclass(frozen=True)
class _Dropped(Generic[_F]):
    """A kind of synchronisation a fault drops: the plan's list of them (``field``), the
    request's sync kind, what finds the hazards its loss leaves, and the words for one."""

    kind: FaultKind
    field: Literal["fences", "waits"]
    sync_kind: str
    broken: Callable[[PlanRequest, Plan], list[_F]]
    says: Callable[[_F], tuple[tuple[str, ...], str]]  # the buffers involved, what it did
    named: Callable[[Any], str]  # one the plan lists, in words (a Fence or a Wait)


def _drop_sync(
    dropped: _Dropped[_F], request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool
) -> Fault | None:
    """Drop one sync the plan lists whose loss leaves a hazard; else (unless ``plan_only``)
    one of the request's own."""
    listed: Sequence[Any] = getattr(plan, dropped.field)
    for sync in _shuffled(rng, listed):
        changed_plan = plan.model_copy(update={dropped.field: [x for x in listed if x != sync]})
        found = dropped.broken(request, changed_plan)
        if found:
            buffers, what = dropped.says(found[0])
            text = f"dropped the {dropped.named(sync)} at {sync.at} that {what}"
            return Fault(dropped.kind, request, changed_plan, buffers, text, sync.at)
    if plan_only:
        return None
    own = [k for k, s in enumerate(request.syncs) if s.kind == dropped.sync_kind]
    for k in _shuffled(rng, own):
        changed = request.model_copy(
            update={"syncs": [s for j, s in enumerate(request.syncs) if j != k]}
        )
        found = dropped.broken(changed, plan)
        if found:
            buffers, what = dropped.says(found[0])
            sync = request.syncs[k]
            group = f"{sync.group} " if dropped.sync_kind == "wait_group" else ""
            text = f"dropped the request's {group}{dropped.sync_kind} at {sync.at} that {what}"
            return Fault(dropped.kind, changed, plan, buffers, text, sync.at)
    return None


def _hazard(
    request: PlanRequest,
    first: int,
    second: int,
    barriers: Sequence[int],
    shared: dict[str, Placement],
) -> bool:
    """Whether buffers ``first`` (ending earlier) and ``second`` race under ``barriers``.

    A race as the emulator sees it: a shared byte touched by two different threads, one for
    each buffer, with a write among them, between the last barrier before ``first``'s last
    access and the first barrier after ``second``'s first access.
    """
    a, b = request.buffers[first], request.buffers[second]
    pa, pb = shared[a.id], shared[b.id]
    lo, hi = max(pa.offset, pb.offset), min(pa.offset + a.size, pb.offset + b.size)
    if lo >= hi:
        return False
    last_a = _window(a)[1]
    first_b = _window(b)[0]
    if any(last_a < p <= first_b for p in barriers):
        return False
    since = max((p for p in barriers if p <= last_a), default=None)
    until = min((p for p in barriers if p > first_b), default=None)
    cut_a = slice(lo - pa.offset, hi - pa.offset)
    cut_b = slice(lo - pb.offset, hi - pb.offset)
    all_a = _owners(request, first, since, None, writes_only=False)[cut_a]
    all_b = _owners(request, second, None, until, writes_only=False)[cut_b]
    writes_a = _owners(request, first, since, None, writes_only=True)[cut_a]
    writes_b = _owners(request, second, None, until, writes_only=True)[cut_b]
    return bool((_differ(writes_a, all_b) | _differ(all_a, writes_b)).any())


def _differ(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per byte: thread sets X and Y (as owners) hold two different threads."""
    result: np.ndarray = (x != NONE) & (y != NONE) & ~((x == y) & (x >= 0))
    return result


def _owners(
    request: PlanRequest, index: int, since: int | None, until: int | None, *, writes_only: bool
) -> np.ndarray:
    """Byte owners of a buffer from its accesses (or writes) at points in ``[since, until)``."""
    buffer = request.buffers[index]
    if not buffer.accesses:
        return _synthetic_owners(request, buffer, since, until, writes_only=writes_only)
    kept = [
        a
        for a in buffer.accesses
        if (since is None or a.at >= since) and (not writes_only or a.op == "write")
    ]
    if not kept:
        return np.full(buffer.size, NONE, np.int32)
    buffers = list(request.buffers)
    buffers[index] = buffer.model_copy(update={"accesses": kept})
    request = request.model_copy(update={"buffers": buffers})
    return byte_owners(request, index, before=until).owners


def _synthetic_owners(
    request: PlanRequest, buffer: Buffer, since: int | None, until: int | None, *, writes_only: bool
) -> np.ndarray:
    """Byte owners under the synthetic pattern of the kernel program (docs/design.md, Emulator)."""
    threads = math.prod(block_of(request))
    width = 4 if buffer.size % 4 == 0 else 1  # bytes
    n = buffer.size // width  # elements
    element = np.arange(n, dtype=np.int64)
    low = np.full(n, np.iinfo(np.int32).max, np.int64)
    high = np.full(n, -1, np.int64)

    def seen(point: int, rotate: int) -> None:
        if (since is None or point >= since) and (until is None or point < until):
            touched = element >= rotate
            thread = (element - rotate) % threads
            low[touched] = np.minimum(low[touched], thread[touched])
            high[touched] = np.maximum(high[touched], thread[touched])

    last = buffer.end - 1
    seen(buffer.start, 0)  # the write: thread t on elements t + i*T
    if not writes_only:
        seen(last, 0 if last == buffer.start else 1)  # the read, rotated unless on one point
    owners = np.where(low == high, low, ANY)
    owners[high < 0] = NONE
    out = np.full(buffer.size, NONE, np.int32)
    out[: n * width] = np.repeat(owners, width)
    return out


def _reuses(request: PlanRequest, shared: dict[str, Placement]) -> list[tuple[int, int]]:
    """(earlier, later) buffer index pairs that share bytes one after the other.

    With loops, branches or ranges, only buffers of one range each, with no loop or arm
    boundary between the first's start and the second's end (every loop and arm holds that
    span or misses it): one straight stretch of the program, where the point order is the
    order of execution.
    """
    placed = [(i, b) for i, b in enumerate(request.buffers) if b.id in shared]
    out: list[tuple[int, int]] = []
    for i, a in placed:
        pa = shared[a.id]
        for j, b in placed:
            pb = shared[b.id]
            if (
                a.end <= b.start
                and pa.offset < pb.offset + b.size
                and pb.offset < pa.offset + a.size
                and (not request.has_control_flow or _straight(request, a, b))
            ):
                out.append((i, j))
    return out


def _straight(request: PlanRequest, a: Buffer, b: Buffer) -> bool:
    """Whether ``a`` then ``b`` (one range each) lie in one straight stretch of the program."""
    if len(a.lifetimes) > 1 or len(b.lifetimes) > 1:
        return False
    lo, hi = a.start, b.end
    spans = [(loop.start, loop.end) for loop in request.loops]
    spans += [(s, e) for branch in request.branches for s, e in branch.arms]
    return all(hi <= s or e <= lo or (s <= lo and hi <= e) for s, e in spans)


def _drop_barrier(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    shared = _shared(plan)
    placed = _as_placed(request, plan)
    reuses = _reuses(placed, shared)
    if not reuses:
        return None
    runtime = runtime_barriers(request, plan)
    in_request = set(request.barriers)
    clustered = _cluster_points(request, plan)  # dropped by drop_cluster_barrier only
    for p in _shuffled(rng, runtime):
        if (plan_only and p in in_request) or p in clustered:
            continue
        rest = [q for q in runtime if q != p]
        broken = next((r for r in reuses if _hazard(placed, r[0], r[1], rest, shared)), None)
        if broken is None:
            continue
        a, b = (request.buffers[k].id for k in broken)
        barriers = plan.barriers.model_copy(
            update={
                "existing": [q for q in plan.barriers.existing if q != p],
                "inserted": [q for q in plan.barriers.inserted if q != p],
                "required": [q for q in plan.barriers.required if q != p],
            }
        )
        faulty = request
        if p in in_request:
            faulty = request.model_copy(
                update={"barriers": [q for q in request.barriers if q != p]}
            )
        else:
            barriers = barriers.model_copy(update={"existing": plan.barriers.existing})
        return Fault(
            "drop_barrier",
            faulty,
            plan.model_copy(update={"barriers": barriers}),
            (a, b),
            f"dropped the barrier at {p}{' from the request' if p in in_request else ''}: "
            f"{b!r} reuses bytes of {a!r} with no barrier between their accesses",
            p,
        )
    return None


def _break_alias(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    aliases: list[list[str]] = list(getattr(plan, "aliases", None) or [])
    shared = _shared(plan)
    index = {b.id: i for i, b in enumerate(request.buffers)}
    runtime = runtime_barriers(request, plan)
    for pair in _shuffled(rng, aliases):
        if len(pair) != 2 or pair[0] not in index or pair[1] not in index:
            continue
        first, second = index[pair[0]], index[pair[1]]
        later = request.buffers[second]
        if not later.accesses or pair[0] not in shared or pair[1] not in shared:
            continue
        everyone = [
            a.model_copy(update={"index": None, "offset": 0, "loops": {}, "threads": "all"})
            for a in later.accesses
        ]
        buffers = list(request.buffers)
        buffers[second] = later.model_copy(update={"accesses": everyone})
        faulty = request.model_copy(update={"buffers": buffers})
        if not _hazard(_as_placed(faulty, plan), first, second, runtime, shared):
            continue
        return Fault(
            "break_alias",
            faulty,
            plan,
            (pair[0], pair[1]),
            f"made every thread touch {pair[1]!r}, which the plan aliases with {pair[0]!r} "
            "as touched by one thread per byte",
            later.start,
        )
    return None


def _without_barrier(request: PlanRequest, plan: Plan, p: int) -> tuple[PlanRequest, Plan]:
    """``request`` and ``plan`` without the barrier at ``p``: a request barrier leaves the
    request (and ``barriers.existing``), any other leaves the plan's lists."""
    barriers = plan.barriers.model_copy(
        update={
            "existing": [q for q in plan.barriers.existing if q != p],
            "inserted": [q for q in plan.barriers.inserted if q != p],
            "required": [q for q in plan.barriers.required if q != p],
        }
    )
    if p in request.barriers:
        faulty = request.model_copy(update={"barriers": [q for q in request.barriers if q != p]})
        return faulty, plan.model_copy(update={"barriers": barriers})
    barriers = barriers.model_copy(update={"existing": plan.barriers.existing})
    return request, plan.model_copy(update={"barriers": barriers})


def _in_arm(request: PlanRequest, lo: int, hi: int) -> tuple[int, int] | None:
    """(branch, arm) of an arm holding ``[lo, hi)`` wholly, the innermost; else None."""
    best: tuple[int, int, int] | None = None  # (arm length, branch, arm)
    for j, branch in enumerate(request.branches):
        for k, (s, e) in enumerate(branch.arms):
            if s <= lo and hi <= e and (best is None or e - s < best[0]):
                best = (e - s, j, k)
    return None if best is None else (best[1], best[2])


def _drop_back_edge(request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool) -> Fault | None:
    """Drop the one barrier of a loop body that separates a body buffer's last access in one
    iteration from the first access of a body buffer on the same bytes (itself, or one before
    it in the body) in the next: the next iteration's write then races with this one's
    rotated read."""
    if math.prod(block_of(request)) < 2 or request.cluster is not None:
        return None  # one thread: program order alone orders every access
    shared = _shared(plan)
    runtime = runtime_barriers(request, plan)
    in_request = set(request.barriers)
    candidates: set[tuple[int, str, str, int, int]] = set()  # (barrier, last, next, loop)
    for loop in request.loops:
        if not loop.repeats:
            continue
        body: list[tuple[Buffer, int, int]] = []  # plain ranges in the body, no inner loop
        for b in request.buffers:
            if b.accesses or b.id not in shared:
                continue
            for s, e in b.lifetimes:
                inner = any(
                    other != loop
                    and loop.start <= other.start
                    and other.end <= loop.end
                    and other.start < e
                    and s < other.end
                    for other in request.loops
                )
                if loop.start <= s and e <= loop.end and not inner:
                    body.append((b, s, e))
        for later, ls, le in body:
            for first, fs, fe in body:
                if fs > ls or (first.id == later.id and (fs, fe) != (ls, le)):
                    continue  # ``first`` must not start after ``later`` in the body
                pa, pb = shared[first.id], shared[later.id]
                if not (pa.offset < pb.offset + later.size and pb.offset < pa.offset + first.size):
                    continue
                if first.id == later.id and le - 1 == ls:
                    continue  # one point: each thread reads back its own write
                if min(first.size, later.size) < 8:
                    continue  # one 4-byte element or bytes: the rotated read may meet no writer
                # Barriers that may separate later's read at le - 1 (iteration i) from first's
                # write at fs (iteration i + 1): in the body after le - 1, or at or before fs.
                cover = [q for q in runtime if loop.start <= q < loop.end and not fs < q < le]
                if len(cover) == 1:
                    candidates.add((cover[0], later.id, first.id, loop.start, loop.end))
    for p, last, nxt, lo, hi in _shuffled(rng, sorted(candidates)):
        if plan_only and p in in_request:
            continue
        faulty, broken = _without_barrier(request, plan, p)
        return Fault(
            "drop_back_edge",
            faulty,
            broken,
            (last, nxt),
            f"dropped the barrier at {p}{' from the request' if p in in_request else ''}, the "
            f"only one in the loop [{lo}, {hi}) between {last!r}'s last access in one "
            f"iteration and {nxt!r}'s first in the next",
            p,
        )
    return None


def _arm_overlap(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    """Slide a buffer of an arm over one live across the whole branch."""
    shared = _shared(plan)
    plain = [b for b in request.buffers if not b.accesses and b.id in shared]
    pairs: list[tuple[Buffer, Buffer, tuple[int, int]]] = []
    for a in plain:
        if a.offset is not None:
            continue
        for s, e in a.lifetimes:
            arm = _in_arm(request, s, e)
            if arm is None:
                continue
            branch = request.branches[arm[0]]
            for b in plain:
                if b.id != a.id and any(
                    bs <= branch.start and branch.end <= be for bs, be in b.lifetimes
                ):
                    pairs.append((a, b, (s, e)))

    def say(a: Buffer, b: Buffer, span: tuple[int, int], offset: int) -> str:
        at = shared[b.id].offset
        return (
            f"slid {a.id!r} (live [{span[0]}, {span[1]}) in a branch arm) to offset {offset}, "
            f"over {b.id!r} at [{at}, {at + b.size}), live across the whole branch"
        )

    return _slid_over(request, plan, rng, "arm_overlap", pairs, say)


def _range_overlap(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    """Slide a buffer with several ranges over one live during a later range, not the first."""
    shared = _shared(plan)
    plain = [b for b in request.buffers if not b.accesses and b.id in shared]

    def meets(x: tuple[int, int], y: tuple[int, int]) -> bool:
        return x[0] < y[1] and y[0] < x[1]

    pairs: list[tuple[Buffer, Buffer, tuple[int, int]]] = []
    for b in plain:
        if b.offset is not None or len(b.lifetimes) < 2:
            continue
        first, *later = b.lifetimes
        for a in plain:
            if a.id == b.id or any(meets(first, r) for r in a.lifetimes):
                continue
            for span in later:
                if any(meets(span, r) and not _exclusive(request, span, r) for r in a.lifetimes):
                    pairs.append((a, b, span))
                    break

    def say(b: Buffer, a: Buffer, span: tuple[int, int], offset: int) -> str:
        return (
            f"slid {b.id!r} to offset {offset}, over {a.id!r}, live during {b.id!r}'s range "
            f"[{span[0]}, {span[1]})"
        )

    return _slid_over(request, plan, rng, "range_overlap", [(b, a, r) for a, b, r in pairs], say)


def _slid_over(
    request: PlanRequest,
    plan: Plan,
    rng: Rng,
    kind: FaultKind,
    moves: list[tuple[Buffer, Buffer, tuple[int, int]]],
    say: Callable[[Buffer, Buffer, tuple[int, int], int], str],
) -> Fault | None:
    """The first of ``moves`` (moving buffer, buffer it slides over, the span they meet in),
    in seeded random order, whose buffer can be slid onto the other's offset."""
    shared = _shared(plan)
    for moving, under, span in _shuffled(rng, moves):
        offset = _slide(request, moving, shared[under.id].offset)
        if offset is None:
            continue
        return Fault(
            kind,
            request,
            _moved(plan, moving.id, offset),
            (under.id, moving.id),
            say(moving, under, span, offset),
            span[0],
        )
    return None


def live_together(request: PlanRequest, a: Buffer, b: Buffer) -> bool:
    """Whether two buffers are live at a common point on some path: two of their ranges meet,
    not in different arms of one branch (their lifetimes meet, without ranges or branches)."""
    if not request.has_control_flow:
        return a.start < b.end and b.start < a.end
    return any(
        x[0] < y[1] and y[0] < x[1] and not _exclusive(request, x, y)
        for x in a.lifetimes
        for y in b.lifetimes
    )


def _exclusive(request: PlanRequest, x: tuple[int, int], y: tuple[int, int]) -> bool:
    """Whether two point ranges lie in different arms of one branch."""
    for branch in request.branches:
        arms = [
            k for k, (s, e) in enumerate(branch.arms) for r in (x, y) if s <= r[0] and r[1] <= e
        ]
        if len(arms) == 2 and arms[0] != arms[1]:
            return True
    return False


def _slide(request: PlanRequest, moving: Buffer, target: int) -> int | None:
    """An aligned offset for ``moving`` that shares a byte with a buffer at ``target``."""
    align = request.alignment_of(moving)
    offset = target // align * align
    return offset if offset >= 0 and offset + moving.size > target else None


def _cluster_points(request: PlanRequest, plan: Plan) -> set[int]:
    if request.cluster is None:
        return set()
    from planner.validators.clusters import running_cluster_barriers

    return set(running_cluster_barriers(request, plan))


def _partitioned_cluster_break(
    request: PlanRequest, plan: Plan, p: int, own: bool
) -> tuple[str, str] | None:
    """The pair a partitioned request's static check finds unordered by cluster barriers
    once the one at ``p`` is gone, or None."""
    from planner.validators.partitions import check_cluster_rule

    listed = plan.cluster_barriers
    assert listed is not None
    if own:
        syncs = [s for s in request.syncs if not (s.kind == "cluster_barrier" and s.at == p)]
        request = request.model_copy(update={"syncs": syncs})
    kept = listed.model_copy(
        update={
            "inserted": [q for q in listed.inserted if q != p],
            "required": [q for q in listed.required if q != p],
        }
    )
    found = check_cluster_rule(request, plan.model_copy(update={"cluster_barriers": kept}))
    return (found[0][2][0], found[0][2][1]) if found else None


def _straight_cluster_break(
    request: PlanRequest, shared: dict[str, Placement], p: int, rest: list[int]
) -> tuple[str, str] | None:
    """A cluster-scoped pair on common bytes whose only running cluster barrier between the
    accesses is the one at ``p`` (``rest`` being the others)."""
    for a in request.buffers:
        for b in request.buffers:
            if a is b or "cluster" not in (a.scope, b.scope) or b.start < a.end:
                continue
            if a.id not in shared or b.id not in shared:
                continue
            pa, pb = shared[a.id], shared[b.id]
            if not (pa.offset < pb.offset + pb.size and pb.offset < pa.offset + pa.size):
                continue
            last, first = _window(a)[1], _window(b)[0]
            if last < p <= first and not any(last < q <= first for q in rest):
                return (a.id, b.id)
    return None


def _without_cluster_barrier(
    request: PlanRequest, plan: Plan, p: int, own: bool
) -> tuple[PlanRequest, Plan]:
    """The request and plan without the cluster barrier at ``p`` (the request's own if
    ``own``), the block barrier it stood for kept."""
    listed = plan.cluster_barriers
    assert listed is not None
    faulty = request
    if own:
        syncs = [s for s in request.syncs if not (s.kind == "cluster_barrier" and s.at == p)]
        faulty = request.model_copy(update={"syncs": syncs})
        kept = listed.model_copy(
            update={
                "existing": [q for q in listed.existing if q != p],
                "required": [q for q in listed.required if q != p],
            }
        )
    else:
        kept = listed.model_copy(
            update={
                "inserted": [q for q in listed.inserted if q != p],
                "required": [q for q in listed.required if q != p],
            }
        )
    faulty_plan = plan.model_copy(update={"cluster_barriers": kept})
    # The block barrier it stood for stays: only the cluster ordering goes.
    barriers = plan.barriers
    if p not in request.barriers and p not in barriers.inserted:
        if request.options.sync == "none":
            barriers = barriers.model_copy(update={"required": sorted({*barriers.required, p})})
        elif own:
            faulty = faulty.model_copy(update={"barriers": sorted({*faulty.barriers, p})})
            barriers = barriers.model_copy(update={"existing": sorted({*barriers.existing, p})})
        else:
            barriers = barriers.model_copy(update={"inserted": sorted({*barriers.inserted, p})})
        faulty_plan = faulty_plan.model_copy(update={"barriers": barriers})
    return faulty, faulty_plan


def _drop_cluster_barrier(
    request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool
) -> Fault | None:
    """Drop a running cluster barrier that is the only one between a cluster-scoped pair's
    accesses on common bytes (straight line: the windows of ``_window``)."""
    if request.cluster is None or request.loops or request.branches:
        return None
    if any(b.ranges is not None for b in request.buffers):
        return None
    shared = _shared(plan)
    running = sorted(_cluster_points(request, plan))
    own = {s.at for s in request.syncs if s.kind == "cluster_barrier"}
    for p in _shuffled(rng, running):
        if plan_only and p in own:
            continue
        if request.partitions:
            broken = _partitioned_cluster_break(request, plan, p, p in own)
        else:
            broken = _straight_cluster_break(request, shared, p, [q for q in running if q != p])
        if broken is None:
            continue
        faulty, faulty_plan = _without_cluster_barrier(request, plan, p, p in own)
        return Fault(
            "drop_cluster_barrier",
            faulty,
            faulty_plan,
            broken,
            f"dropped the cluster barrier at {p}{' from the request' if p in own else ''} (a "
            f"block barrier kept there): {broken[1]!r} reuses bytes of {broken[0]!r} while a "
            "peer CTA may still touch them",
            p,
        )
    return None


def _partition_break(req: PlanRequest, changed: Plan) -> tuple[str, ...] | None:
    """The pair of the first reuse the partitions check finds unordered, or None."""
    from planner.validators.partitions import check_partitions

    found = check_partitions(req, changed, runtime_barriers(req, changed))
    return tuple(found[0][2]) if found else None


def _first_breaking(request: PlanRequest, tried: list[tuple[str, int, Plan]]) -> Fault | None:
    """The first of ``tried`` (what was dropped, where, the plan without it) that breaks a
    reuse."""
    for what, at, changed_plan in tried:
        pair = _partition_break(request, changed_plan)
        if pair:
            return Fault(
                "drop_partition_sync",
                request,
                changed_plan,
                pair,
                f"dropped the {what} that orders {pair[0]!r} before {pair[1]!r}",
                at,
            )
    return None


def _plan_without_barrier(plan: Plan, p: int) -> Plan:
    """``plan`` without its inserted or required barrier at ``p``."""
    barriers = plan.barriers.model_copy(
        update={
            "inserted": [x for x in plan.barriers.inserted if x != p],
            "required": [x for x in plan.barriers.required if x != p],
        }
    )
    return plan.model_copy(update={"barriers": barriers})


def _added_sync_drops(plan: Plan) -> list[tuple[str, int, Plan]]:
    """The named barriers and fences the plan adds (or requires) for a reuse, each as (what,
    where, the plan without it)."""
    added: list[tuple[str, int, Plan]] = [
        (
            f"named barrier {nb.id} at {nb.at}",
            nb.at,
            plan.model_copy(update={"named_barriers": [x for x in plan.named_barriers if x != nb]}),
        )
        for nb in plan.named_barriers
    ]
    added += [
        (
            f"fence by {f.partition!r} at {f.at}",
            f.at,
            plan.model_copy(update={"fences": [x for x in plan.fences if x != f]}),
        )
        for f in plan.fences
        if f.partition is not None
    ]
    return added


def _drop_request_partition_sync(request: PlanRequest, plan: Plan, rng: Rng) -> Fault | None:
    """A request sync (named barrier, mbarrier arrive, async-proxy fence) whose removal breaks a
    reuse across partitions, the plan unchanged."""
    kinds = ("named_barrier", "mbarrier_arrive", "fence_proxy_async")
    candidates = [k for k, s in enumerate(request.syncs) if s.kind in kinds]
    for k in _shuffled(rng, candidates):
        gone = request.syncs[k]
        changed = request.model_copy(
            update={"syncs": [s for j, s in enumerate(request.syncs) if j != k]}
        )
        pair = _partition_break(changed, plan)
        if pair:
            return Fault(
                "drop_partition_sync",
                changed,
                plan,
                pair,
                f"dropped the {gone.kind} at {gone.at} that orders {pair[0]!r} before "
                f"{pair[1]!r} across partitions",
                gone.at,
            )
    return None


def _drop_partition_sync(
    request: PlanRequest, plan: Plan, rng: Rng, *, plan_only: bool
) -> Fault | None:
    """A partition sync whose removal breaks a reuse: a barrier the plan lists, then a named
    barrier or fence it adds, then (unless ``plan_only``) a sync of the request."""
    if not request.partitions:
        return None
    listed = sorted({*plan.barriers.inserted, *plan.barriers.required})
    fault = _first_breaking(
        request,
        [(f"barrier at {p}", p, _plan_without_barrier(plan, p)) for p in _shuffled(rng, listed)],
    )
    if fault is not None:
        return fault
    added = _added_sync_drops(plan)
    fault = _first_breaking(request, [added[k] for k in _shuffled(rng, list(range(len(added))))])
    if fault is not None or plan_only:
        return fault
    return _drop_request_partition_sync(request, plan, rng)
