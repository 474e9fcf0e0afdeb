"""The mbarrier invals a partitioned plan with loops or branches may add (docs/design.md,
Warp-specialised partitions, Loops and branches): one per mbarrier buffer, at an original
point, so that another buffer may take its bytes.

On each path the inval goes where ``mbarrier_invals`` puts it on a straight line (the
earliest point with every other operation on the mbarrier ordered before it); the inval at
an original point is the latest of those over the paths (then the first partition), kept
only when it lies inside the buffer's lifetime and in no loop that the buffer's lifetime
does not hold, so that it runs once per instance of the mbarrier. An mbarrier whose paths
find the request's own inval takes none; one that some path finds none for takes none
either. Whether the inval orders everything on every path is then decided by the pair
verdicts on the request with it (an inval some path does not accept leaves the mbarrier
live with every other buffer there).
"""

from __future__ import annotations

from planner.core.models import PlanRequest
from planner.core.partition_paths import Path, grown_lifetime
from planner.core.partitions import mbarrier_invals

__all__ = ["inval_candidates", "with_invals"]


def inval_candidates(req: PlanRequest, paths: list[Path]) -> dict[int, tuple[int, int]]:
    """Per mbarrier buffer that another buffer could follow, (partition, original point) of
    the inval to add."""
    spans = [grown_lifetime(req, b.start, b.end) for b in req.buffers]
    wanted = [
        k
        for k, b in enumerate(req.buffers)
        if b.kind == "mbarrier"
        and any(j != k and s >= spans[k][1] for j, (s, _) in enumerate(spans))
    ]
    if not wanted:
        return {}
    found: dict[int, set[tuple[int, int]]] = {k: set() for k in wanted}
    refused: set[int] = set()
    for path in paths:
        insert = path.request.model_copy(
            update={"options": path.request.options.model_copy(update={"sync": "insert"})}
        )
        got = mbarrier_invals(insert)
        for i, k in enumerate(path.buffer):
            if k not in found:
                continue
            if i not in got or got[i][2] == "existing":
                refused.add(k)
            else:
                q, at, _ = got[i]
                found[k].add((path.points[at], q))
    out: dict[int, tuple[int, int]] = {}
    for k, points in sorted(found.items()):
        if k in refused or not points:
            continue
        at = max(p for p, _ in points)
        q = min(q for p, q in points if p == at)
        b = req.buffers[k]
        s0, e0 = spans[k]
        around = [lp for lp in req.loops if lp.start <= at < lp.end]
        if b.start < at < b.end and all(lp.start <= s0 and e0 <= lp.end for lp in around):
            out[k] = (q, at)
    return out


def with_invals(req: PlanRequest, invals: dict[int, tuple[int, int]]) -> PlanRequest:
    """``req`` with the ``invals`` among its syncs."""
    names = [p.id for p in req.partitions]
    added = [
        {
            "kind": "mbarrier_inval",
            "at": at,
            "mbarrier": req.buffers[k].id,
            "partition": names[q],
        }
        for k, (q, at) in sorted(invals.items())
    ]
    data = req.model_dump(exclude_defaults=True)
    data["syncs"] = [*data.get("syncs", []), *added]
    return PlanRequest.model_validate(data)
