"""Plans for requests with warp-specialised partitions (docs/design.md, Warp-specialised
partitions), on the happens-before order of ``planner.core.partitions``.

Two buffers conflict when their lifetimes intersect or when no synchronisation orders one's
accesses before the other's: under "existing" the request's syncs only; under "insert" and
"none" also the proxy fences missing, and a new barrier at an allowed point of the pair's
window. The fits of the explicit conflict graph place them (CP-SAT on the pairs closes a gap),
then the fewest new barrier points are chosen for the pairs that share bytes (interval
stabbing, each at the latest allowed point of its window: exact), each a named barrier of
just the warp groups it orders where that suffices (``planner.pipeline.partition_syncs``).
An mbarrier shares its bytes only after its inval (``mbarrier_invals``: the request's, or one
inserted or required). The lower bound is the heaviest clique of the conflict graph: buffers
pairwise kept apart in every plan, whose sizes every arena holds at once.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import TypeAdapter

from planner.core.asyncs import added_waits
from planner.core.models import (
    ClusterBarriers,
    Diagnostic,
    Fence,
    Inval,
    PlanRequest,
    Wait,
)
from planner.core.partitions import (
    Invals,
    PairOrder,
    cluster_points,
    mbarrier_invals,
    pair_orders,
    weight_clique,
)
from planner.core.sync_choice import stabbing_points
from planner.pipeline.ground import Ground
from planner.pipeline.outcome import Outcome
from planner.pipeline.outcome_parts import (
    Witness,
    pair_certifier,
    pair_stats,
    partition_barriers,
    solved,
)
from planner.pipeline.partition_fences import needless_fences_left_out
from planner.pipeline.partition_syncs import (
    NewSyncs,
    choose_syncs,
    named_barriers,
    waits_in_words,
)
from planner.pipeline.partitioned_paths import plan_partitioned_paths
from planner.pipeline.placement import on_common_bytes, place
from planner.solvers.auto import Solution

__all__ = ["plan_partitioned"]

CLIQUE_MAX_BUFFERS = 96  # past it the bound is the heaviest point of live bytes
_NOTES = TypeAdapter(list[Diagnostic])


def plan_partitioned(g: Ground) -> Outcome:
    """The outcome of a request with ``partitions``."""
    if g.req.loops or g.req.branches:
        return plan_partitioned_paths(g)  # loops, branches: on every path
    completed = added_waits(g.req) if g.req.has_async else None
    waits = completed.waits if completed is not None else []
    if waits:
        # Planned on the kernel with its added waits: each completes its partition's groups
        # there, and orders them for the others from that partition's next release on.
        g = g.on(g.req.model_copy(update={"syncs": [*g.req.syncs, *waits]}))
    req, sizes = g.req, g.sizes
    invals = mbarrier_invals(req)
    verdicts = pair_orders(req, allow_new=g.sync != "existing", invals=invals)
    pairs = _sorted_pairs(verdicts, _allowed(g))
    bound, clique = _bound(req, sizes, pairs.hard)
    placed = place(g, pairs.hard, bound)
    added, stabs = _syncs(
        req, verdicts, on_common_bytes(sizes, placed.plan_offsets), pairs.windows, pairs.clusters
    )
    made_on = _Verdicts(g, verdicts, bound, pairs)
    if stabs or added.fences:
        placed, added = _without_new_syncs(made_on, placed, added, stabs)
    if added.fences:
        placed, added = _without_fences(made_on, placed, added)
        shared = on_common_bytes(sizes, placed.plan_offsets)
        added = needless_fences_left_out(req, verdicts, shared, added, invals)
    waited = waits_in_words(req, completed, _origin(req)) if completed is not None else {}
    outcome = _assemble(g, verdicts, placed, added, (bound, clique), invals, waited)
    if not waits:
        return outcome
    origin = _origin(req)
    listed = [
        Wait(kind=w.group, at=w.at, origin=origin, partition=w.partition)
        for w in waits
        if w.group is not None
    ]
    return replace(outcome, waits=listed)


@dataclass(frozen=True)
class _Pairs:
    """The pairs kept apart (``hard``), those a new block (or named) barrier at one of their
    points orders (``windows``), those a new cluster barrier orders (``clusters``), and those
    ordered once their missing fences are added (``fenced``)."""

    hard: set[tuple[int, int]]
    windows: dict[tuple[int, int], list[int]]
    clusters: dict[tuple[int, int], list[int]]
    fenced: set[tuple[int, int]]


def _sorted_pairs(verdicts: list[PairOrder], allowed: list[int]) -> _Pairs:
    """The pairs of ``verdicts`` by what orders them (new barriers only at ``allowed``)."""
    pairs = _Pairs(set(), {}, {}, set())
    for v in verdicts:
        if v.overlap:
            pairs.hard.add((v.i, v.j))
        elif v.ordered is not None:
            if v.fences:
                pairs.fenced.add((v.i, v.j))
        else:
            points = _points(v.cluster or (v.window or (0, 0, 1, 0))[2:], allowed)
            if points:
                (pairs.windows if v.cluster is None else pairs.clusters)[v.i, v.j] = points
            else:
                pairs.hard.add((v.i, v.j))
    return pairs


@dataclass(frozen=True)
class _Verdicts:
    """What the alternative placements are made on: the request's ground, its pair
    verdicts, the lower bound and the pairs by what orders them."""

    ground: Ground
    verdicts: list[PairOrder]
    bound: int
    pairs: _Pairs


def _without_new_syncs(
    w: _Verdicts, placed: Solution, added: NewSyncs, stabs: int
) -> tuple[Solution, NewSyncs]:
    """The plan on no new sync: taken when it needs no more bytes, or past the cap."""
    cap = w.ground.req.options.max_new_barriers
    over_cap = w.ground.sync == "insert" and cap is not None and stabs > cap
    p = w.pairs
    apart = p.hard | set(p.windows) | set(p.clusters) | p.fenced
    if over_cap or _clique_weight(w.ground.sizes, apart) <= placed.plan_arena:
        kept = place(w.ground, apart, w.bound, exact=False)
        if kept.plan_arena <= placed.plan_arena or over_cap:
            return kept, NewSyncs()
    return placed, added


def _without_fences(w: _Verdicts, placed: Solution, added: NewSyncs) -> tuple[Solution, NewSyncs]:
    """The plan on no new fence (the pairs that need one kept apart): taken when it needs no
    more bytes and no more barriers."""
    need = {(v.i, v.j) for v in w.verdicts if v.fences}
    apart = w.pairs.hard | need
    if _clique_weight(w.ground.sizes, apart) > placed.plan_arena:
        return placed, added
    alt = place(w.ground, apart, w.bound, exact=False)
    alt_added, alt_stabs = _syncs(
        w.ground.req,
        w.verdicts,
        on_common_bytes(w.ground.sizes, alt.plan_offsets),
        {k: w for k, w in w.pairs.windows.items() if k not in need},
        {k: w for k, w in w.pairs.clusters.items() if k not in need},
    )
    cap = w.ground.req.options.max_new_barriers
    within = w.ground.sync != "insert" or cap is None or alt_stabs <= cap
    if within and (alt.arena_bytes, alt_added.cost) <= (placed.arena_bytes, added.cost):
        return alt, alt_added
    return placed, added


def _origin(req: PlanRequest) -> Literal["inserted", "required"]:
    """How the plan lists the waits it adds: by the sync mode asked for, inserted under
    "insert" (with no new barrier allowed too) and required otherwise."""
    return "inserted" if req.options.sync == "insert" else "required"


def _invals(req: PlanRequest, invals: Invals, shared: set[tuple[int, int]]) -> list[Inval]:
    """The invals of the mbarriers whose bytes a later buffer takes, each with the partition
    that runs it."""
    names = [p.id for p in req.partitions]
    out: list[Inval] = []
    for i, (q, at, origin) in sorted(invals.items()):
        m = req.buffers[i]
        if any(
            (min(i, k), max(i, k)) in shared and b.start >= m.end
            for k, b in enumerate(req.buffers)
            if k != i
        ):
            out.append(Inval(mbarrier=m.id, at=at, origin=origin, partition=names[q]))
    return out


def _syncs(
    req: PlanRequest,
    verdicts: list[PairOrder],
    shared: set[tuple[int, int]],
    windows: dict[tuple[int, int], list[int]],
    clusters: dict[tuple[int, int], list[int]],
) -> tuple[NewSyncs, int]:
    """The new syncs for the pairs on common bytes, and the barrier points stabbed: the
    fewest cluster barriers first (each also a block barrier), then the fewest barriers for
    the pairs they leave."""
    on_cluster = _stab(clusters, shared)
    left = (
        {k for k in shared if not any(p in on_cluster for p in windows.get(k, ()))}
        if on_cluster
        else set(shared)
    )
    chosen = _stab(windows, left)
    added = choose_syncs(req, verdicts, left, chosen)
    added.clusters = on_cluster
    # The pairs a cluster barrier orders keep their fences.
    covered = shared - left
    added.fences = sorted(
        {*added.fences, *(f for v in verdicts if (v.i, v.j) in covered for f in v.fences)}
    )
    return added, len(on_cluster) + len(chosen)


def _allowed(g: Ground) -> list[int]:
    """Points where a new barrier may go: not the request's cluster barrier points, nor,
    among the candidates, its block barriers."""
    own = cluster_points(g.req)
    taken = own if g.req.options.barrier_candidates is None else [*own, *g.existing]
    return g.allowed(range(1, g.req.horizon + 1), taken)


def _points(window: tuple[int, int], allowed: list[int]) -> list[int]:
    """The allowed points in ``[lo, hi]``."""
    lo, hi = window
    return allowed[bisect.bisect_left(allowed, lo) : bisect.bisect_right(allowed, hi)]


def _bound(req: PlanRequest, sizes: list[int], hard: set[tuple[int, int]]) -> tuple[int, list[int]]:
    n = len(sizes)
    if n <= CLIQUE_MAX_BUFFERS:
        clique = weight_clique(n, sizes, hard)
        return sum(sizes[k] for k in clique), clique
    # Buffers live at one point conflict pairwise: a clique, so a valid bound.
    best: tuple[int, list[int]] = (0, [])
    for p in sorted({s for b in req.buffers for s, _ in b.lifetimes}):
        live = [k for k, b in enumerate(req.buffers) if any(s <= p < e for s, e in b.lifetimes)]
        best = max(best, (sum(sizes[k] for k in live), live))
    return best


def _clique_weight(sizes: list[int], edges: set[tuple[int, int]]) -> int:
    """The heaviest clique's weight on ``edges``: a bound every placement on them meets (past
    ``CLIQUE_MAX_BUFFERS``, 0: no bound)."""
    if len(sizes) > CLIQUE_MAX_BUFFERS:
        return 0
    return sum(sizes[k] for k in weight_clique(len(sizes), sizes, edges))


def _stab(windows: dict[tuple[int, int], list[int]], shared: set[tuple[int, int]]) -> list[int]:
    """The fewest points that give every sharing pair's window one: interval stabbing
    (``core.sync_choice``), exact, as each window is a run of the allowed points."""
    runs = [w for k, w in windows.items() if k in shared]
    candidates = sorted({p for w in runs for p in w})
    chosen, _ = stabbing_points([(w[0], w[-1]) for w in runs], candidates)
    return sorted(chosen)


def _assemble(
    g: Ground,
    verdicts: list[PairOrder],
    placed: Solution,
    added: NewSyncs,
    peak: tuple[int, list[int]],
    invals: Invals,
    waited: dict[int, str],
) -> Outcome:
    """The outcome of a partitioned request: the placement, the syncs it relies on, and a
    note per pair of buffers reusing bytes across partitions."""
    req, sizes, sync, origin = g.req, g.sizes, g.sync, g.origin
    offsets = placed.plan_offsets
    bound, clique = peak
    shared = on_common_bytes(sizes, offsets)
    names = [p.id for p in req.partitions]
    notes = [
        *g.notes,
        *_reuse_notes(req, verdicts, added, (invals, waited), shared, origin, clique),
    ]
    free = _free(verdicts, added)
    return Outcome(
        **solved(placed),
        sizes=sizes,
        lower_bound=bound,
        barriers=partition_barriers(g, added.blocks),
        graph=pair_stats(
            len(sizes),
            sum(1 for v in verdicts if v.overlap),
            [(v.i, v.j) for v in verdicts if (v.i, v.j) not in free],
        ),
        certify=pair_certifier(req, Witness(clique, bound), placed.bound),
        explain=lambda _status: notes,
        invals=_invals(req, invals, shared),
        fences=[Fence(at=at, origin=origin, partition=names[q]) for q, at in added.fences],
        cluster_barriers=_cluster_barriers(req, sync, added, verdicts, shared),
        named_barriers=named_barriers(req, added.named, origin),
    )


def _reuse_notes(
    req: PlanRequest,
    verdicts: list[PairOrder],
    added: NewSyncs,
    done: tuple[Invals, dict[int, str]],
    shared: set[tuple[int, int]],
    origin: Literal["inserted", "required"],
    clique: list[int],
) -> list[Diagnostic]:
    """One note per pair of buffers on common bytes and what orders them (after the inval
    or the added waits that finish the earlier one, ``done``), then one on the order the plan
    was made on and its lower bound."""
    invals, waited = done
    names = [p.id for p in req.partitions]
    reuses: list[dict[str, str]] = []
    for v in verdicts:
        if v.overlap or (v.i, v.j) not in shared:
            continue
        how = _how(v, added, names, origin)
        if how is None:
            continue  # pinned apart from any order: the static check refuses the plan
        x, y = v.ordered if v.ordered is not None else (v.window or (v.i, v.j))[:2]
        if x in invals:
            q, at, made = invals[x]
            how = f"the mbarrier_inval by {names[q]} at point {at} ({made}), then {how}"
        if x in waited:
            how = f"{waited[x]}, then {how}"
        reuses.append(
            {
                "level": "info",
                "code": "reuse_across_partitions",
                "message": (
                    f"{req.buffers[y].id} reuses bytes of {req.buffers[x].id}, ordered by {how}"
                ),
            }
        )
    reuses.append(
        {
            "level": "info",
            "code": "partitioned_program",
            "message": f"planned on the happens-before order of {len(req.partitions)} "
            f"partitions; lower bound: the heaviest clique of kept-apart buffers "
            f"({', '.join(req.buffers[k].id for k in clique)})",
        }
    )
    # One validation of the whole list: one per shared pair, in one call to the core.
    return _NOTES.validate_python(reuses)


def _cluster_barriers(
    req: PlanRequest,
    sync: str,
    added: NewSyncs,
    verdicts: list[PairOrder],
    shared: set[tuple[int, int]],
) -> ClusterBarriers | None:
    """The request's cluster barriers and the new ones (apart from block barriers); for
    requests with a cluster only. ``required`` is the fewest the plan relies on: the new ones,
    and the request's that the pairs on common bytes the new ones leave need."""
    if req.cluster is None:
        return None
    own = cluster_points(req)
    inserted = added.clusters if sync == "insert" else []
    running = sorted({*own, *added.clusters})
    return ClusterBarriers(
        existing=own,
        inserted=inserted,
        required=sorted({*added.clusters, *_fewest(own, added.clusters, verdicts, shared)}),
        executions=len(running),
    )


def _fewest(
    own: list[int], new: list[int], verdicts: list[PairOrder], shared: set[tuple[int, int]]
) -> list[int]:
    """The fewest of the request's cluster barriers ``own`` (sorted) that serve every pair on
    common bytes with a cluster-scoped buffer that no point of ``new`` serves (greedy by the
    span's end, each at the latest of ``own`` in it: exact for interval stabbing)."""
    spans = sorted(
        (
            v.span
            for v in verdicts
            if v.span is not None and (v.i, v.j) in shared and not _stabbed((0, 0, *v.span), new)
        ),
        key=lambda s: s[1],
    )
    chosen: list[int] = []
    for lo, hi in spans:
        if chosen and chosen[-1] >= lo:
            continue  # the last chosen lies in [lo, hi]: the spans come by their end
        k = bisect.bisect_right(own, hi)
        if k and own[k - 1] >= lo:
            chosen.append(own[k - 1])
    return chosen


def _how(v: PairOrder, added: NewSyncs, names: list[str], origin: str) -> str | None:
    """What orders a pair on common bytes, in words; None: nothing does."""
    mine = "the request's syncs (barriers, named barriers, mbarrier arrive/wait, fences)"
    if v.ordered is not None and not v.fences:
        return mine
    got = added.orders(v)
    if got is None:
        return None
    kind, at, ident = got
    if kind == "joint":
        return f"the request's syncs together with the syncs this plan adds ({origin})"
    fences = "".join(
        f", with a proxy fence by {names[q]} at point {p} ({origin})" for q, p in v.fences
    )
    if kind == "fence":
        return mine + fences
    if kind == "cluster":
        return f"a cluster barrier at point {at} ({origin}){fences}"
    if kind == "block":
        return f"a block barrier at point {at} ({origin}){fences}"
    return f"a named barrier (id {ident}) at point {at} ({origin}){fences}"


def _free(verdicts: list[PairOrder], added: NewSyncs) -> set[tuple[int, int]]:
    """Pairs free to share: ordered by the request, or by the new syncs."""
    out: set[tuple[int, int]] = set()
    for v in verdicts:
        if v.overlap:
            continue
        if (v.ordered is not None and not v.fences) or added.orders(v) is not None:
            out.add((v.i, v.j))
    return out


def _stabbed(window: tuple[int, int, int, int], chosen: list[int]) -> bool:
    """Whether a point of ``chosen`` (sorted) lies in the window's ``[lo, hi]``."""
    k = bisect.bisect_left(chosen, window[2])
    return k < len(chosen) and chosen[k] <= window[3]
