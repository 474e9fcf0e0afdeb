"""Plans for partitioned requests with loops and branches (docs/design.md, Warp-specialised
partitions, Loops and branches): the pair verdicts of ``planner.core.partitions`` on every
path (``planner.core.partition_paths``), folded per buffer pair.

Two buffers may share bytes only if, on every path, every instance of one is ordered before
every instance of the other: by the request's syncs, or under "insert" and "none" by new syncs
at original points, each run at every run of its point: block barriers, named barriers of
just the partitions a pair needs, proxy fences right after generic writes
(``planner.pipeline.partitioned_path_barriers``, ``partitioned_path_syncs``) and mbarrier
invals (``partitioned_path_invals``); the wait_groups no sync of the request gives are
added first (``added_waits``, in the issue's scope) and the plan is made on the kernel with
them. A buffer's own instances in consecutive iterations share
their bytes, so they must be ordered so too, or the request is refused
(``unprotected_reuse``). The plan with fences, or with invals, is taken when it needs fewer
bytes (or only the fences order a buffer's own instances), and any plan with new syncs only
once the request with them, read over again on every path, orders every pair it lets share.
The lower bound is the heaviest clique of the pairs no plan may let share: live together on
some path, and under "existing" also unordered on some path.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import ValidationError

from planner.core.asyncs import added_waits
from planner.core.errors import RequestError
from planner.core.models import (
    Diagnostic,
    Fence,
    Inval,
    PlanRequest,
    Wait,
)
from planner.core.models.partition_control import count_paths, path_trips
from planner.core.partition_paths import Path, grown_lifetime, partition_paths
from planner.core.partitions import pair_orders, weight_clique
from planner.pipeline.ground import Ground
from planner.pipeline.outcome import Outcome
from planner.pipeline.outcome_parts import (
    Witness,
    pair_certifier,
    pair_stats,
    partition_barriers,
    solved,
)
from planner.pipeline.partition_syncs import named_barriers, waits_in_words
from planner.pipeline.partitioned_path_barriers import Key, Needs, stab
from planner.pipeline.partitioned_path_invals import inval_candidates, with_invals
from planner.pipeline.partitioned_path_syncs import (
    PathSyncs,
    kernel_with,
    name_points,
    unused_dropped,
)
from planner.pipeline.placement import on_common_bytes, place
from planner.solvers.auto import Solution

__all__ = ["plan_partitioned_paths"]

Pair = tuple[int, int]
SECONDS_PER_PATH_PAIR = 5e-5  # expansion, verdicts and the static check, per instance pair


@dataclass
class _Variant:
    """A placement and the new syncs it relies on."""

    placed: Solution
    chosen: list[int]  # barrier points (block or named)
    keys: list[Key]  # what the barriers and fences serve: own instances, pairs on common bytes
    with_fences: bool
    hard: set[Pair]  # the pairs kept apart


@dataclass
class _Frame:
    """A request (the caller's, or with the invals added) read on its paths."""

    req: PlanRequest
    paths: list[Path]
    needs: Needs | None
    live: set[Pair]
    kept: set[Pair]
    unordered: set[Pair]
    clique: list[int]
    bound: int


def _frame(req: PlanRequest, g: Ground, free: frozenset[int] = frozenset()) -> _Frame:
    """``req`` read on its paths: the pair verdicts folded, what new syncs would serve, and
    the lower bound; the mbarriers ``free`` (with an inval) are kept apart only where some
    path finds them live."""
    paths = partition_paths(req)
    sync = g.sync
    # ``req`` is ``g.req`` or it with more syncs: the same points allowed, the same sizes.
    allowed = g.allowed(range(1, g.req.horizon + 1), g.existing)
    needs = None if sync == "existing" else Needs(frozenset(allowed))
    live, unordered = fold(req, paths, needs)
    n = len(req.buffers)
    sizes = g.sizes
    mbarriers = [k for k, b in enumerate(req.buffers) if b.kind == "mbarrier" and k not in free]
    kept = {(min(i, k), max(i, k)) for i in mbarriers for k in range(n) if k != i}
    floor = live | unordered if sync == "existing" else live
    clique = weight_clique(n, sizes, floor)
    return _Frame(req, paths, needs, live, kept, unordered, clique, sum(sizes[k] for k in clique))


def plan_partitioned_paths(g: Ground) -> Outcome:
    """The outcome of a partitioned request with loops or branches."""
    req, origin = g.req, g.origin
    _check_work(req)
    completed = added_waits(req) if req.has_async else None
    added_wait = completed.waits if completed is not None else []
    if added_wait:
        # Planned on the kernel with its added waits, each at every run of its point.
        g = g.on(req.model_copy(update={"syncs": [*req.syncs, *added_wait]}))
        req = g.req
    try:
        frame = _frame(req, g)
    except ValidationError as e:
        raise _unwaited_on_a_path(e) from None
    waited = waits_in_words(req, completed, origin) if completed is not None else {}
    made = _place(g, frame)
    shared = on_common_bytes(g.sizes, made.placed.plan_offsets)
    listed = _listed_invals(req, made.invals, shared)
    notes = [*g.notes, *_notes(made.frame, shared, made.added, (listed, waited), origin)]
    waits = [
        Wait(kind=w.group, at=w.at, origin=origin, partition=w.partition)
        for w in added_wait
        if w.group is not None
    ]
    return _outcome(g, made, (listed, notes, waits))


@dataclass
class _Placed:
    """A placement, the frame it was made on, the pairs it keeps apart, the new syncs it
    relies on and the mbarrier invals it adds."""

    frame: _Frame
    placed: Solution
    hard: set[Pair]
    added: PathSyncs
    invals: dict[int, tuple[int, int]]


def _place(g: Ground, frame: _Frame) -> _Placed:
    """The placement on the request's syncs alone under "existing"; else the chosen plan on
    new syncs (with the invals where they serve)."""
    if frame.needs is None:
        hard = frame.live | frame.kept | frame.unordered
        placed = place(g, hard, frame.bound)
        return _Placed(frame, placed, hard, PathSyncs(), {})
    frame, chosen, invals = _with_invals(g, frame, _choose(g, frame))
    added = _fewer_fences(frame.req, chosen.keys, _added(frame, chosen))
    return _Placed(frame, chosen.placed, chosen.hard, added, invals)


def _outcome(
    g: Ground,
    made: _Placed,
    extras: tuple[dict[int, tuple[int, int]], list[Diagnostic], list[Wait]],
) -> Outcome:
    """The outcome of ``made``, with its listed invals, its notes and the added waits."""
    listed, notes, waits = extras
    req, origin = g.req, g.origin
    placed, frame, added = made.placed, made.frame, made.added
    n = len(req.buffers)
    names = [p.id for p in req.partitions]
    return Outcome(
        **solved(placed),
        sizes=g.sizes,
        lower_bound=frame.bound,
        barriers=partition_barriers(g, added.blocks),
        graph=pair_stats(n, len(frame.live), sorted(made.hard)),
        certify=pair_certifier(req, Witness(frame.clique, frame.bound), placed.bound),
        explain=lambda _status: notes,
        invals=[
            Inval(mbarrier=req.buffers[k].id, at=at, origin=origin, partition=names[q])
            for k, (q, at) in sorted(listed.items())
        ],
        fences=[Fence(at=at, origin=origin, partition=names[q]) for q, at in added.fences],
        waits=waits,
        named_barriers=named_barriers(req, added.named, origin),
    )


def _unwaited_on_a_path(e: ValidationError) -> RequestError:
    """``uncovered_async_access``: an asynchronous access that the waits (the request's and
    those added at original points) leave uncovered on some path."""
    first = e.errors()[0]
    return RequestError.field(
        ("syncs",),
        "a wait_group at an original point completes an asynchronous access on one path but "
        f"not on another: {first['msg']}; give the wait that covers it",
        "uncovered_async_access",
        None,
    )


def _listed_invals(
    req: PlanRequest, invals: dict[int, tuple[int, int]], shared: set[Pair]
) -> dict[int, tuple[int, int]]:
    """The added invals of the mbarriers whose bytes a later buffer takes."""
    spans = [grown_lifetime(req, b.start, b.end) for b in req.buffers]
    return {
        k: v
        for k, v in invals.items()
        if any(
            (min(j, k), max(j, k)) in shared and spans[j][0] >= spans[k][1]
            for j in range(len(req.buffers))
            if j != k
        )
    }


def _with_invals(
    g: Ground, frame: _Frame, chosen: _Variant
) -> tuple[_Frame, _Variant, dict[int, tuple[int, int]]]:
    """The plan with the mbarriers' invals added (``inval_candidates``) where it needs fewer
    bytes than ``chosen`` and the request with its syncs orders what it lets share; else
    ``chosen`` on ``frame``."""
    candidates = inval_candidates(frame.req, frame.paths)
    if not candidates:
        return frame, chosen, {}
    other = _frame(with_invals(frame.req, candidates), g, frozenset(candidates))
    try:
        alt = _choose(g, other)
    except RequestError:
        return frame, chosen, {}
    smaller = alt.placed.plan_arena < chosen.placed.plan_arena
    if smaller and _holds(other.req, alt.keys, _added(other, alt, named_ok=False)):
        return other, alt, candidates
    return frame, chosen, {}


def _choose(g: Ground, frame: _Frame) -> _Variant:
    """The plan on new block barriers alone, or the one on new barriers with proxy fences
    where it needs fewer bytes (or where only the fences order a buffer's own instances)."""
    needs = frame.needs
    assert needs is not None
    plain = _variant(g, frame, needs, with_fences=False)
    if not needs.fences:
        if isinstance(plain, RequestError):
            raise plain
        return plain
    fenced = _variant(g, frame, needs, with_fences=True)
    if isinstance(fenced, RequestError):
        raise plain if isinstance(plain, RequestError) else fenced
    better = isinstance(plain, RequestError) or fenced.placed.plan_arena < plain.placed.plan_arena
    if better and _holds(frame.req, fenced.keys, _added(frame, fenced, named_ok=False)):
        return fenced
    if isinstance(plain, RequestError):
        raise plain
    return plain


def _variant(g: Ground, frame: _Frame, needs: Needs, with_fences: bool) -> _Variant | RequestError:
    """The placement with the pairs new syncs serve free (with the fences they need where
    ``with_fences``), and the barrier points for the pairs then on common bytes."""
    req, unordered, bound = frame.req, frame.unordered, frame.bound
    hard_base = frame.live | frame.kept
    sizes = g.sizes
    cap = req.options.max_new_barriers
    table = {**needs.plain} if not with_fences else {**needs.fences, **needs.fenced}
    own_keys = sorted(k for k in table if isinstance(k, int))
    own: list[frozenset[int]] = []
    for k in own_keys:
        if not needs.served(k, with_fences):
            return _own_unserved(req, k, with_fences)
        own.append(needs.points(k, with_fences))
    servable = sorted(p for p in table if isinstance(p, tuple) and needs.served(p, with_fences))
    mandatory = stab(own, req.executions_at)
    if g.sync == "insert" and cap is not None and len(mandatory) > cap:
        return RequestError.field(
            ("options", "max_new_barriers"),
            f"the buffers in loops need {len(mandatory)} new barriers (points "
            f"{mandatory}) to order their own instances; the cap is {cap}",
            "too_few_barriers",
            cap,
        )
    hard = hard_base | (unordered - set(servable))
    placed = place(g, hard, bound)
    chosen = mandatory
    if servable:
        shared = on_common_bytes(sizes, placed.plan_offsets)
        chosen = stab(
            [*own, *(needs.points(p, with_fences) for p in servable if p in shared)],
            req.executions_at,
        )
        over_cap = g.sync == "insert" and cap is not None and len(chosen) > cap
        if len(chosen) > len(mandatory):
            # The plan on the barriers its own instances need only: taken when it needs no
            # more bytes, or past the cap.
            served = set(mandatory)
            apart = hard | {
                p
                for p in servable
                if needs.points(p, with_fences) and not needs.points(p, with_fences) & served
            }
            alt = place(g, apart, bound, exact=False)
            if over_cap or alt.plan_arena <= placed.plan_arena:
                placed, chosen = alt, mandatory
    shared = on_common_bytes(sizes, placed.plan_offsets)
    keys: list[Key] = [*own_keys, *(p for p in servable if p in shared)]
    fewer = unused_dropped(req, needs, keys, chosen, with_fences)
    if fewer != chosen:
        # The choice, unproved, kept points no key needs: dropped when the kernel without
        # them, read over again on every path, still orders every key.
        blocks = name_points(req, needs, keys, fewer, with_fences, named_ok=False)
        if _holds(req, keys, blocks):
            chosen = fewer
    return _Variant(placed, chosen, keys, with_fences, hard)


def _added(frame: _Frame, v: _Variant, named_ok: bool = True) -> PathSyncs:
    """The new syncs of variant ``v``: its barrier points, named where that suffices (and
    ``named_ok``) and the kernel with them still orders every key, and the fences its keys
    need."""
    assert frame.needs is not None
    added = name_points(frame.req, frame.needs, v.keys, v.chosen, v.with_fences, named_ok)
    if added.named and not _holds(frame.req, v.keys, added):
        added = name_points(frame.req, frame.needs, v.keys, v.chosen, v.with_fences, False)
    return added


def _fewer_fences(req: PlanRequest, keys: list[Key], added: PathSyncs) -> PathSyncs:
    """``added`` without the new fences the kernel does not need: each, earliest first, is
    left out when the kernel with the rest still orders every key on every path (a barrier
    added for another key stands after a fence of the writer's, the request's or a new one)."""
    fences = list(added.fences)
    for fence in sorted(added.fences, key=lambda f: (f[1], f[0])):
        trial = [f for f in fences if f != fence]
        if _holds(req, keys, replace(added, fences=trial)):
            fences = trial
    return added if len(fences) == len(added.fences) else replace(added, fences=fences)


def _holds(req: PlanRequest, keys: list[Key], added: PathSyncs) -> bool:
    """Whether the kernel with the new syncs ``added`` orders every buffer's own instances
    and every pair of ``keys`` on every path (the pair verdicts over again)."""
    try:
        kernel = kernel_with(req, added)
        live, unordered = fold(kernel, partition_paths(kernel))
    except (RequestError, ValueError):
        return False
    return not {k for k in keys if isinstance(k, tuple)} & (live | unordered)


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


def fold(
    req: PlanRequest, paths: list[Path], needs: Needs | None = None
) -> tuple[set[Pair], set[Pair]]:
    """The buffer pairs (i < j) live together on some path, and those some instance pair of
    which no sync of the request orders on some path. Without ``needs`` (sync "existing")
    a buffer whose own instances are unordered is ``unprotected_reuse``; with it, what new
    barriers would order each unordered pair is gathered there."""
    live: set[Pair] = set()
    unordered: set[Pair] = set()
    for path in paths:
        owner = path.buffer
        if not owner:
            continue  # a path that skips every buffer
        for v in pair_orders(path.request, allow_new=needs is not None):
            i, j = owner[v.i], owner[v.j]
            ordered = not v.overlap and v.ordered is not None and not v.fences
            if i == j:
                if ordered:
                    continue
                if needs is None:
                    raise _own_race(req, path, v.i, v.j)
                needs.add(path, v, i)
                continue
            pair = (min(i, j), max(i, j))
            if v.overlap:
                live.add(pair)
            elif not ordered:
                unordered.add(pair)
                if needs is not None:
                    needs.add(path, v, pair)
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


def _own_unserved(req: PlanRequest, k: int, with_fences: bool) -> RequestError:
    why = "no allowed point runs in between" if with_fences else "a proxy fence would be needed"
    return RequestError.field(
        ("buffers", k),
        f"buffer {req.buffers[k].id!r} reuses its own bytes from one iteration to the next "
        "and neither the request's syncs nor new syncs at allowed points order its "
        f"accesses in one iteration before those of the next on every path ({why}): add "
        "the sync that frees it",
        "unprotected_reuse",
        req.buffers[k].id,
    )


def _notes(
    frame: _Frame,
    shared: set[Pair],
    added: PathSyncs,
    done: tuple[dict[int, tuple[int, int]], dict[int, str]],
    origin: str,
) -> list[Diagnostic]:
    """One note per pair of buffers on common bytes and what orders them (after the inval
    or the added waits that finish the earlier one, ``done``), then one on the order the
    plan was made on and its lower bound."""
    invals, waited = done
    req, needs = frame.req, frame.needs
    ids = [b.id for b in req.buffers]
    names = [p.id for p in req.partitions]
    named = {at: ident for at, ident, _ in added.named}
    bufs = req.buffers
    out: list[Diagnostic] = []
    for i, j in sorted(shared):
        x, y = (i, j) if (bufs[i].start, i) <= (bufs[j].start, j) else (j, i)
        how = "the request's syncs"
        at = added.at.get((i, j))
        if at is not None and at in named:
            how = f"a named barrier (id {named[at]}) at point {at} ({origin})"
        elif at is not None:
            how = f"a block barrier at point {at} ({origin})"
        if needs is not None and added.fences and needs.fences.get((i, j)):
            own = set(needs.fences[i, j])
            how += "".join(
                f", with a proxy fence by {names[q]} at point {p} ({origin})"
                for q, p in sorted(own & set(added.fences))
            )
            if not own <= set(added.fences):
                how += ", with the fences already in the kernel"
        if x in invals:
            q, p = invals[x]
            how = f"the mbarrier_inval by {names[q]} at point {p} ({origin}), then {how}"
        if x in waited:
            how = f"{waited[x]}, then {how}"
        out.append(
            Diagnostic(
                level="info",
                code="reuse_across_partitions",
                message=(
                    f"{ids[y]} reuses bytes of {ids[x]}, ordered by {how} on every one of "
                    f"the {len(frame.paths)} paths of its loops and branches"
                ),
            )
        )
    out.append(
        Diagnostic(
            level="info",
            code="partitioned_program",
            message=f"planned on the happens-before order of {len(req.partitions)} partitions "
            f"on each of {len(frame.paths)} paths (every loop run 0 to 3 times as it admits, "
            f"every arm); lower bound: the heaviest clique of kept-apart buffers "
            f"({', '.join(ids[k] for k in frame.clique)})",
        )
    )
    return out
