"""Asynchronous accesses lowered for the planner (docs/design.md, Asynchronous accesses).

Each asynchronous access becomes what the barrier reasoning already knows: an access by any
thread (a broadcast: the agent is no thread, so no thread-local alias covers it) at its issue
point and again at the point before its covering sync, so the buffer's last access is where
its asynchronous work may still run, and a reuse needs a barrier at or after the covering
sync. Pairs whose reuse also needs a proxy fence that the request does not give become
conflicts (``fence_conflicts``). Under sync "insert" or "none" an access that no sync of the
request completes is completed by the wait the plan adds or requires (``added_waits``).
"""

from __future__ import annotations

from collections.abc import Callable

from planner.core.models import Access, Buffer, Loop, PlanRequest
from planner.core.models.sync import (
    ASYNC_PROXY_AGENTS,
    Completed,
    completing_waits,
    inval_of,
    mbarrier_uses,
    scope_of,
)
from planner.core.sync_choice import fewest_on_sets

__all__ = [
    "FenceWindows",
    "added_waits",
    "chosen_fences",
    "fence_conflicts",
    "generic_writes",
    "inval_points",
    "lowered",
    "mbarrier_conflicts",
    "proxy_firsts",
]

FENCE_NODES = 500  # sets of fence points the choice judges before it keeps the best found
Invals = dict[int, tuple[int, str]]  # mbarrier buffer index -> (point, "existing"|...)


def inval_points(request: PlanRequest) -> Invals:
    """The mbarrier_inval each mbarrier buffer's bytes wait for: the request's, else (sync
    "insert") one inserted, or (sync "none") one required, at the point after its last use when
    that is inside its lifetime. An mbarrier left out keeps its bytes for good."""
    out: Invals = {}
    for i, b in enumerate(request.buffers):
        if b.kind != "mbarrier":
            continue
        given = inval_of(b, request.syncs)
        if given is not None:
            out[i] = (given, "existing")
            continue
        after = mbarrier_uses(b, request.syncs)[-1][0] + 1
        policy = request.options.sync
        if after < b.end and policy in ("insert", "none"):
            out[i] = (after, "inserted" if policy == "insert" else "required")
    return out


def added_waits(request: PlanRequest) -> Completed:
    """The wait_groups the plan adds (sync "insert") or requires (sync "none") for the
    asynchronous accesses no sync of the request completes, and the completions with them
    (``completing_waits``; with partitions, each run by the issuing partition); no wait under
    "existing", where such a request is refused."""
    return completing_waits(
        request.buffers,
        request.syncs,
        request.loops,
        request.branches,
        waits=request.waits_allowed,
    )


def mbarrier_conflicts(request: PlanRequest, invals: Invals) -> set[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``: an mbarrier with no inval and any other buffer."""
    out: set[tuple[int, int]] = set()
    n = len(request.buffers)
    for i, b in enumerate(request.buffers):
        if b.kind == "mbarrier" and i not in invals:
            out |= {(min(i, j), max(i, j)) for j in range(n) if j != i}
    return out


def lowered(
    request: PlanRequest, invals: Invals | None = None, completed: Completed | None = None
) -> PlanRequest:
    """``request`` with each asynchronous access as two broadcasts by the threads: at its
    issue point and at the point before its covering sync; an mbarrier's operations (its init,
    the syncs naming it, its inval) as its broadcasts (unchecked copy). The waits the plan adds
    or requires (``added_waits``, or ``completed`` where the caller has them) complete what the
    request's syncs leave open."""
    covered = (completed or added_waits(request)).covered
    done = {(c.buffer, c.access): c.done for c in covered}
    buffers: list[Buffer] = []
    for i, b in enumerate(request.buffers):
        if b.kind == "mbarrier":
            uses = mbarrier_uses(b, request.syncs)
            if invals and i in invals and invals[i][1] != "existing":
                uses.append((invals[i][0], "write"))
            ops = [
                Access.model_construct(op=op, at=at, bytes=b.size, threads="all")
                for at, op in sorted(set(uses))
            ]
            buffers.append(b.model_copy(update={"accesses": ops}))
            continue
        if all(a.agent == "threads" for a in b.accesses):
            buffers.append(b)
            continue
        accesses: list[Access] = []
        for k, a in enumerate(b.accesses):
            if a.agent == "threads":
                accesses.append(a)
                continue
            width = min(a.bytes, b.size)
            for at in sorted({a.at, done[i, k] - 1}):
                accesses.append(Access.model_construct(op=a.op, at=at, bytes=width, threads="all"))
        buffers.append(b.model_copy(update={"accesses": accesses}))
    return request.model_copy(update={"buffers": buffers})


def generic_writes(buffer: Buffer) -> list[int]:
    """Points of the buffer's writes through the generic proxy (threads and cp.async)."""
    return [a.at for a in buffer.accesses if a.op == "write" and a.agent not in ASYNC_PROXY_AGENTS]


def proxy_firsts(buffer: Buffer) -> list[int]:
    """Points of the buffer's accesses through the async proxy (TMA, wgmma)."""
    return [a.at for a in buffer.accesses if a.agent in ASYNC_PROXY_AGENTS]


FenceWindows = dict[tuple[int, int], list[int]]  # (earlier, later) -> barrier points a fence fits


def fence_conflicts(
    request: PlanRequest, windows: FenceWindows | None = None
) -> set[tuple[int, int]]:
    """Buffer pairs ``(i, j)``, ``i < j``, that may not share bytes for want of a proxy fence:
    one writes through the generic proxy, the other then accesses the bytes through the async
    proxy, and no ``fence_proxy_async`` followed by a barrier of the request stands between the
    last such write and the first such access (around the back edge of the innermost loop
    around both, when the async access comes first in its body).

    With ``windows`` (sync "insert" or "none"), a pair with a barrier of the request in that
    window (in the async access's scope) is no conflict: a fence at that barrier's point (it
    runs before the barrier) is enough; the barrier points go to ``windows``."""
    fences = sorted(s.at for s in request.syncs if s.kind == "fence_proxy_async")
    barriers = sorted(set(request.barriers))
    bufs = request.buffers
    writes = [generic_writes(b) for b in bufs]
    proxied = [proxy_firsts(b) for b in bufs]
    out: set[tuple[int, int]] = set()
    for i in range(len(bufs)):
        for j in range(len(bufs)):
            if i == j or not writes[i] or not proxied[j]:
                continue
            a, b = bufs[i], bufs[j]
            in_loop = any(
                lp.start <= a.start < lp.end and lp.start <= b.start < lp.end
                for lp in request.loops
            )
            if b.end <= a.start and not in_loop:
                continue  # the proxy access comes first: the covering wait orders it
            last, first = max(writes[i]), min(proxied[j])
            if _fenced(request, a, b, last, first, fences, barriers):
                continue
            if windows is not None and a.end <= b.start and not in_loop:
                here = scope_of(first, request.loops, request.branches)
                points = [
                    p
                    for p in barriers
                    if last < p <= first and scope_of(p, request.loops, request.branches) == here
                ]
                if points:
                    windows[i, j] = points
                    continue
            out.add((min(i, j), max(i, j)))
    return out


def chosen_fences(
    windows: FenceWindows, shared: set[tuple[int, int]], runs: Callable[[int], int]
) -> list[int]:
    """Fence points (sorted) that give every pair in ``shared`` (unordered) a fence at one of
    its window's barrier points, at the fewest executions (``runs``), then the fewest points:
    the synchronisation choice on explicit sets (``core.sync_choice``)."""
    sets = [
        frozenset(pts)
        for (i, j), pts in sorted(windows.items())
        if (min(i, j), max(i, j)) in shared
    ]
    return fewest_on_sets(sets, runs, FENCE_NODES)


def _fenced(
    request: PlanRequest,
    a: Buffer,
    b: Buffer,
    last_write: int,
    first_proxy: int,
    fences: list[int],
    barriers: list[int],
) -> bool:
    common = [
        lp for lp in request.loops if lp.start <= a.start < lp.end and lp.start <= b.start < lp.end
    ]
    if not a.end <= b.start:
        if not common or not b.end <= a.start:
            return False
        # b comes first in the body: a's writes reach b's next iteration over the back edge.
        body = min(common, key=lambda lp: lp.end - lp.start)
        return _fenced_around(request, body, last_write, first_proxy, fences, barriers)
    # Fence and barrier in the access's own scope: they run whenever it does.
    scope = scope_of(first_proxy, request.loops, request.branches)

    def runs(point: int) -> bool:
        return scope_of(point, request.loops, request.branches) == scope

    return any(
        last_write < f <= first_proxy
        and runs(f)
        and any(f <= p <= first_proxy and runs(p) for p in barriers)
        for f in fences
    )


def _fenced_around(
    request: PlanRequest,
    body: Loop,
    last_write: int,
    first_proxy: int,
    fences: list[int],
    barriers: list[int],
) -> bool:
    """A fence after the last write and a barrier after the fence, both on the way from the
    write around the back edge of ``body`` to the async access of the next iteration, both in
    the body's own scope (they run on every iteration)."""
    scope = scope_of(body.start, request.loops, request.branches)

    def runs(point: int) -> bool:
        return scope_of(point, request.loops, request.branches) == scope

    for f in fences:
        if not runs(f):
            continue
        if last_write < f < body.end:  # before the back edge: a barrier after it, either side
            if any(
                runs(p) and (f <= p < body.end or body.start <= p <= first_proxy) for p in barriers
            ):
                return True
        elif body.start <= f <= first_proxy and any(
            runs(p) and f <= p <= first_proxy for p in barriers
        ):
            return True
    return False
