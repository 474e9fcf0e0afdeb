"""What every attempt on one request shares: sizes, barriers, owners, the graph, the bound."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core.aliasing import ALIAS_MAX_BUFFERS, Owners
from planner.core.graph import (
    InterferenceGraph,
    LowerBound,
    access_bounds,
    build_graph,
    sync_barriers,
)
from planner.core.models import Footprint, PlanRequest
from planner.core.patterns import block_slice
from planner.solvers.bounds import hazard_bound

__all__ = ["Context", "build_context", "planned_sizes"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Context:
    """What every attempt of one request shares."""

    req: PlanRequest
    heuristics: list[str] | None  # None: the default greedy portfolio
    sizes: list[int]  # bytes planned per buffer: declared, or the per-block footprint
    footprints: list[Footprint]
    existing: list[int]  # the request's barriers, sorted
    owners: Owners | None  # None: no buffer can alias (no patterns, or too many buffers)
    reference: InterferenceGraph  # the policy's graph: every conflict it must respect
    before: I64  # per buffer: its first access (a barrier at or before it protects it)
    after: I64  # per buffer: its last access + 1 (a barrier at or after it follows it)
    bound: LowerBound  # valid for every plan of the request, aliases included
    exact: bool  # the reference graph's conflicts are exactly the request's: proofs hold
    spare: float  # of each attempt's time share: what the fixed work leaves (0..1)


def planned_sizes(req: PlanRequest) -> tuple[list[int], list[Footprint]]:
    """Bytes planned per buffer (request order): declared, or with ``options.shrink`` the
    per-block footprint; and the footprints that are smaller than the declaration."""
    footprints: list[Footprint] = []
    sizes = [b.size for b in req.buffers]
    if req.options.shrink:
        for i, b in enumerate(req.buffers):
            part = block_slice(req, b)
            if part is not None and part.size < b.size:
                sizes[i] = part.size
                footprints.append(
                    Footprint(
                        id=b.id,
                        declared=b.size,
                        planned=part.size,
                        index_base={**part.coefficients, "constant": part.constant},
                    )
                )
    return sizes, footprints


def build_context(req: PlanRequest, heuristics: list[str] | None, spare: float) -> Context:
    sizes, footprints = planned_sizes(req)
    shrunk = frozenset(i for i, b in enumerate(req.buffers) if sizes[i] != b.size)
    existing = sorted(set(req.barriers))
    patterned = any(b.accesses for i, b in enumerate(req.buffers) if i not in shrunk)
    aliasing = patterned and len(req.buffers) <= ALIAS_MAX_BUFFERS and req.options.sync != "none"
    owners = Owners(req, existing, shrunk) if aliasing else None
    reference = build_graph(req, sizes=sizes)
    before, after = access_bounds(req)
    # The graph is exact unless aliases are possible, or a buffer's first access comes after
    # a barrier point inside its lifetime (the graph then keeps it from bytes that barrier
    # frees). Otherwise only the lifetimes themselves bound the arena.
    exact = owners is None and not _late_first_access(reference.start, before, sync_barriers(req))
    loose = reference if exact else reference.released(after, None, req.horizon)
    bound = loose.lower_bound
    if req.options.sync != "none":  # barriers and aliases decide what may share
        hazard = _hazard_bound(req, reference, before, after, owners, shrunk, bound.bytes)
        bound = hazard if hazard.bytes > bound.bytes else bound
    return Context(
        req=req,
        heuristics=heuristics,
        sizes=sizes,
        footprints=footprints,
        existing=existing,
        owners=owners,
        reference=reference,
        before=before,
        after=after,
        bound=bound,
        exact=exact,
        spare=spare,
    )


def _hazard_bound(
    req: PlanRequest,
    g: InterferenceGraph,
    before: I64,
    after: I64,
    owners: Owners | None,
    shrunk: frozenset[int],
    floor: int,
) -> LowerBound:
    """``solvers.bounds.hazard_bound`` on the barriers any plan may have; aliases judged
    with the earliest cut-off those barriers allow (every point: no hazard is left). Where
    even ignoring aliases it is no more than ``floor`` (a bound in hand), it is not
    refined."""
    allowed = sync_barriers(req)
    plain = hazard_bound(g, before, after, allowed, None)  # as if no buffer could alias
    if allowed is None or owners is None or plain.bytes <= floor:
        return plain  # exact, or no more than ``floor``, which the caller keeps
    cut = owners if allowed == owners.barriers else Owners(req, allowed, shrunk)
    return hazard_bound(g, before, after, allowed, cut)


def _late_first_access(start: I64, before: I64, points: list[int] | None) -> bool:
    """Whether a point that ends occupied intervals lies in ``(start, first access]`` of a
    buffer."""
    if not points:
        return False
    for s, f in zip(start.tolist(), before.tolist(), strict=True):
        k = bisect.bisect_right(points, s)
        if k < len(points) and points[k] <= f:
            return True
    return False
