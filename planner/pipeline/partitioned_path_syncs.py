"""The new syncs of a partitioned plan with loops or branches, at original points
(docs/design.md, Warp-specialised partitions, Loops and branches): which chosen barrier
points no key needs, which become named barriers of just the warp groups their pairs need,
and the kernel with every new sync added, as the plan's check reads it.

A chosen point is not needed when every key it serves is served at another chosen point:
the choice leaves none when it is proved (no cheaper set serves every key), but the best
set found within its limits may hold some.

Each key (a buffer pair on common bytes, or a buffer's own instances) a barrier serves is
served at a chosen point of its set, one where a named barrier of its partitions serves it
when there is one; each point becomes ``bar.sync id, n`` for the partitions its keys need
(``n`` their threads, an id 1 to 15 the request does not use, one per set of partitions),
or stays a block barrier when that is every partition, the threads are no whole number of
warps or the ids run out. A named barrier at an original point runs at every run of it in
every partition taking part (every partition runs the same trips), so the point axis of
every path is an order each partition's program agrees with, as on a straight line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.core.models import PlanRequest
from planner.pipeline.partition_syncs import block_or_named
from planner.pipeline.partitioned_path_barriers import Key, Needs

__all__ = ["PathSyncs", "kernel_with", "name_points", "unused_dropped"]


@dataclass
class PathSyncs:
    """What a plan with loops or branches adds (or relies on the caller for)."""

    blocks: list[int] = field(default_factory=list)  # block barrier points, sorted
    named: list[tuple[int, int, tuple[int, ...]]] = field(default_factory=list)
    # (point, id, partitions), by point
    fences: list[tuple[int, int]] = field(default_factory=list)  # (partition, point), sorted
    at: dict[Key, int] = field(default_factory=dict)  # the point serving each key


def unused_dropped(
    req: PlanRequest, needs: Needs, keys: list[Key], chosen: list[int], with_fences: bool
) -> list[int]:
    """``chosen`` less the points no key needs: each in turn, the most executed first (then
    the latest), is dropped when every key it serves is served at a point still kept."""
    sets = [s for s in (needs.points(k, with_fences) for k in keys) if s]
    kept = set(chosen)
    for p in sorted(chosen, key=lambda p: (-req.executions_at(p), -p)):
        rest = kept - {p}
        if all(s & rest for s in sets if p in s):
            kept = rest
    return sorted(kept)


def name_points(
    req: PlanRequest,
    needs: Needs,
    keys: list[Key],
    chosen: list[int],
    with_fences: bool,
    named_ok: bool = True,
) -> PathSyncs:
    """The ``chosen`` points as block or named barriers (block only unless ``named_ok``) for
    the ``keys`` they serve; a point no key is served at stays a block barrier."""
    everyone = tuple(range(len(req.partitions)))
    members: dict[int, set[int]] = {p: set() for p in chosen}
    at: dict[Key, int] = {}
    for key in keys:
        points = [p for p in chosen if p in needs.points(key, with_fences)]
        if not points:
            continue  # needs no barrier (its fences alone order it)
        named = needs.named.get(key) if named_ok else None
        where, who = points[0], everyone
        if named is not None:
            fit = [p for p in points if p in named[1]]
            if fit:
                where, who = fit[0], tuple(sorted(named[0]))
        at[key] = where
        members.setdefault(where, set()).update(who)
    fences = sorted({f for k in keys for f in needs.fences.get(k, ())}) if with_fences else []
    out = PathSyncs(fences=fences, at=at)
    out.blocks, out.named = block_or_named(
        req, [(point, tuple(sorted(members[point])) or everyone) for point in sorted(members)]
    )
    return out


def kernel_with(req: PlanRequest, added: PathSyncs) -> PlanRequest:
    """``req`` with the new syncs as its own (sync "existing"): the kernel as it runs."""
    names = [p.id for p in req.partitions]
    data = req.model_dump(exclude_defaults=True)
    data["syncs"] = [
        *data.get("syncs", []),
        *({"kind": "fence_proxy_async", "at": at, "partition": names[q]} for q, at in added.fences),
        *(
            {"kind": "named_barrier", "at": at, "id": ident, "partitions": [names[q] for q in who]}
            for at, ident, who in added.named
        ),
    ]
    data["barriers"] = sorted({*req.barriers, *added.blocks})
    data["options"] = {
        **data.get("options", {}),
        "sync": "existing",
        "max_new_barriers": None,
        "barrier_candidates": None,
    }
    return PlanRequest.model_validate(data)
