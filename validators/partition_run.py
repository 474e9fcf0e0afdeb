"""The emulator's run of a request with partitions (docs/design.md, Warp-specialised
partitions): every partition and every asynchronous agent executes its operations with a
vector clock, so the order found holds for every interleaving the syncs allow.

Points run in order; at each point the waits, then the fences, then the barriers, then the
arrives, then the accesses. A release (a barrier, an arrive) counts one more release of its
partition and publishes the clock with that count; an acquire (a barrier, a wait) takes the
elementwise maximum. An access is ordered before a later one when the later one's clock holds a
release of the first one's partition made after it. An asynchronous access runs as its agent's,
with the clock its issuing partition holds at the issue; its completion is the agent's release,
taken by the covering wait into what the waiting partition publishes at its next release (the
threads that did not wait learn of it from that release). Two buffers on common bytes race when
an access of one is not ordered with one of the other; a read finds its bytes clobbered when
another buffer on them wrote since its own last write.

An mbarrier's operations run as thread accesses of the partitions that run them: its init by
every partition at its start, the syncs naming it, the invals the plan adds or requires. A
later buffer on its bytes needs one of its invals, inside its lifetime, run after every other
operation on it and before every touch of that buffer (``missing_inval``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.core.models import Buffer, Plan, PlanRequest

__all__ = ["run_partitions"]

_MBARRIER_KINDS = ("mbarrier_wait", "expect_tx", "mbarrier_arrive", "mbarrier_inval")


@dataclass(frozen=True)
class _Touch:
    buffer: int
    who: int  # partition or agent entry of the clock
    tick: int  # releases ``who`` made before the access
    clock: tuple[int, ...]  # what the access's threads had acquired
    point: int
    op: str
    proxy: bool  # through the async proxy (TMA, wgmma)
    inval: bool = False  # an mbarrier's inval


@dataclass(frozen=True)
class _Step:
    """One operation at a point: waits (rank 0), fences, barriers, arrives, accesses (4)."""

    rank: int
    what: str  # "wait" | "wait_group" | "fence" | "barrier" | "arrive" | "touch"
    who: tuple[int, ...]  # the partitions that run it
    mbarrier: str = ""
    group: str = ""
    pending: int = 0
    buffer: int = -1
    access: int = -1  # -1: a buffer without accesses, or an mbarrier's operation
    op: str = "read"
    inval: bool = False  # an mbarrier's inval


def run_partitions(
    request: PlanRequest, plan: Plan, barriers: list[int]
) -> list[tuple[str, str, list[str], int]]:
    """(code, message, buffers, point) for each race, clobbered read and missing fence."""
    from planner.validators.program import with_plan_syncs

    request = with_plan_syncs(request, plan)
    parts = {p.id: k for k, p in enumerate(request.partitions)}
    n = len(request.partitions)
    agents: dict[tuple[int, int], int] = {}
    for i, b in enumerate(request.buffers):
        for k, a in enumerate(b.accesses):
            if a.agent != "threads":
                agents[i, k] = n + len(agents)
    # With a cluster, one more entry: a peer CTA, which runs the same program at its own pace
    # and so is known to be past a point only through the cluster barriers after it.
    from planner.validators.clusters import running_cluster_barriers

    on_cluster = set(running_cluster_barriers(request, plan)) if request.cluster else set()
    scoped = {i for i, b in enumerate(request.buffers) if b.scope == "cluster"}
    peer = n + len(agents)
    width = peer + (1 if request.cluster else 0)
    peer_made = 0  # cluster barriers run so far
    peer_seen = [0] * width  # what a peer had published at the latest cluster barrier
    peer_touches: list[tuple[int, int, int, str, bool, tuple[int, ...]]] = []
    clock = [[0] * width for _ in range(n)]
    pending = [[0] * width for _ in range(n)]  # completions taken by a wait, not yet published
    # mbarrier -> (point, clock, the last point a completion counts at, or -1 for an arrive)
    published: dict[str, list[tuple[int, list[int], int]]] = {}
    agent_clock: dict[int, list[int]] = {}
    agent_done: dict[int, tuple[int, int]] = {}  # cp.async agent -> (partition, wait point)
    fences: dict[int, list[tuple[int, int]]] = {}  # partition -> (point, its releases then)

    # A partition's own releases: kept apart from its clock, whose own entry counts only the
    # releases it acquired back (its threads see each other's work only through those).
    made = [0] * n

    def release(q: int) -> list[int]:
        made[q] += 1
        snap = [max(x, y) for x, y in zip(clock[q], pending[q], strict=True)]
        snap[q] = made[q]
        return snap

    def acquire(q: int, snap: list[int]) -> None:
        clock[q] = [max(x, y) for x, y in zip(clock[q], snap, strict=True)]

    steps: dict[int, list[_Step]] = {}

    def at(point: int, step: _Step) -> None:
        steps.setdefault(point, []).append(step)

    everyone = tuple(range(n))
    for p in sorted(set(barriers)):
        at(p, _Step(2, "cluster" if p in on_cluster else "barrier", everyone))
    for s in request.syncs:
        who = (parts[s.partition],) if s.partition in parts else ()
        if s.kind == "named_barrier":
            at(s.at, _Step(2, "barrier", tuple(sorted(parts[x] for x in s.partitions or []))))
        elif s.kind == "mbarrier_wait":
            at(s.at, _Step(0, "wait", who, mbarrier=s.mbarrier or ""))
        elif s.kind == "mbarrier_arrive":
            at(s.at, _Step(3, "arrive", who, mbarrier=s.mbarrier or ""))
        elif s.kind == "fence_proxy_async":
            at(s.at, _Step(1, "fence", who))
        elif s.kind == "wait_group":
            at(s.at, _Step(0, "wait_group", who, group=s.group or "", pending=s.pending))
    for i, b in enumerate(request.buffers):
        if b.kind == "mbarrier":
            for point, q, op, inval in _mbarrier_ops(request, plan, b):
                at(point, _Step(4, "touch", (q,), buffer=i, op=op, inval=inval))
            continue
        if not b.accesses:
            for q in everyone:
                at(b.start, _Step(4, "touch", (q,), buffer=i, op="write"))
                at(b.end - 1, _Step(4, "touch", (q,), buffer=i, op="read"))
        for k, a in enumerate(b.accesses):
            at(a.at, _Step(4, "touch", (parts[a.partition or ""],), buffer=i, access=k, op=a.op))

    # Asynchronous groups in flight: (partition, group) -> [(issue point, agent entry, end)]
    flight: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
    group_of = {
        ("cp.async", "write"): "cp.async",
        ("tma", "read"): "bulk",
        ("mma", "read"): "wgmma",
    }
    touches: list[_Touch] = []
    for point in sorted(steps):
        for step in sorted(steps[point], key=lambda x: x.rank):
            if step.what == "barrier":
                snaps = [release(q) for q in step.who]
                for q in step.who:
                    for snap in snaps:
                        acquire(q, snap)
                continue
            if step.what == "cluster":
                # Every thread of every CTA: the CTA's partitions and the peer meet here.
                merged = [0] * width
                for snap in [release(q) for q in step.who]:
                    merged = [max(x, y) for x, y in zip(merged, snap, strict=True)]
                peer_made += 1
                merged[peer] = peer_made
                for q in step.who:
                    acquire(q, merged)
                peer_seen = merged
                continue
            if not step.who:
                continue
            q = step.who[0]
            if step.what == "wait":
                for when, snap, end in published.get(step.mbarrier, []):
                    # A wait acquires the arrives and the TMA writes' complete-tx alike.
                    if when < point and (end < 0 or point <= end):
                        acquire(q, snap)
            elif step.what == "wait_group":
                key = (q, step.group)
                live = flight.get(key, [])
                issues = sorted({x for x, _, _ in live})
                keep = set(issues[len(issues) - step.pending :]) if step.pending else set()
                for issue, g, end in live:
                    if issue not in keep and point <= end:
                        snap = list(agent_clock[g])
                        snap[g] = 1
                        pending[q] = [max(x, y) for x, y in zip(pending[q], snap, strict=True)]
                        agent_done[g] = (q, point)
                flight[key] = [x for x in live if x[0] in keep]
            elif step.what == "fence":
                fences.setdefault(q, []).append((point, made[q]))
            elif step.what == "arrive":
                published.setdefault(step.mbarrier, []).append((point, release(q), -1))
            else:
                i, k, op = step.buffer, step.access, step.op
                b = request.buffers[i]
                access = None if k < 0 else b.accesses[k]
                if i in scoped:
                    agent = -1 if access is None or access.agent == "threads" else agents[i, k]
                    proxy = access is not None and access.agent in ("tma", "mma")
                    peer_touches.append((i, point, agent, op, proxy, tuple(peer_seen)))
                if access is None or access.agent == "threads":
                    touches.append(
                        _Touch(i, q, made[q], tuple(clock[q]), point, op, False, step.inval)
                    )
                    continue
                g = agents[i, k]
                agent_clock[g] = list(clock[q])
                proxy = access.agent in ("tma", "mma")
                touches.append(_Touch(i, g, 0, tuple(clock[q]), point, op, proxy))
                if access.agent == "tma" and access.op == "write":
                    snap = list(clock[q])
                    snap[g] = 1
                    published.setdefault(access.mbarrier or "", []).append((point, snap, b.end))
                else:
                    group = group_of[access.agent, access.op]
                    flight.setdefault((q, group), []).append((point, g, b.end))
    if peer_touches:
        touches += _peer_touches(request, peer_touches, agents, agent_done, on_cluster, peer)
    return _judge(request, plan, touches, fences, n, agent_done, peer)


def _mbarrier_ops(request: PlanRequest, plan: Plan, b: Buffer) -> list[tuple[int, int, str, bool]]:
    """(point, partition, op, an inval) of each operation on mbarrier ``b``: its init by every
    partition at its start, each sync naming it, each inval the plan adds or requires."""
    parts = {p.id: k for k, p in enumerate(request.partitions)}
    ops = [(b.start, q, "write", False) for q in range(len(parts))]
    for s in request.syncs:
        if s.mbarrier == b.id and s.partition in parts and s.kind in _MBARRIER_KINDS:
            op = "read" if s.kind == "mbarrier_wait" else "write"
            ops.append((s.at, parts[s.partition], op, s.kind == "mbarrier_inval"))
    ops += [
        (v.at, parts[v.partition], "write", True)
        for v in plan.invals
        if v.mbarrier == b.id and v.origin != "existing" and v.partition in parts
    ]
    return sorted(set(ops))


def _peer_touches(
    request: PlanRequest,
    found: list[tuple[int, int, int, str, bool, tuple[int, ...]]],
    agents: dict[tuple[int, int], int],
    agent_done: dict[int, tuple[int, int]],
    on_cluster: set[int],
    peer: int,
) -> list[_Touch]:
    """The peer CTA's copies of the touches of cluster-scoped buffers: each made after the
    cluster barriers before its completion (a thread's access at its point, an asynchronous
    one at its covering sync, which runs before a barrier there), having seen what was
    published at the latest cluster barrier before it began."""
    index = {g: key for key, g in agents.items()}
    out: list[_Touch] = []
    for i, point, agent, op, proxy, seen in found:
        done = point + 1
        if agent >= 0:
            b_i, k = index[agent]
            a = request.buffers[b_i].accesses[k]
            if a.agent == "tma" and a.op == "write":
                waits = [
                    s.at
                    for s in request.syncs
                    if s.kind == "mbarrier_wait"
                    and s.mbarrier == a.mbarrier
                    and point < s.at <= request.buffers[b_i].end
                ]
                done = min(waits, default=1 << 62)
            else:
                done = agent_done.get(agent, (0, 1 << 62))[1]
        tick = sum(1 for c in on_cluster if c < done)
        out.append(_Touch(i, peer, tick, seen, point, op, proxy))
    return out


def _judge(
    request: PlanRequest,
    plan: Plan,
    touches: list[_Touch],
    fences: dict[int, list[tuple[int, int]]],
    n: int,
    agent_done: dict[int, tuple[int, int]],
    peer: int,
) -> list[tuple[str, str, list[str], int]]:
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    bufs = request.buffers
    out: list[tuple[str, str, list[str], int]] = []

    def shares(i: int, j: int) -> bool:
        if bufs[i].id not in where or bufs[j].id not in where:
            return False
        (a, b), (c, d) = where[bufs[i].id], where[bufs[j].id]
        return a < d and c < b

    def ordered(x: _Touch, y: _Touch) -> bool:
        return y.clock[x.who] >= x.tick + 1

    seen: set[tuple[str, int, int]] = set()
    by_buffer: dict[int, list[_Touch]] = {}
    for t in touches:
        by_buffer.setdefault(t.buffer, []).append(t)

    def invalidated(i: int, j: int) -> bool:
        """Whether an inval of mbarrier ``i`` inside its lifetime ran after every other
        operation on it and before every touch of buffer ``j``."""
        mine = by_buffer.get(i, [])
        later = by_buffer.get(j, [])
        return any(
            x.inval
            and bufs[i].start < x.point < bufs[i].end
            and all(ordered(t, x) for t in mine if not t.inval)
            and all(ordered(x, y) for y in later)
            for x in mine
        )

    for i, b in enumerate(bufs):
        for j, c in enumerate(bufs):
            if i == j or not shares(i, j) or b.kind != "mbarrier":
                continue
            if c.start < b.end and b.start < c.end:
                why = "are live together"
            elif b.end <= c.start and not invalidated(i, j):
                why = "follow each other with no mbarrier_inval ordered between"
            else:
                continue
            if ("inval", min(i, j), max(i, j)) in seen:
                continue
            seen.add(("inval", min(i, j), max(i, j)))
            out.append(
                (
                    "missing_inval",
                    f"{b.id!r} and {c.id!r} run on one mbarrier's bytes and {why}",
                    [b.id, c.id],
                    0,
                )
            )
    for y in touches:
        for x in touches:
            if x.point >= y.point and x is not y:
                continue
            if x is y or x.buffer == y.buffer or not shares(x.buffer, y.buffer):
                continue
            far = peer in (x.who, y.who)  # a peer CTA's touch: only a cluster barrier orders it
            code = "missing_cluster_barrier" if far else "race"
            key = (code, min(x.buffer, y.buffer), max(x.buffer, y.buffer))
            if not ordered(x, y) and key not in seen:
                seen.add(key)
                out.append(
                    (
                        code,
                        f"{bufs[x.buffer].id!r} (point {x.point}) and {bufs[y.buffer].id!r} "
                        f"(point {y.point}) touch common bytes, unordered"
                        + (" (a peer CTA's touch: no cluster barrier between)" if far else ""),
                        [bufs[x.buffer].id, bufs[y.buffer].id],
                        y.point,
                    )
                )
            if far:
                continue
            if y.proxy and x.op == "write" and not x.proxy:
                # The writer's fences after the write (a cp.async write: after its wait).
                owner, since = (
                    (x.who, x.point + 1) if x.who < n else agent_done.get(x.who, (0, 1 << 62))
                )
                after = [t for f, t in fences.get(owner, []) if f >= since]
                fkey = ("fence", x.buffer, y.buffer)
                if (not after or y.clock[owner] < after[0] + 1) and fkey not in seen:
                    seen.add(fkey)
                    out.append(
                        (
                            "missing_fence",
                            f"{bufs[y.buffer].id!r} reaches through the async proxy bytes "
                            f"{bufs[x.buffer].id!r} wrote at point {x.point} with no fence "
                            "ordered between",
                            [bufs[x.buffer].id, bufs[y.buffer].id],
                            y.point,
                        )
                    )
    last_write: dict[int, int] = {}  # buffer -> point of its latest write so far
    for y in sorted(touches, key=lambda t: t.point):
        if y.who == peer:
            continue
        if y.op == "write":
            last_write[y.buffer] = max(last_write.get(y.buffer, -1), y.point)
            continue
        if y.buffer not in last_write:
            continue
        since = last_write[y.buffer]
        for x in touches:
            if (
                x.who != peer
                and x.op == "write"
                and x.buffer != y.buffer
                and since <= x.point < y.point
                and shares(x.buffer, y.buffer)
                and ("clobbered", x.buffer, y.buffer) not in seen
            ):
                seen.add(("clobbered", x.buffer, y.buffer))
                out.append(
                    (
                        "clobbered",
                        f"{bufs[y.buffer].id!r} reads at point {y.point} bytes "
                        f"{bufs[x.buffer].id!r} wrote at point {x.point}, after its own write",
                        [bufs[y.buffer].id, bufs[x.buffer].id],
                        y.point,
                    )
                )
    return out
