"""The proxy fences a partitioned plan adds that its other syncs make needless, left out.

A pair ordered by the request's syncs but for a proxy fence gets a new fence right after its
generic write. A barrier the plan adds for another pair may stand after a fence of the request
(or after another new fence) and before the async access: the pair is then ordered without
its own new fence. Each new fence, earliest first, is left out where the kernel as it runs
with the request's syncs and the other new ones (``kernel_with``) still orders every pair on
common bytes (``pair_orders``), so a plan never adds a fence it does not need.
"""

from __future__ import annotations

from planner.core.models import PlanRequest
from planner.core.partitions import Invals, PairOrder, pair_orders
from planner.pipeline.partition_syncs import NewSyncs
from planner.pipeline.partitioned_path_syncs import PathSyncs, kernel_with

__all__ = ["needless_fences_left_out"]


def needless_fences_left_out(
    req: PlanRequest,
    verdicts: list[PairOrder],
    shared: set[tuple[int, int]],
    added: NewSyncs,
    invals: Invals,
) -> NewSyncs:
    """``added`` without the new fences the kernel does not need. A pair whose own fences were
    left out is then ordered by the request's syncs and the new ones together
    (``NewSyncs.joint``)."""
    if not added.fences or added.clusters:
        return added
    fences = list(added.fences)
    for fence in sorted(added.fences, key=lambda f: (f[1], f[0])):
        trial = [f for f in fences if f != fence]
        if _orders_all(req, shared, added, trial, invals):
            fences = trial
    if len(fences) == len(added.fences):
        return added
    out = NewSyncs(blocks=added.blocks, named=added.named, fences=fences, clusters=added.clusters)
    kept = set(fences)
    for v in verdicts:
        if (v.i, v.j) in shared and not v.overlap and v.fences and not set(v.fences) <= kept:
            out.joint((v.i, v.j))
    return out


def _orders_all(
    req: PlanRequest,
    shared: set[tuple[int, int]],
    added: NewSyncs,
    fences: list[tuple[int, int]],
    invals: Invals,
) -> bool:
    """Whether the kernel with ``added``'s barriers and ``fences`` orders every pair of
    ``shared`` that is not live together, proxy fences included."""
    kernel = kernel_with(req, PathSyncs(blocks=added.blocks, named=added.named, fences=fences))
    return all(
        v.ordered is not None and not v.fences
        for v in pair_orders(kernel, allow_new=False, invals=invals)
        if (v.i, v.j) in shared and not v.overlap
    )
