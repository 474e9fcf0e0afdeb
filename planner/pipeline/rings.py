"""Plans of requests with rings: the depth of every ring chosen with the offsets
(docs/design.md, Rings).

The depths maximise the sum of priority * copies over the plans that fit the capacity, then
the smallest arena, then the first combination in order (ring by ring, fewest copies first).
Combinations are visited by weight, heaviest first; within one weight every combination whose
peak of live bytes fits is planned by the full planner, and the first weight with a plan that
fits is the answer. Without a capacity every ring takes its most copies. When nothing fits,
the plan is the lightest combination's (infeasible, with its certificate).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby

from planner.core.graph import build_graph
from planner.core.io import request_sha256
from planner.core.models import Plan, PlanRequest, Ring
from planner.core.rings import choices, expand, stride, weight

__all__ = ["plan_rings"]

FITTING = ("optimal", "feasible")


def plan_rings(req: PlanRequest, plan_one: Callable[[PlanRequest], Plan]) -> Plan:
    """The plan of ``req`` with its ring depths chosen; ``plan_one`` plans a request without
    rings."""
    combos = list(choices(req))
    capacity = req.effective_capacity
    ordered = sorted(combos, key=lambda c: -weight(req, c))  # stable: ties keep their order
    chosen: tuple[dict[str, int], Plan] | None = None
    if capacity is None:
        top = ordered[0]
        chosen = (top, plan_one(expand(req, top)))
    else:
        for _, level in groupby(ordered, key=lambda c: weight(req, c)):
            best: tuple[dict[str, int], Plan] | None = None
            for combo in level:
                expanded = expand(req, combo)
                if build_graph(expanded).lower_bound.bytes > capacity:
                    continue  # no plan of these depths fits
                result = plan_one(expanded)
                if result.status not in FITTING:
                    continue
                if best is None or result.arena_bytes < best[1].arena_bytes:
                    best = (combo, result)
            if best is not None:
                chosen = best
                break
    if chosen is None:
        low = weight(req, ordered[-1])
        lightest = next(c for c in combos if weight(req, c) == low)
        chosen = (lightest, plan_one(expand(req, lightest)))
    combo, result = chosen
    rings = [
        Ring(
            id=req.buffers[i].id,
            copies=combo[req.buffers[i].id],
            stride=stride(req, req.buffers[i]),
        )
        for i in req.rings
    ]
    return result.model_copy(update={"rings": rings, "request_sha256": request_sha256(req)})
