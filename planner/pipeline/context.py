"""What every attempt on one straight-line request shares: its ground, owners, the graph, the
bound."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core.aliasing import ALIAS_MAX_BUFFERS, Owners
from planner.core.arrays import distinct
from planner.core.graph import (
    InterferenceGraph,
    LowerBound,
    access_bounds,
    build_graph,
    sync_barriers,
)
from planner.core.models import Diagnostic, PlanRequest
from planner.pipeline.ground import Ground
from planner.solvers.bounds import hazard_bound
from planner.solvers.greedy import applicable

__all__ = ["CAP_SETS_MAX", "Context", "build_context"]

CAP_SETS_MAX = 256  # barrier sets a cap's bound is the least over; more: the cap is ignored

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Context(Ground):
    """What every attempt of one straight-line request shares: the request's ground, with
    ``heuristics`` narrowed to those that apply to its graph (``notes`` say when none does),
    and the graph, the owners and the bound."""

    owners: Owners | None  # None: no buffer can alias (no patterns, or too many buffers)
    reference: InterferenceGraph  # the policy's graph: every conflict it must respect
    first_access: I64  # per buffer: its first access (a barrier at or before it protects it)
    access_end: I64  # per buffer: its last access + 1 (a barrier at or after it follows it)
    bound: LowerBound  # valid for every plan of the request, aliases included
    exact: bool  # the reference graph's conflicts are exactly the request's: proofs hold


def build_context(ground: Ground) -> Context:
    """The context of a straight-line request from its ground."""
    req, sizes, existing = ground.req, ground.sizes, ground.existing
    shrunk = frozenset(i for i, b in enumerate(req.buffers) if sizes[i] != b.size)
    patterned = any(b.accesses for i, b in enumerate(req.buffers) if i not in shrunk)
    aliasing = patterned and len(req.buffers) <= ALIAS_MAX_BUFFERS and req.options.sync != "none"
    owners = Owners(req, existing, shrunk) if aliasing else None
    first_access, access_end = access_bounds(req)
    reference = build_graph(req, sizes=sizes)
    heuristics, notes = _applicable(req, reference, ground.heuristics)
    # The graph is exact unless aliases are possible, or a buffer's first access comes after
    # a barrier point inside its lifetime (the graph then keeps it from bytes that barrier
    # frees). Otherwise only the lifetimes themselves bound the arena.
    exact = owners is None and not _late_first_access(
        reference.start, first_access, sync_barriers(req)
    )
    loose = reference if exact else reference.released(access_end, None, req.horizon)
    bound = loose.lower_bound
    if req.options.sync != "none":  # barriers and aliases decide what may share
        hazard = _hazard_bound(
            ground, reference, first_access, access_end, owners, shrunk, bound.bytes
        )
        bound = hazard if hazard.bytes > bound.bytes else bound
    shared: dict[str, Any] = {f.name: getattr(ground, f.name) for f in fields(Ground)}
    shared.update(heuristics=heuristics, notes=[*ground.notes, *notes])
    return Context(
        **shared,
        owners=owners,
        reference=reference,
        first_access=first_access,
        access_end=access_end,
        bound=bound,
        exact=exact,
    )


def _applicable(
    req: PlanRequest, g: InterferenceGraph, heuristics: list[str] | None
) -> tuple[list[str] | None, list[Diagnostic]]:
    """The named heuristics that can plan the request; when none can (the skyline packs
    no pinned buffer, nor more than ``SKYLINE_MAX_BUFFERS``), the default portfolio and a
    diagnostic, as on the unrolled route. Every graph an attempt plans on has these pins
    and at most these buffers, so what applies here applies there."""
    if heuristics is None or any(applicable(g, h) for h in heuristics):
        return heuristics, []
    pinned = [b.id for b in req.buffers if b.offset is not None]
    why = f"buffer {pinned[0]!r} is pinned" if pinned else f"{g.n} buffers are too many for it"
    note = Diagnostic(
        level="warning",
        code="solver_not_applicable",
        message=f"solver {req.options.solver!r} cannot plan this request ({why}); it was "
        "planned by the default greedy portfolio",
    )
    return None, [note]


def _hazard_bound(
    ground: Ground,
    g: InterferenceGraph,
    first_access: I64,
    access_end: I64,
    owners: Owners | None,
    shrunk: frozenset[int],
    floor: int,
) -> LowerBound:
    """``solvers.bounds.hazard_bound`` on the barriers any plan may have; aliases judged
    with the earliest cut-off those barriers allow (every point: no hazard is left). Where
    even ignoring aliases it is no more than ``floor`` (a bound in hand), it is not
    refined. Under a cap of new barriers, the least bound over the barrier sets within it
    (``_capped_bound``)."""
    req = ground.req
    cap = req.options.max_new_barriers
    if req.options.sync == "insert" and cap is not None and cap > 0:
        capped = _capped_bound(ground, g, first_access, access_end, owners, shrunk, floor, cap)
        if capped is not None:
            return capped
    allowed = sync_barriers(req)
    plain = hazard_bound(g, first_access, access_end, allowed, None)  # as if no buffer could alias
    if allowed is None or owners is None or plain.bytes <= floor:
        return plain  # exact, or no more than ``floor``, which the caller keeps
    cut = owners if allowed == owners.barriers else Owners(req, allowed, shrunk)
    return hazard_bound(g, first_access, access_end, allowed, cut)


def _capped_bound(
    ground: Ground,
    g: InterferenceGraph,
    first_access: I64,
    access_end: I64,
    owners: Owners | None,
    shrunk: frozenset[int],
    floor: int,
    cap: int,
) -> LowerBound | None:
    """The least hazard bound over the request's barriers plus ``cap`` new ones; None when
    there are more than ``CAP_SETS_MAX`` such sets to look at.

    Every plan has its barriers among those sets' (more barriers only lower the bound), and
    a new barrier matters only through the buffers whose last access it follows: moved down
    to the first candidate at or after the latest such access it frees them no later, so
    only those first candidates are tried. Aliases are judged with every candidate a
    barrier, the most any plan allows."""
    req, existing = ground.req, ground.existing
    new = ground.allowed(range(req.horizon + 1), existing)
    tried = sorted(
        {
            new[k]
            for a in distinct(access_end).tolist()
            if (k := bisect.bisect_left(new, a)) < len(new)
        }
    )
    k = min(cap, len(tried))
    if math.comb(len(tried), k) > CAP_SETS_MAX:
        return None
    cut = None if owners is None else Owners(req, sorted(set(existing) | set(new)), shrunk)
    cache: dict[tuple[int, int], bool] = {}
    best: LowerBound | None = None
    for chosen in itertools.combinations(tried, k):
        barriers = sorted(set(existing) | set(chosen))
        found = hazard_bound(
            g, first_access, access_end, barriers, None
        )  # as if no buffer could alias
        if cut is not None and found.bytes > floor:
            found = hazard_bound(g, first_access, access_end, barriers, cut, cache)
        if best is None or found.bytes < best.bytes:
            best = found
        if best.bytes <= floor:
            break  # no set can give more than ``floor``, which the caller keeps
    return best


def _late_first_access(start: I64, first_access: I64, points: list[int] | None) -> bool:
    """Whether a point that ends occupied intervals lies in ``(start, first access]`` of a
    buffer."""
    if not points:
        return False
    for s, f in zip(start.tolist(), first_access.tolist(), strict=True):
        k = bisect.bisect_right(points, s)
        if k < len(points) and points[k] <= f:
            return True
    return False
