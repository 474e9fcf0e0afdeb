"""Asynchronous accesses as the validators run them (docs/design.md, Asynchronous accesses),
written apart from the planner's lowering so that each can catch the other's mistakes.

An asynchronous access is in flight from its issue point until its covering sync runs: the
validators give its buffer an access by a stand-in for the agent (no thread: a broadcast,
which no thread-local alias covers) at every point of the program from the issue to the
point before the covering sync where an access or a barrier could meet it, so no barrier in
between orders it, and one at or after the covering sync does. A buffer that the threads
write and a later buffer then reads or writes through the async proxy (TMA, wgmma) on the same
bytes needs a ``fence_proxy_async`` after the writes and a barrier after the fence, both before
the async access (``missing_fence``). The waits the plan adds or requires run like the
request's syncs; an access that neither completes is ``missing_wait`` and stays in flight to
the end of its live range.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.core.models.sync import MBARRIER_KINDS, Op, completions, scope_of

if TYPE_CHECKING:
    from planner.core.models import Buffer, Plan, PlanRequest, Sync

__all__ = ["in_flight", "running_syncs", "unfenced", "uninvalidated", "unwaited"]

_PROXY = ("tma", "mma")


def _operations(request: PlanRequest, plan: Plan | None, m: Buffer) -> list[tuple[int, Op]]:
    """(point, op) of mbarrier ``m``'s operations: its init, the syncs naming it, and the
    inval the plan inserts or requires."""
    ops: list[tuple[int, Op]] = [(m.start, "write")]
    ops += [
        (s.at, "read" if s.kind == "mbarrier_wait" else "write")
        for s in request.syncs
        if s.mbarrier == m.id and s.kind in MBARRIER_KINDS
    ]
    if plan is not None:
        ops += [
            (v.at, "write") for v in plan.invals if v.mbarrier == m.id and v.origin != "existing"
        ]
    return sorted(set(ops))


def running_syncs(request: PlanRequest, plan: Plan | None) -> list[Sync]:
    """The request's syncs and the wait_groups the plan adds or requires (the caller's under
    sync "none"): the kernel as it runs."""
    if plan is None or not plan.waits:
        return list(request.syncs)
    from planner.core.models import Sync

    waits = [
        Sync(kind="wait_group", at=w.at, group=w.kind, read=w.kind == "bulk") for w in plan.waits
    ]
    return [*request.syncs, *waits]


def unwaited(request: PlanRequest, plan: Plan) -> list[tuple[str, int, str]]:
    """(buffer, issue point, why) for each asynchronous access that no sync of the request and
    no wait of the plan completes in its scope and live range."""
    syncs = running_syncs(request, plan)
    _, missing = completions(request.buffers, syncs, request.loops, request.branches)
    out: list[tuple[str, int, str]] = []
    for i, k, why in missing:
        b = request.buffers[i]
        a = b.accesses[k]
        out.append((b.id, a.at, f"the {a.agent} {a.op} of {b.id!r} at point {a.at}: {why}"))
    return out


def in_flight(request: PlanRequest, barriers: list[int], plan: Plan | None = None) -> PlanRequest:
    """``request`` with each asynchronous access made by the stand-in at its issue point, at
    each barrier point after it and before its covering sync, and at the point before that
    sync (the plan's waits among them; with none, the end of its live range); each mbarrier's
    operations as accesses by every thread (an unchecked copy)."""
    from planner.core.models import Access

    syncs = running_syncs(request, plan)
    covered, missing = completions(request.buffers, syncs, request.loops, request.branches)
    until = {(c.buffer, c.access): c.done for c in covered}
    for i, k, _ in missing:
        at = request.buffers[i].accesses[k].at
        until[i, k] = next(e for s, e in request.buffers[i].lifetimes if s <= at < e)
    buffers: list[Buffer] = []
    for i, b in enumerate(request.buffers):
        if b.kind == "mbarrier":
            ops = [
                Access.model_construct(op=op, at=at, bytes=b.size, threads="all")
                for at, op in _operations(request, plan, b)
                if b.start <= at < b.end
            ]
            buffers.append(b.model_copy(update={"accesses": ops}))
            continue
        if all(a.agent == "threads" for a in b.accesses):
            buffers.append(b)
            continue
        kept: list[Access] = []
        for k, a in enumerate(b.accesses):
            if a.agent == "threads":
                kept.append(a)
                continue
            last = until[i, k] - 1
            points = {a.at, last, *(p for p in barriers if a.at < p <= last)}
            width = min(a.bytes, b.size)
            kept += [
                Access.model_construct(op=a.op, at=p, bytes=width, threads="all", agent=a.agent)
                for p in sorted(points)
            ]
        buffers.append(b.model_copy(update={"accesses": kept}))
    return request.model_copy(update={"buffers": buffers})


def unfenced(request: PlanRequest, plan: Plan) -> list[tuple[str, str, str]]:
    """(earlier, later, why) for each pair of buffers placed on common bytes where the
    later's async-proxy access is not fenced from the earlier's generic writes."""
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    fences = [s.at for s in request.syncs if s.kind == "fence_proxy_async"]
    fences += [f.at for f in plan.fences]  # the plan adds them, or the caller must
    barriers = sorted(set(request.barriers) | set(plan.barriers.inserted))
    if request.options.sync == "none":
        barriers = sorted(set(barriers) | set(plan.barriers.required))
    out: list[tuple[str, str, str]] = []
    bufs = [b for b in request.buffers if b.id in where]
    for a in bufs:
        writes = [x.at for x in a.accesses if x.op == "write" and x.agent not in _PROXY]
        if not writes:
            continue
        for b in bufs:
            proxied = [x.at for x in b.accesses if x.agent in _PROXY]
            if b is a or not proxied:
                continue
            (alo, ahi), (blo, bhi) = where[a.id], where[b.id]
            if not (alo < bhi and blo < ahi):
                continue
            looped = any(
                lp.start <= a.start < lp.end and lp.start <= b.start < lp.end
                for lp in request.loops
            )
            if b.end <= a.start and not looped:
                continue  # b comes first: its covering sync orders it
            why = _why(request, a, b, max(writes), min(proxied), fences, barriers, looped)
            if why is not None:
                out.append((a.id, b.id, why))
    return out


def _why(
    request: PlanRequest,
    a: Buffer,
    b: Buffer,
    write: int,
    proxy: int,
    fences: list[int],
    barriers: list[int],
    looped: bool,
) -> str | None:
    if not a.end <= b.start:
        if not (looped and b.end <= a.start):
            return f"{b.id!r} starts before {a.id!r} ends"
        return _around(request, a, b, write, proxy, fences, barriers)
    here = scope_of(proxy, request.loops, request.branches)
    for f in fences:
        if not write < f <= proxy or scope_of(f, request.loops, request.branches) != here:
            continue
        for p in barriers:
            if f <= p <= proxy and scope_of(p, request.loops, request.branches) == here:
                return None
    return (
        f"no fence_proxy_async after the last write at {write} followed by a barrier, both by "
        f"the async-proxy access at {proxy}"
    )


def _around(
    request: PlanRequest,
    a: Buffer,
    b: Buffer,
    write: int,
    proxy: int,
    fences: list[int],
    barriers: list[int],
) -> str | None:
    """``b`` first in the body of the innermost loop around both: the path from ``a``'s last
    write runs to the body's end and on from its start to ``b``'s async access, and a fence
    then a barrier must lie on it, at points the body runs on every iteration."""
    loop = min(
        (
            lp
            for lp in request.loops
            if lp.start <= a.start < lp.end and lp.start <= b.start < lp.end
        ),
        key=lambda lp: lp.end - lp.start,
    )
    home = scope_of(loop.start, request.loops, request.branches)
    # Fences and barriers along the path, in its order: the tail of the body, then its head
    # again; at one point the fence runs before the barrier.
    marks = [(x, 0) for x in fences] + [(x, 1) for x in barriers]
    tail = sorted(m for m in marks if write < m[0] < loop.end)
    head = sorted(m for m in marks if loop.start <= m[0] <= proxy)
    seen_fence = False
    for x, what in [*tail, *head]:
        if scope_of(x, request.loops, request.branches) != home:
            continue
        if what == 0:
            seen_fence = True
        elif seen_fence:
            return None
    return (
        f"no fence_proxy_async after the last write at {write} followed by a barrier on the "
        f"way around the back edge of the loop [{loop.start}, {loop.end}) to the async-proxy "
        f"access at {proxy}"
    )


def uninvalidated(request: PlanRequest, plan: Plan) -> list[tuple[str, str, str]]:
    """(mbarrier, later, why) for each mbarrier whose bytes a later buffer takes with no
    mbarrier_inval (the request's, or one the plan lists as inserted or required) after the
    mbarrier's last operation and inside its lifetime."""
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    listed = {(v.mbarrier, v.at) for v in plan.invals if v.origin != "existing"}
    out: list[tuple[str, str, str]] = []
    for m in request.buffers:
        if m.kind != "mbarrier" or m.id not in where:
            continue
        named = [s for s in request.syncs if s.mbarrier == m.id]
        last = max([m.start, *(s.at for s in named if s.kind != "mbarrier_inval")])
        invals = [s.at for s in named if s.kind == "mbarrier_inval"]
        invals += [at for ident, at in listed if ident == m.id]
        freed = any(last < v < m.end for v in invals)
        lo, hi = where[m.id]
        for b in request.buffers:
            if b is m or b.id not in where or b.start < m.end:
                continue
            if where[b.id][0] < hi and lo < where[b.id][1] and not freed:
                out.append(
                    (
                        m.id,
                        b.id,
                        f"no mbarrier_inval on {m.id!r} after its last operation at {last} "
                        f"and before its end {m.end}",
                    )
                )
    return out
