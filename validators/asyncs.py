"""Asynchronous accesses as the validators run them (docs/design.md, Asynchronous accesses),
written apart from the planner's lowering so that each can catch the other's mistakes.

An asynchronous access is in flight from its issue point until its covering sync runs: the
validators give its buffer an access by a stand-in for the agent (no thread: a broadcast,
which no thread-local alias covers) at every point of the program from the issue to the
point before the covering sync where an access or a barrier could meet it, so no barrier in
between orders it, and one at or after the covering sync does. A buffer that the threads
write and a later buffer then reads or writes through the async proxy (TMA, wgmma) on the same
bytes needs a ``fence_proxy_async`` after the writes and a barrier after the fence, both before
the async access (``missing_fence``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.core.models.sync import completions, scope_of

if TYPE_CHECKING:
    from planner.core.models import Buffer, Plan, PlanRequest

__all__ = ["in_flight", "unfenced"]

_PROXY = ("tma", "mma")


def in_flight(request: PlanRequest, barriers: list[int]) -> PlanRequest:
    """``request`` with each asynchronous access made by the stand-in at its issue point, at
    each barrier point after it and before its covering sync, and at the point before that
    sync (an unchecked copy)."""
    from planner.core.models import Access

    covered, _ = completions(request.buffers, request.syncs, request.loops, request.branches)
    until = {(c.buffer, c.access): c.done for c in covered}
    buffers: list[Buffer] = []
    for i, b in enumerate(request.buffers):
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
    if looped:
        return "both are in one loop, so each follows the other"
    if not a.end <= b.start:
        return f"{b.id!r} starts before {a.id!r} ends"
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
