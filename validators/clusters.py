"""The cluster rule as the validators check it (docs/design.md, Clusters), written apart from
the planner's choice of cluster barriers.

Two different buffers on common bytes, one of them cluster-scoped (a peer CTA touches it),
need a cluster barrier that runs after the earlier's last access and at or before the
later's first: a peer may be anywhere in the program between two cluster barriers. Each
validator checks it on its own reading of the kernel with the cluster barriers as the only
barriers and no thread-local alias (a peer's threads are no thread of this CTA): the static
check by its sweep, the emulator by running it, each reporting a reuse left open on a pair
with a cluster-scoped buffer as ``missing_cluster_barrier``. A cluster barrier orders the
CTA's own threads too, so both also count it as a block barrier at its point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from planner.core.models import Plan, PlanRequest, Violation

__all__ = ["cluster_view", "running_cluster_barriers", "scoped_violations"]

_WRITE: Literal["write"] = "write"
_READ: Literal["read"] = "read"


def running_cluster_barriers(request: PlanRequest, plan: Plan) -> list[int]:
    """Points where a cluster barrier runs: the request's, the plan's inserted ones, and
    under sync "none" the ones it requires (the caller puts them there)."""
    points = {s.at for s in request.syncs if s.kind == "cluster_barrier"}
    listed = plan.cluster_barriers
    if listed is not None:
        points |= set(listed.inserted)
        if request.options.sync == "none":
            points |= set(listed.required)
    return sorted(points)


def cluster_view(request: PlanRequest, plan: Plan) -> tuple[PlanRequest, Plan]:
    """The kernel as the cluster rule sees it (unchecked copies): only the cluster barriers
    are barriers, every access of a cluster-scoped buffer may be any thread's (a broadcast),
    and nothing is aliased. Its ``cluster`` is dropped so a check of it does not recurse.
    Rings are expanded first (``planner.core.rings.expand``) at the plan's depths."""
    from planner.core.rings import expand

    if request.rings and plan.rings:
        request = expand(request, {r.id: r.copies for r in plan.rings})
    from planner.core.models import Access, Barriers

    points = running_cluster_barriers(request, plan)
    buffers = []
    for b in request.buffers:
        if b.scope == "cluster" and not b.accesses and b.kind != "mbarrier":
            # Without patterns any thread may touch any byte from start to end - 1: a peer's
            # too, so not the emulator's synthetic per-thread pattern.
            whole = [
                Access.model_construct(op=op, at=at, bytes=1, threads="all")
                for s, e in b.lifetimes
                for op, at in ((_WRITE, s), (_READ, e - 1))
            ]
            b = b.model_copy(update={"accesses": whole})
        elif b.scope == "cluster" and b.accesses:
            anyone = [
                Access.model_construct(
                    op=a.op,
                    at=a.at,
                    bytes=min(a.bytes, b.size),
                    threads="all",
                    agent=a.agent,
                    mbarrier=a.mbarrier,
                )
                for a in b.accesses
            ]
            b = b.model_copy(update={"accesses": anyone})
        # The view has no cluster: its buffers are the CTA's (the rule's filter keeps the
        # scopes of the request).
        buffers.append(b.model_copy(update={"scope": "cta"}) if b.scope == "cluster" else b)
    syncs = [s for s in request.syncs if s.kind != "cluster_barrier"]
    options = request.options.model_copy(
        update={"sync": "existing", "barrier_candidates": None, "max_new_barriers": None}
    )
    view = request.model_copy(
        update={
            "cluster": None,
            "barriers": points,
            "syncs": syncs,
            "buffers": buffers,
            "options": options,
        }
    )
    seen = plan.model_copy(
        update={
            "barriers": Barriers(existing=points, inserted=[], required=[]),
            "aliases": [],
            "cluster_barriers": None,
            "rings": plan.rings if request.rings else None,
        }
    )
    return view, seen


def scoped_violations(
    request: PlanRequest, found: list[Violation], codes: tuple[str, ...]
) -> list[Violation]:
    """The violations of ``codes`` in a check of ``cluster_view`` that name two different
    buffers, one cluster-scoped, as ``missing_cluster_barrier``."""
    scoped = {b.id for b in request.buffers if b.scope == "cluster"}
    out: list[Violation] = []
    seen: set[tuple[str, ...]] = set()
    for v in found:
        ids = set(v.buffers)
        if v.code not in codes or len(ids) < 2 or not ids & scoped:
            continue
        key = tuple(sorted(ids))
        if key in seen:
            continue
        seen.add(key)
        out.append(
            v.model_copy(
                update={
                    "code": "missing_cluster_barrier",
                    "message": "no cluster barrier between them (a peer CTA touches the bytes "
                    f"of a cluster-scoped buffer): {v.message}",
                }
            )
        )
    return out
