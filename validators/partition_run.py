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

from dataclasses import dataclass, field
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


_GROUP_OF = {
    ("cp.async", "write"): "cp.async",
    ("tma", "read"): "bulk",
    ("mma", "read"): "wgmma",
}  # (agent, op) -> the asynchronous group its completion joins


def run_partitions(
    request: PlanRequest, plan: Plan, barriers: list[int]
) -> list[tuple[str, str, list[str], int]]:
    """(code, message, buffers, point) for each asynchronous access never completed, race,
    clobbered read, missing fence and missing inval."""
    from planner.validators.clusters import running_cluster_barriers
    from planner.validators.program import with_plan_syncs

    request = with_plan_syncs(request, plan)
    # With a cluster, one more entry: a peer CTA, which runs the same program at its own pace
    # and so is known to be past a point only through the cluster barriers after it.
    on_cluster = set(running_cluster_barriers(request, plan)) if request.cluster else set()
    run = _Run.start(request)
    for point, step in _schedule(request, plan, barriers, on_cluster):
        run.do(point, step)
    touches = run.touches
    if run.peer_touches:
        touches += _peer_touches(
            request, run.peer_touches, run.agents, run.agent_done, on_cluster, run.peer
        )
    found = _judge(request, plan, touches, run.fences, run.n, run.agent_done, run.peer)
    return run.unwaited() + found


def _schedule(
    request: PlanRequest, plan: Plan, barriers: list[int], on_cluster: set[int]
) -> list[tuple[int, _Step]]:
    """Every operation of the run as (point, step), by point, then by rank."""
    parts = {p.id: k for k, p in enumerate(request.partitions)}
    steps: dict[int, list[_Step]] = {}

    def at(point: int, step: _Step) -> None:
        steps.setdefault(point, []).append(step)

    everyone = tuple(range(len(request.partitions)))
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
    return [
        (point, step)
        for point in sorted(steps)
        for step in sorted(steps[point], key=lambda x: x.rank)
    ]


@dataclass
class _Run:
    """The clocks of the partitions and agents as the run goes, and the touches it records."""

    request: PlanRequest
    n: int  # partitions
    agents: dict[tuple[int, int], int]  # (buffer, access) -> agent entry of the clock
    peer: int  # the peer CTA's entry of the clock
    width: int
    scoped: set[int]  # cluster-scoped buffers
    clock: list[list[int]]
    pending: list[list[int]]  # completions taken by a wait, not yet published
    # A partition's own releases: kept apart from its clock, whose own entry counts only the
    # releases it acquired back (its threads see each other's work only through those).
    made: list[int]
    peer_made: int = 0  # cluster barriers run so far
    peer_seen: list[int] = field(default_factory=list)  # a peer's clock at the latest one
    peer_touches: list[tuple[int, int, int, str, bool, tuple[int, ...]]] = field(
        default_factory=list
    )
    # mbarrier -> (point, clock, the last point a completion counts at, or -1 for an arrive)
    published: dict[str, list[tuple[int, list[int], int]]] = field(default_factory=dict)
    agent_clock: dict[int, list[int]] = field(default_factory=dict)
    # cp.async agent -> (partition, wait point)
    agent_done: dict[int, tuple[int, int]] = field(default_factory=dict)
    # mbarrier -> (issue point, agent, end) of the TMA writes completing on it
    landing: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    landed: set[int] = field(default_factory=set)  # TMA write agents a wait observed
    # partition -> (point, its releases then)
    fences: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    # Asynchronous groups in flight: (partition, group) -> [(issue point, agent entry, end)]
    flight: dict[tuple[int, str], list[tuple[int, int, int]]] = field(default_factory=dict)
    touches: list[_Touch] = field(default_factory=list)

    @classmethod
    def start(cls, request: PlanRequest) -> _Run:
        """The run before its first point: every clock at zero."""
        n = len(request.partitions)
        agents: dict[tuple[int, int], int] = {}
        for i, b in enumerate(request.buffers):
            for k, a in enumerate(b.accesses):
                if a.agent != "threads":
                    agents[i, k] = n + len(agents)
        peer = n + len(agents)
        width = peer + (1 if request.cluster else 0)
        return cls(
            request=request,
            n=n,
            agents=agents,
            peer=peer,
            width=width,
            scoped={i for i, b in enumerate(request.buffers) if b.scope == "cluster"},
            clock=[[0] * width for _ in range(n)],
            pending=[[0] * width for _ in range(n)],
            made=[0] * n,
            peer_seen=[0] * width,
        )

    def release(self, q: int) -> list[int]:
        """Count one more release of partition ``q``; the clock it publishes."""
        self.made[q] += 1
        snap = [max(x, y) for x, y in zip(self.clock[q], self.pending[q], strict=True)]
        snap[q] = self.made[q]
        return snap

    def acquire(self, q: int, snap: list[int]) -> None:
        """Partition ``q`` takes the elementwise maximum of its clock and ``snap``."""
        self.clock[q] = [max(x, y) for x, y in zip(self.clock[q], snap, strict=True)]

    def do(self, point: int, step: _Step) -> None:
        """Run one step at ``point``."""
        if step.what == "barrier":
            self.barrier(step.who)
        elif step.what == "cluster":
            self.cluster_barrier(step.who)
        elif not step.who:
            return
        elif step.what == "wait":
            self.wait(point, step.who[0], step.mbarrier)
        elif step.what == "wait_group":
            self.wait_group(point, step.who[0], step.group, step.pending)
        elif step.what == "fence":
            self.fences.setdefault(step.who[0], []).append((point, self.made[step.who[0]]))
        elif step.what == "arrive":
            snap = self.release(step.who[0])
            self.published.setdefault(step.mbarrier, []).append((point, snap, -1))
        else:
            self.touch(point, step.who[0], step)

    def barrier(self, who: tuple[int, ...]) -> None:
        """The partitions ``who`` meet: each acquires every one's release."""
        snaps = [self.release(q) for q in who]
        for q in who:
            for snap in snaps:
                self.acquire(q, snap)

    def cluster_barrier(self, who: tuple[int, ...]) -> None:
        """Every thread of every CTA: the CTA's partitions and the peer meet here."""
        merged = [0] * self.width
        for snap in [self.release(q) for q in who]:
            merged = [max(x, y) for x, y in zip(merged, snap, strict=True)]
        self.peer_made += 1
        merged[self.peer] = self.peer_made
        for q in who:
            self.acquire(q, merged)
        self.peer_seen = merged

    def wait(self, point: int, q: int, mbarrier: str) -> None:
        """A wait acquires the arrives and the TMA writes' complete-tx alike."""
        for when, snap, end in self.published.get(mbarrier, []):
            if when < point and (end < 0 or point <= end):
                self.acquire(q, snap)
        self.landed |= {g for when, g, end in self.landing.get(mbarrier, []) if when < point <= end}

    def unwaited(self) -> list[tuple[str, str, list[str], int]]:
        """``missing_wait`` for each asynchronous access whose agent no covering sync
        completed in the run (inside its buffer's lifetime)."""
        out: list[tuple[str, str, list[str], int]] = []
        for (i, k), g in self.agents.items():
            if g in self.agent_done or g in self.landed:
                continue
            b = self.request.buffers[i]
            a = b.accesses[k]
            out.append(
                (
                    "missing_wait",
                    f"the {a.agent} {a.op} of {b.id!r} issued by {a.partition} at point {a.at} "
                    f"is still in flight at the end {b.end} of its lifetime: no wait_group of "
                    "its partition (or, a TMA write, no mbarrier_wait on its mbarrier) completed "
                    "it",
                    [b.id],
                    a.at,
                )
            )
        return out

    def wait_group(self, point: int, q: int, group: str, keep_pending: int) -> None:
        """Partition ``q`` waits until at most ``keep_pending`` issues of ``group`` are in
        flight; the completions it takes publish at its next release."""
        key = (q, group)
        live = self.flight.get(key, [])
        issues = sorted({x for x, _, _ in live})
        keep = set(issues[len(issues) - keep_pending :]) if keep_pending else set()
        for issue, g, end in live:
            if issue not in keep and point <= end:
                snap = list(self.agent_clock[g])
                snap[g] = 1
                self.pending[q] = [max(x, y) for x, y in zip(self.pending[q], snap, strict=True)]
                self.agent_done[g] = (q, point)
        self.flight[key] = [x for x in live if x[0] in keep]

    def touch(self, point: int, q: int, step: _Step) -> None:
        """Record an access by partition ``q``, or by the agent it issues."""
        i, k, op = step.buffer, step.access, step.op
        b = self.request.buffers[i]
        access = None if k < 0 else b.accesses[k]
        if i in self.scoped:
            agent = -1 if access is None or access.agent == "threads" else self.agents[i, k]
            proxy = access is not None and access.agent in ("tma", "mma")
            self.peer_touches.append((i, point, agent, op, proxy, tuple(self.peer_seen)))
        if access is None or access.agent == "threads":
            self.touches.append(
                _Touch(i, q, self.made[q], tuple(self.clock[q]), point, op, False, step.inval)
            )
            return
        g = self.agents[i, k]
        self.agent_clock[g] = list(self.clock[q])
        proxy = access.agent in ("tma", "mma")
        self.touches.append(_Touch(i, g, 0, tuple(self.clock[q]), point, op, proxy))
        if access.agent == "tma" and access.op == "write":
            snap = list(self.clock[q])
            snap[g] = 1
            self.published.setdefault(access.mbarrier or "", []).append((point, snap, b.end))
            self.landing.setdefault(access.mbarrier or "", []).append((point, g, b.end))
        else:
            group = _GROUP_OF[access.agent, access.op]
            self.flight.setdefault((q, group), []).append((point, g, b.end))


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


_Finding = tuple[str, str, list[str], int]  # (code, message, buffers, point)


def _judge(
    request: PlanRequest,
    plan: Plan,
    touches: list[_Touch],
    fences: dict[int, list[tuple[int, int]]],
    n: int,
    agent_done: dict[int, tuple[int, int]],
    peer: int,
) -> list[_Finding]:
    """The findings of the run: missing invals, then unordered touches and missing fences,
    then clobbered reads."""
    where = {p.id: (p.offset, p.offset + p.size) for p in plan.placements if p.memory == "shared"}
    layout = _Layout(request.buffers, where, touches)
    return (
        _missing_invals(layout)
        + _unordered(layout, touches, fences, n, agent_done, peer)
        + _clobbered(layout, touches, peer)
    )


def _ordered(x: _Touch, y: _Touch) -> bool:
    """Whether touch ``x`` is ordered before touch ``y``."""
    return y.clock[x.who] >= x.tick + 1


class _Layout:
    """The buffers' shared-memory bytes and their touches, by buffer."""

    def __init__(
        self,
        bufs: list[Buffer],
        where: dict[str, tuple[int, int]],
        touches: list[_Touch],
    ) -> None:
        self.bufs = bufs
        self.where = where
        self.by_buffer: dict[int, list[_Touch]] = {}
        for t in touches:
            self.by_buffer.setdefault(t.buffer, []).append(t)

    def shares(self, i: int, j: int) -> bool:
        """Whether buffers ``i`` and ``j`` are placed on common shared bytes."""
        bufs, where = self.bufs, self.where
        if bufs[i].id not in where or bufs[j].id not in where:
            return False
        (a, b), (c, d) = where[bufs[i].id], where[bufs[j].id]
        return a < d and c < b

    def invalidated(self, i: int, j: int) -> bool:
        """Whether an inval of mbarrier ``i`` inside its lifetime ran after every other
        operation on it and before every touch of buffer ``j``."""
        mine = self.by_buffer.get(i, [])
        later = self.by_buffer.get(j, [])
        return any(
            x.inval
            and self.bufs[i].start < x.point < self.bufs[i].end
            and all(_ordered(t, x) for t in mine if not t.inval)
            and all(_ordered(x, y) for y in later)
            for x in mine
        )


def _missing_invals(layout: _Layout) -> list[_Finding]:
    """Each pair of an mbarrier and a buffer on its bytes that are live together, or that
    follow each other with no inval ordered between."""
    bufs = layout.bufs
    seen: set[tuple[int, int]] = set()
    out: list[_Finding] = []
    for i, b in enumerate(bufs):
        for j, c in enumerate(bufs):
            if i == j or not layout.shares(i, j) or b.kind != "mbarrier":
                continue
            if c.start < b.end and b.start < c.end:
                why = "are live together"
            elif b.end <= c.start and not layout.invalidated(i, j):
                why = "follow each other with no mbarrier_inval ordered between"
            else:
                continue
            if (min(i, j), max(i, j)) in seen:
                continue
            seen.add((min(i, j), max(i, j)))
            out.append(
                (
                    "missing_inval",
                    f"{b.id!r} and {c.id!r} run on one mbarrier's bytes and {why}",
                    [b.id, c.id],
                    0,
                )
            )
    return out


def _unordered(
    layout: _Layout,
    touches: list[_Touch],
    fences: dict[int, list[tuple[int, int]]],
    n: int,
    agent_done: dict[int, tuple[int, int]],
    peer: int,
) -> list[_Finding]:
    """Each pair of buffers on common bytes with touches not ordered (a race, or a peer's
    touch with no cluster barrier between), and each async-proxy touch of bytes a thread
    wrote with no fence ordered between."""
    bufs = layout.bufs
    seen: set[tuple[str, int, int]] = set()
    out: list[_Finding] = []
    for y in touches:
        for x in touches:
            if x.point >= y.point and x is not y:
                continue
            if x is y or x.buffer == y.buffer or not layout.shares(x.buffer, y.buffer):
                continue
            far = peer in (x.who, y.who)  # a peer CTA's touch: only a cluster barrier orders it
            code = "missing_cluster_barrier" if far else "race"
            key = (code, min(x.buffer, y.buffer), max(x.buffer, y.buffer))
            if not _ordered(x, y) and key not in seen:
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
            if far or not (y.proxy and x.op == "write" and not x.proxy):
                continue
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
    return out


def _clobbered(layout: _Layout, touches: list[_Touch], peer: int) -> list[_Finding]:
    """Each read of bytes another buffer wrote since the reader's own last write."""
    bufs = layout.bufs
    seen: set[tuple[int, int]] = set()
    out: list[_Finding] = []
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
                and layout.shares(x.buffer, y.buffer)
                and (x.buffer, y.buffer) not in seen
            ):
                seen.add((x.buffer, y.buffer))
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
