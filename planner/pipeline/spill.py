"""Spilling (``options.overflow: "spill"``): move the cheapest buffers to global memory.

When the shared arena cannot fit the capacity, a set of buffers moves to a per-block
global-memory workspace, planned as a second arena by the same planner. The set is the
cheapest one (cost: bytes, times the accesses each thread makes when patterns are given) that
brings the peak of live bytes within the capacity: exact by branch and bound up to a node
budget, else greedy. If the remaining buffers still do not fit (alignment padding, or a gap
the planner cannot close), the cheapest buffers placed above the capacity follow them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from planner.core.arrays import distinct
from planner.core.errors import RequestError
from planner.core.graph import build_graph
from planner.core.models import Barriers, Diagnostic, Launch, Plan, PlanRequest
from planner.core.targets import launch_figures
from planner.pipeline.program import build_program

__all__ = ["SpillChoice", "choose_spill", "plan_with_spill", "spill_costs"]

NODE_LIMIT = 20_000  # branch-and-bound nodes before the greedy choice stands
SINGLE_ROUNDS = 3  # replans that spill one more buffer each, before spilling all over capacity
SINGLE_ROUNDS_MAX_BUFFERS = 256  # above this a replan costs too much: spill all over at once
WORK_LIMIT = 2_000_000  # branch-and-bound nodes times overloaded points
_FITS = ("optimal", "feasible")

PlanFn = Callable[[PlanRequest], Plan]


@dataclass(frozen=True)
class SpillChoice:
    """Buffers to spill (indices, ascending), their total cost, and whether it is proved least."""

    spilled: list[int]
    cost: int
    proved: bool


def spill_costs(request: PlanRequest) -> list[int]:
    """Cost of spilling each buffer: its bytes, times the accesses each thread makes (the
    product of loop extents, summed over its patterns) when it has patterns."""
    costs: list[int] = []
    for b in request.buffers:
        count = sum(math.prod(a.loops.values()) for a in b.accesses)
        costs.append(b.size * max(1, count))
    return costs


def choose_spill(
    start: Sequence[int],
    end: Sequence[int],
    size: Sequence[int],
    cost: Sequence[int],
    spillable: Sequence[bool],
    capacity: int,
    *,
    node_limit: int = NODE_LIMIT,
    owner: Sequence[int] | None = None,
) -> SpillChoice | None:
    """The cheapest set of spillable buffers whose removal keeps the live bytes within
    ``capacity`` at every point (lifetimes half-open ``[start, end)``); None when even
    spilling every spillable buffer is not enough. Ties go to the set found first, in a
    deterministic order. With ``owner``, ``start`` and ``end`` are intervals (pieces) of
    the buffers ``owner`` names, a buffer's intervals never live at one point."""
    lo = np.asarray(start, dtype=np.int64)
    hi = np.asarray(end, dtype=np.int64)
    own = np.arange(lo.size) if owner is None else np.asarray(owner, dtype=np.int64)
    sz = np.asarray(size, dtype=np.int64)[own]
    points = distinct(lo)
    # Live bytes at p: sizes started at or before p, less those ended at or before p.
    by_start, by_end = np.argsort(lo, kind="stable"), np.argsort(hi, kind="stable")
    started = np.concatenate(([0], np.cumsum(sz[by_start])))
    ended = np.concatenate(([0], np.cumsum(sz[by_end])))
    load = (
        started[np.searchsorted(lo[by_start], points, side="right")]
        - ended[np.searchsorted(hi[by_end], points, side="right")]
    )
    over = np.flatnonzero(load > capacity)
    if over.size == 0:
        return SpillChoice([], 0, True)
    need = [int(load[k]) - capacity for k in over.tolist()]
    # cover[j]: spillable buffers live at the j-th overloaded point, cheapest per byte first.
    cover = []
    for p in points[over].tolist():
        live = own[np.flatnonzero((lo <= p) & (hi > p))].tolist()
        cover.append(
            sorted(
                (i for i in live if spillable[i]),
                key=lambda i: (cost[i] / size[i], -size[i], i),
            )
        )
    if any(sum(size[i] for i in c) < d for c, d in zip(cover, need, strict=True)):
        return None
    where: dict[int, list[int]] = {}
    for j, c in enumerate(cover):
        for i in c:
            where.setdefault(i, []).append(j)
    node_limit = min(node_limit, WORK_LIMIT // len(need))
    search = _Search(cover, need, where, size, cost, node_limit)
    search.best = _greedy(cover, need, where, size, cost)
    search.best_cost = sum(cost[i] for i in search.best)
    search.run(0)
    return SpillChoice(sorted(search.best), search.best_cost, not search.exhausted)


def _greedy(
    cover: list[list[int]],
    need: list[int],
    where: dict[int, list[int]],
    size: Sequence[int],
    cost: Sequence[int],
) -> list[int]:
    """At the most overloaded point, spill the buffer cheapest per byte of overload it
    removes; then give back every spill that is no longer needed, dearest first."""
    left = list(need)
    chosen: list[int] = []
    taken: set[int] = set()
    while True:
        j = max(range(len(left)), key=lambda j: (left[j], -j))
        if left[j] <= 0:
            break
        i = min(
            (i for i in cover[j] if i not in taken),
            key=lambda i: (cost[i] / min(size[i], left[j]), i),
        )
        chosen.append(i)
        taken.add(i)
        for jj in where[i]:
            left[jj] -= size[i]
    for i in sorted(chosen, key=lambda i: (-cost[i], i)):
        if all(left[jj] + size[i] <= 0 for jj in where[i]):
            chosen.remove(i)
            for jj in where[i]:
                left[jj] += size[i]
    return chosen


class _Search:
    """Branch and bound: at the first overloaded point, branch on which buffer to spill next;
    siblings exclude the buffers earlier branches took, so each set is seen once."""

    def __init__(
        self,
        cover: list[list[int]],
        need: list[int],
        where: dict[int, list[int]],
        size: Sequence[int],
        cost: Sequence[int],
        node_limit: int,
    ) -> None:
        self.cover, self.left, self.where = cover, list(need), where
        self.size, self.cost = size, cost
        self.nodes_left = node_limit
        self.exhausted = False
        self.chosen: list[int] = []
        self.banned: set[int] = set()
        self.best: list[int] = []
        self.best_cost = 0

    def run(self, spent: int) -> None:
        if self.nodes_left <= 0:
            self.exhausted = True
            return
        self.nodes_left -= 1
        j = next((j for j, d in enumerate(self.left) if d > 0), None)
        if j is None:
            if spent < self.best_cost:
                self.best, self.best_cost = list(self.chosen), spent
            return
        options = [i for i in self.cover[j] if i not in self.banned and i not in self.chosen]
        if spent + self._bound(options, self.left[j]) >= self.best_cost:
            return
        banned_here: list[int] = []
        for k, i in enumerate(options):
            if sum(self.size[x] for x in options[k:]) < self.left[j]:
                break  # the rest cannot cover this point
            self.chosen.append(i)
            for jj in self.where[i]:
                self.left[jj] -= self.size[i]
            self.run(spent + self.cost[i])
            for jj in self.where[i]:
                self.left[jj] += self.size[i]
            self.chosen.pop()
            self.banned.add(i)
            banned_here.append(i)
        self.banned.difference_update(banned_here)

    def _bound(self, options: list[int], need: int) -> float:
        """Least cost to cover ``need`` bytes with fractions of ``options`` (cheapest per
        byte first): no set that covers this point costs less."""
        total = 0.0
        for i in options:  # already sorted by cost per byte
            take = min(self.size[i], need)
            total += self.cost[i] * take / self.size[i]
            need -= take
            if need <= 0:
                return total - 1e-9 * total
        return math.inf


def plan_with_spill(request: PlanRequest, base: Plan, plan_fn: PlanFn) -> Plan:
    """``base`` (which does not fit) redone with the cheapest buffers in global memory.

    Returns ``base`` plus a diagnostic when the pinned buffers alone overflow the capacity.
    """
    capacity = request.effective_capacity
    assert capacity is not None
    costs = spill_costs(request)
    spillable = [b.offset is None for b in request.buffers]
    if request.has_control_flow:
        # The pieces of the unrolled program: a buffer is live at each of its pieces.
        prog = build_program(request)
        choice = choose_spill(
            [p.start for p in prog.pieces],
            [p.end for p in prog.pieces],
            [b.size for b in request.buffers],
            costs,
            spillable,
            capacity,
            owner=[p.buffer for p in prog.pieces],
        )
    else:
        graph = build_graph(request)
        choice = choose_spill(
            graph.start.tolist(),
            graph.occupied_end.tolist(),
            graph.size.tolist(),
            costs,
            spillable,
            capacity,
        )
    if choice is None:
        return _cannot_spill(base, capacity)
    spilled = set(choice.spilled)
    share = request.options.time_limit / (SINGLE_ROUNDS + 3)  # s, per replan
    singles = SINGLE_ROUNDS if len(request.buffers) <= SINGLE_ROUNDS_MAX_BUFFERS else 0
    shared = base
    reserved: list[int] = []
    if spilled:
        reserved = _reserved(request, spilled)
        shared = plan_fn(
            _subrequest(request, spilled, keep=True, time_limit=share, reserved=reserved)
        )
    for round_ in range(singles + 1):
        if shared.status in _FITS:
            break
        offsets = {p.id: p.offset for p in shared.placements}
        above = [
            i
            for i, b in enumerate(request.buffers)
            if i not in spilled and spillable[i] and offsets[b.id] + b.size > capacity
        ]
        if not above:
            return _cannot_spill(base, capacity)
        if round_ < singles:
            above = [min(above, key=lambda i: (costs[i], i))]
        spilled.update(above)
        reserved = _reserved(request, spilled)
        shared = plan_fn(
            _subrequest(request, spilled, keep=True, time_limit=share, reserved=reserved)
        )
    if shared.status not in _FITS:
        return _cannot_spill(base, capacity)
    inserted = sorted({*shared.barriers.inserted, *reserved})
    workspace = plan_fn(
        _subrequest(request, spilled, keep=False, time_limit=share, inserted=inserted)
    )
    return _merge(request, base, shared, workspace, spilled, costs, choice, reserved)


def _reserved(request: PlanRequest, spilled: set[int]) -> list[int]:
    """Under sync "insert" with ``max_new_barriers``, on a request with loops, branches or
    ranges: the new barriers the spilled buffers' reuses of their own bytes need whatever
    the placement. The cap bounds the new barriers of both arenas together, so these are
    set aside before the shared arena spends the rest, and the workspace is planned on
    them and the shared arena's with no new barrier of its own."""
    opts = request.options
    cap = opts.max_new_barriers
    if not request.has_control_flow or opts.sync != "insert" or not cap:
        return []
    from planner.pipeline.unrolled import own_reuse_barriers

    workspace = _subrequest(request, spilled, keep=False, time_limit=opts.time_limit)
    points = own_reuse_barriers(workspace)
    if len(points) > cap:
        raise RequestError.field(
            ("options", "max_new_barriers"),
            f"the spilled buffers need at least {len(points)} new barriers for reusing their "
            f"own bytes (at points {points}); max_new_barriers is {cap}",
            "too_few_barriers",
            cap,
        )
    return points


def _subrequest(
    request: PlanRequest,
    spilled: set[int],
    *,
    keep: bool,
    time_limit: float,
    inserted: list[int] | None = None,
    reserved: Sequence[int] = (),
) -> PlanRequest:
    """The kept buffers (``keep``) for shared memory, or the spilled ones for the workspace.

    The workspace has no capacity and needs no new barrier: under sync "existing" and
    "insert" it relies on the shared plan's barriers (``inserted``, the ``reserved`` ones
    among them); under "none" the caller's again. The shared arena gets the ``reserved``
    barriers as its own and the rest of the cap.
    """
    bufs = [b for i, b in enumerate(request.buffers) if (i in spilled) != keep]
    horizon = max((b.end for b in bufs), default=0)
    opts = request.options
    barriers = list(request.barriers)
    update: dict[str, object] = {"overflow": "error", "time_limit": time_limit}
    if keep and reserved:
        assert opts.max_new_barriers is not None
        barriers = sorted({*barriers, *reserved})
        update["max_new_barriers"] = opts.max_new_barriers - len(reserved)
    if not keep and opts.sync != "none" and inserted is not None:
        barriers = sorted(set(barriers) | set(inserted))
        if request.has_control_flow and opts.sync == "insert" and opts.max_new_barriers is None:
            # A spilled buffer in a loop body reuses its own bytes across the back edge: the
            # workspace may need barriers the shared plan did not (counted in the plan).
            update.update(max_new_barriers=None)
        else:
            update.update(sync="existing", barrier_candidates=None, max_new_barriers=None)
    elif opts.barrier_candidates is not None:
        update["barrier_candidates"] = [p for p in opts.barrier_candidates if p <= horizon]
    # A subset of a valid request, with barriers past its last point dropped (they bound no
    # lifetime any more): valid again, so it is copied without re-validation.
    return request.model_copy(
        update={
            "name": request.name,
            "target": request.target if keep else None,
            "capacity": request.effective_capacity if keep else None,
            "barriers": [p for p in barriers if p <= horizon],
            "buffers": bufs,
            "options": opts.model_copy(update=update),
        }
    )


def _merge(
    request: PlanRequest,
    base: Plan,
    shared: Plan,
    workspace: Plan,
    spilled: set[int],
    costs: list[int],
    choice: SpillChoice,
    reserved: list[int],
) -> Plan:
    where = {p.id: p for p in shared.placements}
    where.update({p.id: p.model_copy(update={"memory": "global"}) for p in workspace.placements})
    ids = [b.id for i, b in enumerate(request.buffers) if i in spilled]
    spilled_bytes = sum(request.buffers[i].size for i in spilled)
    extra = sorted(spilled - set(choice.spilled))
    how = "the cheapest set" if choice.proved else "a cheap set (greedy; not proved cheapest)"
    why = (
        f"; then {len(extra)} more, placed above the capacity by the planner"
        if extra and choice.spilled
        else ""
    )
    note = Diagnostic(
        level="warning",
        code="spilled",
        message=f"{len(ids)} buffer{'s' if len(ids) > 1 else ''} ({spilled_bytes} bytes, cost "
        f"{sum(costs[i] for i in spilled)}) moved to a {workspace.arena_bytes}-byte global "
        f"workspace per block so that shared memory fits the capacity of {base.capacity}: "
        f"{how} that brings the live bytes within it{why}: {_names(ids)}",
    )
    required = sorted(set(shared.barriers.required) | set(workspace.barriers.required))
    inserted = sorted({*shared.barriers.inserted, *workspace.barriers.inserted, *reserved})
    counts: dict[str, int] = {}
    if request.has_control_flow:
        points = set(base.barriers.existing) | set(inserted)
        counts = {
            "static": len(points),
            "executions": sum(request.executions_at(p) for p in points),
            "required_executions": sum(request.executions_at(p) for p in required),
        }
    return base.model_copy(
        update={
            "status": shared.status,
            "arena_bytes": shared.arena_bytes,
            "lower_bound": shared.lower_bound,
            "placements": [where[b.id] for b in request.buffers],
            "barriers": Barriers(
                existing=base.barriers.existing,
                inserted=inserted,
                required=required,
                **counts,
            ),
            "spilled": ids,
            "global_bytes": workspace.arena_bytes,
            "launch": Launch(
                **launch_figures(
                    request.profile,
                    shared.arena_bytes,
                    base.naive_bytes,
                    request.stated_base_alignment,
                )
            ),
            "solver": shared.solver,
            "diagnostics": [note, *shared.diagnostics],
            "certificate": None,
            # Each arena's thread-local aliases: the base plan's placed every buffer in one.
            "aliases": sorted([*shared.aliases, *workspace.aliases]),
        }
    )


def _names(ids: list[str], limit: int = 8) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _cannot_spill(base: Plan, capacity: int) -> Plan:
    note = Diagnostic(
        level="error",
        code="spill_impossible",
        message="spilling cannot make shared memory fit: the pinned buffers alone need more "
        f"than the capacity of {capacity}",
    )
    return base.model_copy(update={"diagnostics": [*base.diagnostics, note]})
