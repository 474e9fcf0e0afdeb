"""Asynchronous accesses and the synchronisation that completes and orders them (docs/design.md,
Asynchronous accesses): an access's agent, the request's ``syncs``, and which sync covers
(completes) each asynchronous access.

An asynchronous access starts at its issue point (its ``at``) and completes at the sync that
covers it: a ``cp.async`` write at a ``wait_group`` of group ``"cp.async"``; a TMA write (a
load into shared memory) at the ``mbarrier_wait`` on its mbarrier after an ``expect_tx`` on
it; a TMA read (a store's source) at a ``wait_group`` of group ``"bulk"``; an ``mma`` read (a
wgmma operand) at a ``wait_group`` of group ``"wgmma"``. Every access issued at one point by
one group's agent is one group, committed at that point. A sync at a point runs before the
accesses there; a covering sync lies in the same scope as the issue (the same loops and arms
around it, so it runs whenever the issue does, in the same iteration) and within the
buffer's live range.

With partitions a ``wait_group`` covers only the groups issued by the partition that runs it.

Under sync "insert" or "none" an access that a wait_group completes and no sync covers gets
one (``completing_waits``): ``wait_group N=0`` of its group at the first point after its issue
in its scope, run by the issuing partition where there are partitions, so its bytes are held
no longer than a synchronous access's. A TMA write, which its mbarrier completes, gets none.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.models._base import MAX_POINT, Errors, Loc, Point, absent

if TYPE_CHECKING:
    from planner.core.models.control import Branch, Loop
    from planner.core.models.request import Access, Buffer

__all__ = [
    "ASYNC_AGENTS",
    "ASYNC_PROXY_AGENTS",
    "MBARRIER_KINDS",
    "Agent",
    "Completed",
    "Covered",
    "GroupKind",
    "Op",
    "Sync",
    "SyncKind",
    "check_syncs",
    "completing_waits",
    "completions",
    "group_of",
    "scope_of",
]

Agent = Literal["threads", "cp.async", "tma", "mma"]
ASYNC_AGENTS = ("cp.async", "tma", "mma")
ASYNC_PROXY_AGENTS = ("tma", "mma")  # their shared-memory accesses go through the async proxy
SyncKind = Literal[
    "mbarrier_arrive",
    "mbarrier_wait",
    "expect_tx",
    "named_barrier",
    "wait_group",
    "fence_proxy_async",
    "cluster_barrier",
    "mbarrier_inval",
]
MBARRIER_KINDS = ("mbarrier_wait", "expect_tx", "mbarrier_arrive", "mbarrier_inval")
GroupKind = Literal["cp.async", "bulk", "wgmma"]
Op = Literal["read", "write"]
_GROUP_OF: dict[tuple[str, str], GroupKind] = {
    ("cp.async", "write"): "cp.async",
    ("tma", "read"): "bulk",
    ("mma", "read"): "wgmma",
}


class Sync(BaseModel):
    """One synchronisation operation at a program point (block barriers stay in ``barriers``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: SyncKind = Field(
        description=(
            'What it is: "wait_group" (cp.async.wait_group, cp.async.bulk.wait_group[.read], '
            "wgmma.wait_group),\n"
            '"mbarrier_wait", "expect_tx", "mbarrier_arrive", "fence_proxy_async", '
            '"named_barrier", "cluster_barrier", "mbarrier_inval".'
        )
    )
    at: Point = Field(description="Program point; it runs before the accesses at that point.")
    group: GroupKind | None = Field(
        default=None,
        exclude_if=absent,
        description=(
            'wait_group only (required there): the groups it waits for, "cp.async", "bulk" '
            '(TMA stores)\nor "wgmma".'
        ),
    )
    pending: int = Field(
        default=0,
        ge=0,
        le=1 << 20,
        description="wait_group only: the most recent groups that may stay in flight. Default 0.",
    )
    read: bool = Field(
        default=False,
        description=(
            'wait_group of group "bulk" only: .read, waits until the stores have read their '
            "sources.\nDefault false."
        ),
    )
    mbarrier: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        exclude_if=absent,
        description=(
            "mbarrier_wait, expect_tx, mbarrier_arrive, mbarrier_inval: the mbarrier's name "
            "(required;\nthe id of a buffer of kind mbarrier, or a name of the kernel's own)."
        ),
    )
    id: int | None = Field(
        default=None,
        ge=0,
        le=15,
        exclude_if=absent,
        description="named_barrier only: the barrier id, 0 to 15.",
    )
    partition: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        exclude_if=absent,
        description=(
            "In a request with partitions: the partition whose threads run it (every sync but "
            "a\nnamed_barrier or cluster_barrier)."
        ),
    )
    partitions: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=16,
        exclude_if=absent,
        description=(
            "named_barrier in a request with partitions: the partitions taking part (bar.sync "
            "id, n\nwith n their threads)."
        ),
    )

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Sync:
        errors = Errors("Sync")
        if self.kind == "wait_group" and self.group is None:
            errors.add(("group",), "missing_group", "a wait_group needs its group", None)
        if self.kind != "wait_group" and self.group is not None:
            errors.add(("group",), "group_not_allowed", f"a {self.kind} has no group", self.group)
        if self.read and self.group != "bulk":
            errors.add(("read",), "read_not_allowed", "read applies to bulk wait_groups", True)
        needs = self.kind in MBARRIER_KINDS
        if needs and self.mbarrier is None:
            errors.add(("mbarrier",), "missing_mbarrier", f"a {self.kind} needs its mbarrier", None)
        if not needs and self.mbarrier is not None:
            errors.add(
                ("mbarrier",),
                "mbarrier_not_allowed",
                f"a {self.kind} names no mbarrier",
                self.mbarrier,
            )
        if self.partitions is not None and self.kind != "named_barrier":
            errors.add(
                ("partitions",),
                "partitions_not_allowed",
                f"a {self.kind} is run by one partition: give partition",
                self.partitions,
            )
        if self.id is not None and self.kind != "named_barrier":
            errors.add(("id",), "id_not_allowed", f"a {self.kind} has no barrier id", self.id)
        errors.raise_if_any()
        return self


Scope = tuple[tuple[int, ...], tuple[tuple[int, int], ...]]  # (loops, (branch, arm)) around
# (group, scope, partition): the issues one wait_group may cover (partition None without
# partitions)
_GroupKey = tuple[GroupKind, Scope, str | None]


_STRAIGHT: Scope = ((), ())  # the scope of every point of a program without loops or branches


def scope_of(point: int, loops: Sequence[Loop], branches: Sequence[Branch]) -> Scope:
    """The loops and branch arms around ``point``: two points of one scope run together."""
    if not loops and not branches:
        return _STRAIGHT
    around = tuple(i for i, lp in enumerate(loops) if lp.start <= point < lp.end)
    arms = tuple(
        (i, k)
        for i, br in enumerate(branches)
        for k, (s, e) in enumerate(br.arms)
        if s <= point < e
    )
    return around, arms


class Covered(BaseModel):
    """Where an asynchronous access completes."""

    model_config = ConfigDict(frozen=True)

    buffer: int  # index in the request
    access: int  # index in the buffer's accesses
    issue: int  # program point
    done: int  # program point of the covering sync: complete before the accesses there


def group_of(access: Access) -> GroupKind | None:
    """The wait_group kind that completes ``access`` (None: a thread access or a TMA write)."""
    return _GROUP_OF.get((access.agent, access.op))


def completions(
    buffers: Sequence[Buffer],
    syncs: Sequence[Sync],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
) -> tuple[list[Covered], list[tuple[int, int, str]]]:
    """Each asynchronous access's covering sync, and (buffer, access, why) for those with
    none (docs/design.md, Asynchronous accesses)."""
    by_scope_points: dict[_GroupKey, list[int]] = {}
    for b in buffers:
        for a in b.accesses:
            group = group_of(a)
            if group is not None:
                key = (group, scope_of(a.at, loops, branches), a.partition)
                by_scope_points.setdefault(key, []).append(a.at)
    issued = {key: sorted(set(points)) for key, points in by_scope_points.items()}
    ordered = sorted(syncs, key=lambda s: s.at)
    found: list[Covered] = []
    missing: list[tuple[int, int, str]] = []
    for i, b in enumerate(buffers):
        for k, a in enumerate(b.accesses):
            if a.agent == "threads":
                continue
            scope = scope_of(a.at, loops, branches)
            limit = next(e for s, e in b.lifetimes if s <= a.at < e)  # the range's end
            done = _cover(a, scope, limit, ordered, issued, loops, branches)
            if isinstance(done, str):
                missing.append((i, k, done))
            else:
                found.append(Covered(buffer=i, access=k, issue=a.at, done=done))
    return found, missing


def _cover(
    a: Access,
    scope: Scope,
    limit: int,
    syncs: Sequence[Sync],
    issued: dict[_GroupKey, list[int]],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
) -> int | str:
    """The point of the sync that covers ``a``, or why none does."""
    after = [s for s in syncs if a.at < s.at <= limit]
    same = [s for s in after if scope_of(s.at, loops, branches) == scope]
    if a.agent == "tma" and a.op == "write":
        name = a.mbarrier
        before = [
            s
            for s in syncs
            if s.at <= a.at
            and s.mbarrier == name
            and s.kind in ("expect_tx", "mbarrier_wait")
            and scope_of(s.at, loops, branches) == scope
        ]
        # The last of them at or before the issue is the expect_tx (a wait at the issue
        # point runs before it: waits are listed first within a point).
        last = max(before, key=lambda s: (s.at, s.kind == "expect_tx"), default=None)
        if last is None or last.kind != "expect_tx":
            return (
                f"no expect_tx on mbarrier {name!r} at or before point {a.at} (after its last "
                "wait there) in the same scope"
            )
        wait = next((s for s in same if s.kind == "mbarrier_wait" and s.mbarrier == name), None)
        if wait is None:
            return (
                f"no mbarrier_wait on {name!r} after point {a.at} and by the end {limit} of the "
                "range, in the same scope"
            )
        return wait.at
    group = group_of(a)
    if group is None:
        return f"a {a.agent} {a.op} is no asynchronous access"
    points = issued.get((group, scope, a.partition), [])
    for s in same:
        # A wait_group covers the groups of the partition that runs it only.
        if s.kind != "wait_group" or s.group != group or s.partition != a.partition:
            continue
        # Groups committed after the issue and before the wait: the wait leaves the
        # ``pending`` most recent in flight.
        later = bisect.bisect_left(points, s.at) - bisect.bisect_right(points, a.at)
        if later >= s.pending:
            return s.at
    what = {"cp.async": "cp.async.wait_group", "bulk": "bulk wait_group", "wgmma": "wgmma"}
    return (
        f"no {what[group]} wait_group after point {a.at} that leaves this group no longer in "
        f"flight, by the end {limit} of the range, in the same scope"
    )


@dataclass(frozen=True)
class Completed:
    """The waits a plan adds or requires, where each asynchronous access then completes, and
    the accesses that still do not."""

    waits: list[Sync]
    covered: list[Covered]
    missing: list[tuple[int, int, str]]  # (buffer, access, why)


def completing_waits(
    buffers: Sequence[Buffer],
    syncs: Sequence[Sync],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
    *,
    waits: bool = True,
) -> Completed:
    """The wait_groups that complete the asynchronous accesses no sync of ``syncs`` covers (none
    without ``waits``), in point order, with the completions they give: for each such
    ``cp.async`` write, TMA read or ``mma`` read, a wait of its group (``read`` for a bulk one:
    the stores need only have read their sources) with ``pending`` 0, at the first point after
    the issue in the issue's scope and by the end of its range. One wait serves every access of
    its group whose first such point it is. An access with no such point (issued at the last
    point of its loop body or arm, or where its range ends first), or completed by an
    mbarrier, gets none. With partitions each wait is run by the partition that issued the
    accesses it serves: a wait_group covers its own partition's groups only."""
    covered, missing = completions(buffers, syncs, loops, branches)
    points: set[tuple[int, GroupKind, str]] = set()  # (point, group, partition or "")
    for i, k, _ in missing if waits else []:
        a = buffers[i].accesses[k]
        group = group_of(a)
        if group is None:
            continue
        limit = next(e for s, e in buffers[i].lifetimes if s <= a.at < e)
        at = _first_in_scope(a.at, limit, loops, branches)
        if at is not None:
            points.add((at, group, a.partition or ""))
    if not points:
        return Completed(waits=[], covered=covered, missing=missing)
    added = [
        Sync(kind="wait_group", at=at, group=group, read=group == "bulk", partition=by or None)
        for at, group, by in sorted(points)
    ]
    covered, missing = completions(buffers, [*syncs, *added], loops, branches)
    return Completed(waits=added, covered=covered, missing=missing)


def _first_in_scope(
    issue: int, limit: int, loops: Sequence[Loop], branches: Sequence[Branch]
) -> int | None:
    """The first point after ``issue`` and at most ``limit`` in the scope of ``issue``: the
    next point, or the end of a loop or arm that starts after the issue (the scope changes
    only there)."""
    scope = scope_of(issue, loops, branches)
    ends = [lp.end for lp in loops if lp.start > issue]
    ends += [e for br in branches for s, e in br.arms if s > issue]
    for p in sorted({issue + 1, *ends}):
        if p > limit:
            return None
        if scope_of(p, loops, branches) == scope:
            return p
    return None


def mbarrier_uses(buffer: Buffer, syncs: Sequence[Sync]) -> list[tuple[int, Op]]:
    """(point, op) of the accesses an mbarrier buffer's operations make to its 8 bytes: the
    init at its start (a write), each wait (a read) and each arrive, expect_tx and inval (a
    write), in point order."""
    uses: list[tuple[int, Op]] = [(buffer.start, "write")]
    for s in syncs:
        if s.mbarrier == buffer.id and s.kind in MBARRIER_KINDS:
            uses.append((s.at, "read" if s.kind == "mbarrier_wait" else "write"))
    return sorted(uses)


def inval_of(buffer: Buffer, syncs: Sequence[Sync]) -> int | None:
    """The point of the mbarrier_inval that frees the mbarrier's bytes: one after every other
    operation on it, inside its lifetime; None when there is none."""
    others = [s.at for s in syncs if s.mbarrier == buffer.id and s.kind != "mbarrier_inval"]
    last = max([buffer.start, *others])
    invals = [
        s.at
        for s in syncs
        if s.mbarrier == buffer.id and s.kind == "mbarrier_inval" and last < s.at < buffer.end
    ]
    return min(invals, default=None)


def check_syncs(
    buffers: Sequence[Buffer],
    syncs: Sequence[Sync],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
    horizon: int,
    errors: Errors,
    *,
    waits: bool = False,
) -> None:
    """Syncs inside the program, agents with their ops, and a covering sync for every
    asynchronous access; with ``waits`` (sync "insert" or "none"), one the plan adds or
    requires (``completing_waits``) counts too."""
    _check_sync_points(buffers, syncs, horizon, errors)
    bad = False
    for i, b in enumerate(buffers):
        for k, a in enumerate(b.accesses):
            bad |= _check_agent_op(b, a, ("buffers", i, "accesses", k), errors)
    if bad:
        return
    missing = completing_waits(buffers, syncs, loops, branches, waits=waits).missing
    for i, k, why in missing:
        a = buffers[i].accesses[k]
        if waits and group_of(a) is not None:
            why += ", and no point after the issue in its scope, by that end, for a wait"
        errors.add(
            ("buffers", i, "accesses", k, "agent"),
            "uncovered_async_access",
            f"the {a.agent} {a.op} of {buffers[i].id!r} at point {a.at} never completes: {why}",
            a.agent,
        )


def _check_sync_points(
    buffers: Sequence[Buffer], syncs: Sequence[Sync], horizon: int, errors: Errors
) -> None:
    """Each sync inside its mbarrier's lifetime and no later than the program's last point."""
    barriers = {b.id: b for b in buffers if b.kind == "mbarrier"}
    for k, s in enumerate(syncs):
        m = barriers.get(s.mbarrier or "")
        if m is not None and not m.start <= s.at < m.end:
            errors.add(
                ("syncs", k, "at"),
                "sync_outside_mbarrier",
                f"{s.kind} at point {s.at} on mbarrier {m.id!r} is outside its lifetime "
                f"[{m.start}, {m.end}) (initialised at {m.start})",
                s.at,
            )
        if s.at > min(horizon, MAX_POINT):
            errors.add(
                ("syncs", k, "at"),
                "sync_out_of_range",
                f"{s.kind} at point {s.at} is past the last point {horizon} of any lifetime",
                s.at,
            )


def _check_agent_op(b: Buffer, a: Access, loc: Loc, errors: Errors) -> bool:
    """Whether access ``a`` of ``b`` (at ``loc``) has an op its agent cannot do, or an mbarrier
    where only a TMA write completes on one; each such error is added."""
    bad = False
    if a.agent == "cp.async" and a.op != "write":
        errors.add(
            (*loc, "op"),
            "agent_op",
            f"a cp.async access of {b.id!r} writes shared memory; it cannot {a.op}",
            a.op,
        )
        bad = True
    if a.agent == "mma" and a.op != "read":
        errors.add(
            (*loc, "op"),
            "agent_op",
            f"an mma access of {b.id!r} reads its operand; it cannot {a.op}",
            a.op,
        )
        bad = True
    tma_load = a.agent == "tma" and a.op == "write"
    if tma_load and a.mbarrier is None:
        errors.add(
            (*loc, "mbarrier"),
            "missing_mbarrier",
            f"a TMA write of {b.id!r} completes on an mbarrier: name it",
            None,
        )
        bad = True
    if not tma_load and a.mbarrier is not None:
        errors.add(
            (*loc, "mbarrier"),
            "mbarrier_not_allowed",
            f"only a TMA write completes on an mbarrier ({b.id!r}: {a.agent} {a.op})",
            a.mbarrier,
        )
        bad = True
    return bad
