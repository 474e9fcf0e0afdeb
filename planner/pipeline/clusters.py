"""Plans for requests with a thread-block cluster (docs/design.md, Clusters).

Two different buffers that share bytes, one of them cluster-scoped (a peer CTA touches it),
need a cluster barrier between the earlier's last access and the later's first: a block
barrier orders the CTA's own threads only. A cluster barrier orders every thread of the
cluster, the CTA's own included, so it is a block barrier at its point too: the request is
planned by the program route with its cluster barriers among its barriers, the pairs no
cluster barrier can protect kept apart, and the cluster barriers chosen last, for the
placement, at the fewest executions (upgrading block barriers the plan inserts where that
is cheaper). Buffers reusing their own bytes (a ring's slots across trips) keep to the block
rule: that reuse is the kernel's pipeline protocol, as it is for rings.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from planner.core.asyncs import inval_points, lowered
from planner.core.clusters import cluster_barrier_points
from planner.core.models import ClusterBarriers, PlanRequest
from planner.pipeline.ground import Ground
from planner.pipeline.outcome import Outcome
from planner.pipeline.outcome_parts import block_barriers
from planner.pipeline.program import Program, build_program
from planner.pipeline.unrolled import barrier_events, plan_unrolled
from planner.pipeline.unrolled_stab import choose, greedy

__all__ = ["cluster_hazards", "plan_clustered"]

Mask = npt.NDArray[np.bool_]


def cluster_hazards(prog: Program) -> Mask:
    """Per hazard of ``prog``: two different buffers, one of them cluster-scoped."""
    h = prog.hazards
    scoped = np.array([b.scope == "cluster" for b in prog.req.buffers] or [False], dtype=bool)
    out: Mask = (h.a != h.b) & (scoped[h.a] | scoped[h.b])
    return out


def _pairs(prog: Program, mask: Mask) -> frozenset[tuple[int, int]]:
    h = prog.hazards
    lo, hi = np.minimum(h.a, h.b)[mask], np.maximum(h.a, h.b)[mask]
    return frozenset(zip(lo.tolist(), hi.tolist(), strict=True))


def plan_clustered(g: Ground) -> Outcome:
    """The outcome of a request with a ``cluster``: offsets, block barriers and cluster barriers."""
    req = g.req
    own = cluster_barrier_points(req.syncs)
    # A cluster barrier is a block barrier at its point: the block reasoning counts it.
    view = req.model_copy(update={"barriers": sorted({*req.barriers, *own})})
    prog = build_program(lowered(view, inval_points(view)) if view.has_async else view)
    scoped = cluster_hazards(prog)
    policy = g.sync
    events = barrier_events(view)  # where a cluster barrier can make a difference
    allowed = g.allowed(events, own)
    reach = {"existing": own, "insert": [*own, *allowed], "none": events}[policy]
    apart = _pairs(prog, scoped & ~prog.protected(sorted(set(reach))))
    done = plan_unrolled(g.on(view), apart)
    offsets = done.offsets
    ends = offsets + np.asarray(done.sizes, dtype=np.int64)
    h = prog.hazards
    sharing = (offsets[h.a] < ends[h.b]) & (offsets[h.b] < ends[h.a])
    need: Mask = scoped & sharing
    block_new = [p for p in done.barriers.inserted if p not in own]
    inserted: list[int] = []
    if policy == "existing":
        required = greedy(prog, need, own, [])
        running = own
    elif policy == "insert":
        inserted = _cheapest(req, prog, need, own, allowed, block_new)
        running = sorted({*own, *inserted})
        required = greedy(prog, need, running, [])
    else:
        new = choose(prog, need, sorted(set(events) - set(own)), own)
        required = choose(prog, need, sorted({*own, *new.points}), []).points
        running = sorted({*own, *required})
    return _assemble(g, done, own, inserted, required, running)


def _cheapest(
    req: PlanRequest,
    prog: Program,
    need: Mask,
    own: list[int],
    allowed: list[int],
    block_new: list[int],
) -> list[int]:
    """New cluster points for the reuses ``need`` holds: at the fewest executions of cluster
    barriers, then of all barriers (the block barriers the plan inserts at the same points
    drop: a cluster barrier is one)."""

    def cost(points: list[int]) -> tuple[int, int, int]:
        # A cluster barrier waits for every CTA of the cluster: its executions count first.
        block = [p for p in block_new if p not in points]
        runs = sum(req.executions_at(p) for p in points)
        return runs, runs + sum(req.executions_at(p) for p in block), len(points) + len(block)

    tries = [choose(prog, need, allowed, own).points]
    if block_new:
        upgrade = choose(prog, need, block_new, own).points
        if not (need & ~prog.protected(sorted({*own, *upgrade}))).any():
            tries.append(upgrade)
    return min(tries, key=cost)


def _assemble(
    g: Ground,
    done: Outcome,
    own: list[int],
    inserted: list[int],
    required: list[int],
    running: list[int],
) -> Outcome:
    """``done``, the outcome of the view with the request's own block barriers, with block
    barriers that a cluster barrier at their point stands for left out, and the cluster
    barriers apart."""
    req, existing = g.req, g.existing
    held = set(running)
    block_inserted = [p for p in done.barriers.inserted if p not in held]
    kept = set(existing) | set(block_inserted)
    if req.options.sync == "none":
        block_required = [p for p in done.barriers.required if p in kept or p not in held]
    else:
        block_required = [p for p in done.barriers.required if p in kept]
    runtime = sorted(kept | (set(block_required) if req.options.sync == "none" else set()))
    barriers = block_barriers(g, block_inserted, block_required, runtime)
    cluster = ClusterBarriers(
        existing=own,
        inserted=sorted(inserted),
        required=sorted(required),
        executions=sum(req.executions_at(p) for p in running),
    )
    return replace(done, barriers=barriers, cluster_barriers=cluster)
