"""The brute force over interleavings for an mbarrier ``M`` whose bytes a buffer ``B`` may
take (docs/design.md, mbarriers, With partitions): each operation on ``M`` runs as a thread
access of its partition, and some inval must follow every other one and precede ``B``."""

from __future__ import annotations

from typing import Any

from planner.core.models import PlanRequest
from tests.support.interleavings import ordered_pairs
from tests.support.partition_programs import access

__all__ = ["Touch", "as_buffers", "inval_truth", "touches"]

Touch = tuple[str, int, str, bool]  # (partition, point, op, an inval)


def touches(req: PlanRequest, plan_inval: tuple[int, int] | None) -> list[Touch]:
    """(partition, point, op, an inval) of each operation on M, the plan's inval included."""
    names = [p.id for p in req.partitions]
    out = [(q, 0, "write", False) for q in names]
    for s in req.syncs:
        if s.mbarrier == "M":
            op = "read" if s.kind == "mbarrier_wait" else "write"
            out.append((s.partition or "", s.at, op, s.kind == "mbarrier_inval"))
    if plan_inval is not None:
        out.append((names[plan_inval[0]], plan_inval[1], "write", True))
    return sorted(set(out))


def inval_truth(req: PlanRequest, plan_inval: tuple[int, int] | None) -> bool:
    """Whether B may take M's bytes, over every interleaving: each operation on M runs as a
    thread access of its partition (a buffer of its own, live at its point); some inval
    inside M's lifetime comes after every other operation and before all of B, and every
    operation (every inval too) comes before all of B."""
    found = touches(req, plan_inval)
    m, b = req.buffers
    pairs = ordered_pairs(as_buffers(req, found, [b.model_dump(exclude_defaults=True)]))
    later = len(found)
    if any((k, later) not in pairs for k in range(len(found))):
        return False
    return any(
        inval
        and m.start < at < m.end
        and all((k, x) in pairs for k, t in enumerate(found) if not t[3])
        for x, (_, at, _, inval) in enumerate(found)
    )


def as_buffers(req: PlanRequest, found: list[Touch], more: list[dict[str, Any]]) -> PlanRequest:
    """``req``'s partitions and sync edges with each of ``found`` as a buffer of its own,
    live at its point, then the buffers ``more``."""
    own = [
        {"id": f"t{k}", "size": 4, "start": at, "end": at + 1, "accesses": [access(op, at, q)]}
        for k, (q, at, op, _) in enumerate(found)
    ]
    edges = ("mbarrier_arrive", "mbarrier_wait", "named_barrier")
    return PlanRequest.model_validate(
        {
            "partitions": [p.model_dump() for p in req.partitions],
            "barriers": req.barriers,
            "buffers": own + more,
            "syncs": [s.model_dump(exclude_defaults=True) for s in req.syncs if s.kind in edges],
        }
    )
