"""Plans for partitioned requests with loops and branches (docs/design.md, Warp-specialised
partitions, Loops and branches): the pair verdicts of ``planner.core.partitions`` on every
path (``planner.core.partition_paths``), folded per buffer pair.

Two buffers may share bytes only if, on every path, every instance of one is ordered before
every instance of the other by the request's syncs; a buffer's own instances in consecutive
iterations share their bytes, so they must be ordered so too, or the request is refused
(``unprotected_reuse``). No sync is added: under "insert" and "none" a pair a new sync would
order is kept apart as well. An mbarrier buffer keeps its bytes. The lower bound is the
heaviest clique of the pairs no plan may let share: live together on some path, and under
"existing" also unordered on some path.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core.errors import RequestError
from planner.core.models import Barriers, Certificate, Diagnostic, GraphStats, PlanRequest
from planner.core.models.partition_control import count_paths, path_trips
from planner.core.partition_paths import Path, partition_paths
from planner.core.partitions import pair_orders, weight_clique
from planner.pipeline.outcome import Outcome
from planner.pipeline.unrolled import place_on_pairs
from planner.solvers.auto import Solution
from planner.solvers.edges import ExplicitGraph
from planner.solvers.registry import SolverChoice

__all__ = ["plan_partitioned_paths"]

Pair = tuple[int, int]
SECONDS_PER_PATH_PAIR = 5e-5  # expansion, verdicts and the static check, per instance pair


def plan_partitioned_paths(req: PlanRequest, solver: SolverChoice) -> Outcome:
    """The outcome of a partitioned request with loops or branches."""
    _check_work(req)
    paths = partition_paths(req)
    live, unordered = fold(req, paths)
    n = len(req.buffers)
    sizes = [b.size for b in req.buffers]
    mbarriers = [k for k, b in enumerate(req.buffers) if b.kind == "mbarrier"]
    kept = {(min(i, k), max(i, k)) for i in mbarriers for k in range(n) if k != i}
    hard = live | unordered | kept
    floor = live | unordered if req.options.sync == "existing" else live
    clique = weight_clique(n, sizes, floor)
    bound = sum(sizes[k] for k in clique)
    placed = _place(req, hard, bound, exact=solver.pair_model)
    existing = sorted(set(req.barriers))
    shared = _sharing(placed.plan_offsets, sizes)
    notes = _notes(req, paths, shared, clique)

    def certify(capacity: int) -> Certificate:
        over = bound > capacity
        return Certificate(
            reason="infeasible_subset" if not over else "lower_bound",
            capacity=capacity,
            live_bytes=placed.bound,
            buffers=[req.buffers[k].id for k in (clique if over else range(n))],
        )

    return Outcome(
        method=placed.name,
        offsets=placed.plan_offsets,
        sizes=sizes,
        arena=placed.plan_arena,
        tried=placed.tried,
        lower_bound=bound,
        bound=placed.bound,
        proved=placed.proved_optimal,
        barriers=Barriers(
            existing=existing,
            inserted=[],
            required=[],
            static=len(existing),
            executions=sum(req.executions_at(p) for p in existing),
            required_executions=0,
        ),
        graph=GraphStats(
            buffers=n,
            live_edges=len(live),
            hazard_edges=len(hard - live),
            components=_components(n, hard),
        ),
        certify=certify,
        explain=lambda _status: notes,
    )


def _check_work(req: PlanRequest) -> None:
    """Refuses at once a request whose paths hold more pairs of buffer instances than the
    time limit allows to judge (and the plan to check): each path counted with every loop
    at its most trips."""
    paths, _ = count_paths(req.loops, req.branches)
    most = [max(path_trips(lp)) or 1 for lp in req.loops]
    instances = 0
    for b in req.buffers:
        copies = 1
        for k, lp in enumerate(req.loops):
            if lp.start <= b.start and b.end <= lp.end:
                copies *= most[k]
        instances += copies
    pairs = paths * instances * (instances - 1) // 2
    needed = SECONDS_PER_PATH_PAIR * pairs
    if needed > req.options.time_limit:
        raise RequestError.field(
            ("options", "time_limit"),
            f"the {paths} paths of the loops and branches hold up to {pairs} pairs of buffer "
            f"instances to judge, about {needed:.3g} s of work; the time limit is "
            f"{req.options.time_limit:g} s",
            "time_limit_too_small",
            req.options.time_limit,
        )


def fold(req: PlanRequest, paths: list[Path]) -> tuple[set[Pair], set[Pair]]:
    """The buffer pairs (i < j) live together on some path, and those some instance pair of
    which no sync of the request orders on some path; raises ``unprotected_reuse`` when a
    buffer's own instances are unordered."""
    live: set[Pair] = set()
    unordered: set[Pair] = set()
    for path in paths:
        owner = path.buffer
        if not owner:
            continue  # a path that skips every buffer
        for v in pair_orders(path.request, allow_new=False):
            i, j = owner[v.i], owner[v.j]
            ordered = not v.overlap and v.ordered is not None and not v.fences
            if i == j:
                if not ordered:
                    raise _own_race(req, path, v.i, v.j)
                continue
            pair = (min(i, j), max(i, j))
            if v.overlap:
                live.add(pair)
            elif not ordered:
                unordered.add(pair)
    return live, unordered - live


def _own_race(req: PlanRequest, path: Path, a: int, b: int) -> RequestError:
    k = path.buffer[a]
    x, y = path.request.buffers[a], path.request.buffers[b]
    return RequestError.field(
        ("buffers", k),
        f"buffer {req.buffers[k].id!r} reuses its own bytes from one iteration to the next "
        f"({x.id} and {y.id}, from point {path.points[x.start]}) and no sync of the request "
        "orders its accesses in one iteration before those of the next on every path: add "
        "the arrive/wait pair (or barrier) that frees its slot",
        "unprotected_reuse",
        req.buffers[k].id,
    )


def _place(req: PlanRequest, edges: set[Pair], bound: int, *, exact: bool) -> Solution:
    """The fits (and CP-SAT on the pairs) on the conflict graph ``edges``."""
    bufs = req.buffers
    n = len(bufs)
    g = ExplicitGraph(
        size=np.asarray([b.size for b in bufs], dtype=np.int64),
        alignment=np.fromiter((req.alignment_of(b) for b in bufs), dtype=np.int64, count=n),
        pinned=np.fromiter((-1 if b.offset is None else b.offset for b in bufs), np.int64, n),
        start=np.asarray([b.start for b in bufs], dtype=np.int64),
        length=np.asarray([b.end - b.start for b in bufs], dtype=np.int64),
        edges=edges,
    )
    return place_on_pairs(req, g, bound, None, exact)


def _sharing(offsets: npt.NDArray[np.int64], sizes: list[int]) -> set[Pair]:
    where = [int(o) for o in offsets]
    return {
        (i, j)
        for i in range(len(sizes))
        for j in range(i + 1, len(sizes))
        if where[i] < where[j] + sizes[j] and where[j] < where[i] + sizes[i]
    }


def _notes(
    req: PlanRequest, paths: list[Path], shared: set[Pair], clique: list[int]
) -> list[Diagnostic]:
    ids = [b.id for b in req.buffers]
    bufs = req.buffers
    out = [
        Diagnostic(
            level="info",
            code="reuse_across_partitions",
            message=(
                f"{ids[y]} reuses bytes of {ids[x]}, ordered by the request's syncs on every "
                f"one of the {len(paths)} paths of its loops and branches"
            ),
        )
        for x, y in sorted(
            (i, j) if (bufs[i].start, i) <= (bufs[j].start, j) else (j, i) for i, j in shared
        )
    ]
    out.append(
        Diagnostic(
            level="info",
            code="partitioned_program",
            message=f"planned on the happens-before order of {len(req.partitions)} partitions "
            f"on each of {len(paths)} paths (every loop run 0 to 3 times as it admits, every "
            f"arm); lower bound: the heaviest clique of kept-apart buffers "
            f"({', '.join(ids[k] for k in clique)})",
        )
    )
    return out


def _components(n: int, edges: set[Pair]) -> int:
    parent = list(range(n))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for i, j in edges:
        parent[root(i)] = root(j)
    return len({root(k) for k in range(n)})
