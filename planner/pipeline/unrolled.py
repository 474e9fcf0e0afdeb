"""Plans for requests with loops, branches or several live ranges, on their unrolled program
(``planner.pipeline.program``).

The conflict graph is explicit: buffers whose pieces are live at one virtual point, and,
where no barrier can be relied on, buffers whose pieces follow each other. The greedy fits
(``solvers.edges``) place it, CP-SAT on the pairs closes a gap on small requests, and the
barriers come last, chosen greedily: for each reuse by its latest allowed point, among the
points its window allows the one run fewest times (a point outside a loop before one inside
it), every copy of a chosen point protecting what it covers. The objective under "insert" is
the arena first, then the barrier executions.

What this route does not do: the alias chains of the straight-line portfolio (a pair that
aliases only at one offset is left free and checked at the placement), the skyline
heuristics, the interval-model exact methods (they plan straight-line lifetimes; a request
naming one gets the fits and CP-SAT on the pairs, with a diagnostic).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from planner.core.asyncs import (
    FenceWindows,
    Invals,
    added_waits,
    chosen_fences,
    fence_conflicts,
    inval_points,
    lowered,
    mbarrier_conflicts,
)
from planner.core.barriers import BarrierChoice
from planner.core.budget import SECONDS_PER_HAZARD
from planner.core.errors import RequestError
from planner.core.models import (
    Diagnostic,
    Fence,
    Inval,
    PlanRequest,
    Wait,
)
from planner.pipeline.context import CAP_SETS_MAX
from planner.pipeline.ground import Ground, build_ground
from planner.pipeline.outcome import Outcome
from planner.pipeline.outcome_parts import (
    Witness,
    block_barriers,
    pair_certifier,
    pair_stats,
    solved,
)
from planner.pipeline.placement import Placement, pair_graph, place
from planner.pipeline.program import Program, build_program, held_peak
from planner.pipeline.unrolled_aliases import PieceAliases
from planner.pipeline.unrolled_stab import SEARCH_NODES, choose, greedy
from planner.solvers import registry
from planner.solvers.edges import ExplicitGraph

__all__ = ["barrier_events", "own_reuse_barriers", "plan_unrolled"]

I64 = npt.NDArray[np.int64]
FEWER_BARRIER_FITS = ["size/best-fit", "length/best-fit"]  # the plan on fewer barriers, uncapped


Mask = npt.NDArray[np.bool_]


def barrier_events(req: PlanRequest) -> list[int]:
    """Points where a barrier can make a difference: range bounds, accesses and the points
    right after them (a barrier there runs in the loops and arms of the access, where a later
    bound may open a loop), loop and arm bounds, the request's barriers."""
    points: set[int] = set(req.barriers)
    for b in req.buffers:
        for s, e in b.lifetimes:
            points.update((s, e))
        for a in b.accesses:
            points.update((a.at, a.at + 1))
    for lp in req.loops:
        points.update((lp.start, lp.end))
    for br in req.branches:
        for s, e in br.arms:
            points.update((s, e))
    return sorted(points)


def _own_reuses(prog: Program, al: PieceAliases) -> Mask:
    """Per hazard: a buffer reusing its own bytes where rule (b) does not let it go."""
    h = prog.hazards
    own: Mask = h.a == h.b
    if al.active:
        own &= ~al.same_offset()
    return own


def _mandatory(
    prog: Program, own_reuse: Mask, allowed: list[int], existing: list[int]
) -> list[int]:
    """New barriers the buffers' own reuses need whatever the placement: fewest, then
    cheapest (greedy: the plan's barriers are chosen again, exactly, for its placement)."""
    return sorted(set(greedy(prog, own_reuse, allowed, existing)) - set(existing))


def own_reuse_barriers(req: PlanRequest) -> list[int]:
    """The new barriers that ``plan_unrolled`` under sync "insert" inserts for the buffers'
    reuses of their own bytes whatever the placement (at the allowed points)."""
    g = build_ground(req, registry.lookup(req.options.solver), 1.0, "program")  # places nothing
    prog = build_program(req)
    allowed = g.allowed(barrier_events(req), g.existing)
    own = _own_reuses(prog, PieceAliases(req, prog, g.sizes))
    return _mandatory(prog, own, allowed, g.existing)


def _unprotected(
    prog: Program, points: list[int], aliases: PieceAliases
) -> tuple[set[tuple[int, int]], list[int]]:
    """Buffer pairs that may not share bytes since no barrier at ``points`` protects a reuse
    between them and rule (b) does not hold for it at one offset, and the unprotected reuses
    of a buffer's own bytes that rule (b) does not let go (hazard indices). Pairs whose open
    reuses all alias at one offset are left free: the placement is checked afterwards
    (``_place``)."""
    h = prog.hazards
    open_ = ~prog.protected(points)
    if aliases.active:
        open_ &= ~aliases.same_offset()
    own = np.flatnonzero(open_ & (h.a == h.b)).tolist()
    return _pairs_of(prog, open_ & (h.a != h.b)), own


def _pairs_of(prog: Program, mask: Mask) -> set[tuple[int, int]]:
    """The buffer pairs (i < j) of the hazards in ``mask``."""
    h = prog.hazards
    lo, hi = np.minimum(h.a, h.b)[mask], np.maximum(h.a, h.b)[mask]
    return set(zip(lo.tolist(), hi.tolist(), strict=True))


def _sharing(prog: Program, offsets: I64, sizes: list[int]) -> Mask:
    """Per hazard: whether its pieces share a byte under the placement (a buffer's pieces
    always do)."""
    h = prog.hazards
    size = np.asarray(sizes, dtype=np.int64)
    lo, hi = offsets, offsets + size
    shared: Mask = ((lo[h.a] < hi[h.b]) & (lo[h.b] < hi[h.a])) | (h.a == h.b)
    return shared


def _own_race(
    req: PlanRequest, prog: Program, k: int, where: tuple[str, ...] | None
) -> RequestError:
    """A buffer reuses its own bytes with no allowed barrier between (``where``: the field
    that allows barriers; None: the buffer itself)."""
    h = prog.hazards
    x, y = prog.pieces[int(h.earlier[k])], prog.pieces[int(h.later[k])]
    b = req.buffers[x.buffer]
    how = "its next live range" if x.point != y.point else "the next iteration of its loop"
    return RequestError.field(
        where or ("buffers", x.buffer),
        f"buffer {b.id!r} reuses its own bytes in {how} (from point {x.point} to point "
        f"{y.point}) and no allowed barrier point lies between its last access and the next "
        "first access on every path (a barrier inside an arm runs on that arm's path only); "
        "add a barrier there, or plan with sync 'insert' or 'none'",
        "unprotected_reuse",
        b.id,
    )


def plan_unrolled(g: Ground, kept_apart: frozenset[tuple[int, int]] = frozenset()) -> Outcome:
    """The outcome of a request with loops, branches or ranges (``req.has_control_flow``);
    one with asynchronous accesses is planned on its lowered form
    (``planner.core.asyncs``), whose fence conflicts are kept apart besides, with the waits
    that complete what the request's syncs leave open (listed as the plan's ``waits``).
    ``kept_apart``: more buffer pairs ``(i, j)``, ``i < j``, that may not share bytes (a
    cluster rule's)."""
    req = g.req
    if not req.has_async:
        return _plan_unrolled(g, set(kept_apart))
    invals = inval_points(req)
    windows: FenceWindows | None = {} if req.options.sync in ("insert", "none") else None
    apart = fence_conflicts(req, windows) | mbarrier_conflicts(req, invals) | kept_apart
    completed = added_waits(req)
    done = _plan_unrolled(g.on(lowered(req, invals, completed)), apart)
    origin: Literal["inserted", "required"] = (
        "inserted" if req.options.sync == "insert" else "required"
    )
    spans = [(int(o), int(o) + s) for o, s in zip(done.offsets.tolist(), done.sizes, strict=True)]
    fences = [
        Fence(at=p, origin=origin)
        for p in chosen_fences(windows or {}, _sharing_pairs(spans), req.executions_at)
    ]
    waits = [
        Wait(kind=w.group, at=w.at, origin=origin) for w in completed.waits if w.group is not None
    ]
    return replace(done, invals=_invals(req, spans, invals), fences=fences, waits=waits)


def _sharing_pairs(spans: list[tuple[int, int]]) -> set[tuple[int, int]]:
    """Buffer pairs ``(i, j)``, ``i < j``, placed on common bytes (``spans``: per buffer)."""
    n = len(spans)
    return {
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1]
    }


def _invals(req: PlanRequest, spans: list[tuple[int, int]], invals: Invals) -> list[Inval]:
    """The invals of the mbarriers whose bytes a later buffer takes (``spans``: per buffer)."""
    out: list[Inval] = []
    for i, (at, origin) in sorted(invals.items()):
        m = req.buffers[i]
        lo, hi = spans[i]
        if any(
            b.start >= m.end and spans[k][0] < hi and lo < spans[k][1]
            for k, b in enumerate(req.buffers)
            if k != i
        ):
            out.append(Inval(mbarrier=m.id, at=at, origin=origin))
    return out


@dataclass(frozen=True)
class _Setup:
    """What every placement of one unrolled program shares: the request's ground, its
    program, the pairs kept apart whatever the barriers, the rule (b) aliases and the points
    where a barrier can make a difference."""

    g: Ground
    prog: Program
    live: set[tuple[int, int]]  # pairs kept apart whatever the barriers
    al: PieceAliases
    events: list[int]  # points where a barrier can make a difference


def _plan_unrolled(g: Ground, apart: set[tuple[int, int]]) -> Outcome:
    req, sizes = g.req, g.sizes
    prog = build_program(req)
    needed = SECONDS_PER_HAZARD * prog.hazards.n
    if needed > req.options.time_limit:
        # Refused at once rather than planned past the limit (the straight-line rule).
        raise RequestError.field(
            ("options", "time_limit"),
            f"the unrolled program has {prog.hazards.n} ordered pairs of buffer pieces to "
            f"check, about {needed:.3g} s of work; the time limit is "
            f"{req.options.time_limit:g} s",
            "time_limit_too_small",
            req.options.time_limit,
        )
    s = _Setup(
        g=g,
        prog=prog,
        live=prog.live_pairs | apart,
        al=PieceAliases(req, prog, sizes),
        events=barrier_events(req),
    )
    bytes_ = (
        prog.peak
        if sizes == [b.size for b in req.buffers]
        else held_peak(prog.pieces, [(p.start, p.end) for p in prog.pieces], sizes)[0]
    )
    peak: Bound = (bytes_, prog.peak_point, prog.peak_buffers)
    if g.sync == "none":
        chosen = _under_none(s, peak[0])
    elif g.sync == "existing":
        chosen, peak = _under_existing(s, peak)
    else:
        chosen, peak = _under_insert(s, peak)
    return _assemble(s, chosen, peak)


def _under_none(s: _Setup, bound: int) -> Placement:
    """Sync "none": the caller synchronizes; the request's barriers count, the rest are
    listed as required."""
    prog, existing = s.prog, s.g.existing
    never, own = _unprotected(prog, s.events, s.al)
    if own:
        raise _own_race(s.g.req, prog, own[0], None)
    placed = _place(s, s.live | never, bound, s.events)
    shared = _needs_barrier(prog, s.al, placed.offsets, s.g.sizes)
    new = choose(prog, shared, sorted(set(s.events) - set(existing)), existing)
    required = choose(prog, shared, sorted({*existing, *new.points}), [])
    runtime = sorted({*existing, *required.points})
    return replace(
        placed,
        barriers=BarrierChoice(placed.barriers.inserted, required.points, []),
        aliases=_aliased(prog, s.al, placed.offsets, s.g.sizes, runtime),
        unproved=tuple(c for c in (new, required) if not c.proved),
    )


def _under_existing(s: _Setup, peak: Bound) -> tuple[Placement, Bound]:
    """Sync "existing": no barrier can be added; each piece holds its bytes until the next
    barrier, which may raise the bound."""
    pairs, own = _unprotected(s.prog, s.g.existing, s.al)
    if own:
        raise _own_race(s.g.req, s.prog, own[0], ("barriers",))
    held = s.prog.barrier_peak(s.g.sizes, s.g.existing)
    if held[0] > peak[0]:
        peak = held
    return _finish(s, s.live | pairs, peak[0], [], []), peak


def _under_insert(s: _Setup, peak: Bound) -> tuple[Placement, Bound]:
    """Sync "insert": the plan on every allowed point, or on fewer new barriers where that
    costs no bytes (or the cap on new barriers demands it)."""
    req, prog, al, existing = s.g.req, s.prog, s.al, s.g.existing
    opts = req.options
    allowed = s.g.allowed(s.events, existing)
    # Reuses no allowed point protects (candidates; or a later buffer whose first point
    # opens an arm it covers whole, so the barrier before it would be in that arm only).
    never, own = _unprotected(prog, [*existing, *allowed], al)
    if own:
        where = None if opts.barrier_candidates is None else ("options", "barrier_candidates")
        raise _own_race(req, prog, own[0], where)
    own_reuse = _own_reuses(prog, al)
    mandatory = _mandatory(prog, own_reuse, allowed, existing)
    cap = opts.max_new_barriers
    if cap is not None and len(mandatory) > cap:
        raise RequestError.field(
            ("options", "max_new_barriers"),
            f"the program needs at least {len(mandatory)} new barriers for buffers that "
            f"reuse their own bytes (at points {mandatory}); max_new_barriers is {cap}",
            "too_few_barriers",
            cap,
        )
    least: tuple[Bound, tuple[int, ...]] | None = None
    if cap is not None and not al.active:
        least = _capped_peak(prog, s.g.sizes, existing, allowed, own_reuse, cap)
        if least is not None and least[0][0] > peak[0]:
            peak = least[0]
    bound = peak[0]
    full = _finish(s, s.live | never, bound, allowed, [])
    if set(full.barriers.inserted) <= set(mandatory):
        return full, peak
    chosen = full
    # The plan on the existing and the mandatory barriers, the fewest new ones: chosen at
    # the full plan's arena, and the fallback under the cap. Its barriers are chosen only
    # when it is: usually it needs more bytes (quickly seen with two fits).
    fewer, _ = _unprotected(prog, [*existing, *mandatory], al)
    capped = cap is not None and len(full.barriers.inserted) > cap
    quick = s.g.heuristics if s.g.heuristics is not None or capped else FEWER_BARRIER_FITS
    reach = [*existing, *mandatory]
    placed = _place(s, s.live | fewer, full.arena, reach, fits=quick, exact=False)
    if capped or placed.arena <= full.arena:
        fewest = _synchronised(s, placed, allowed, mandatory)
        if capped or _cost(req, fewest) < _cost(req, full):
            chosen = fewest
    if capped and least is not None and set(least[1]) - set(mandatory):
        # The set of new points that holds the fewest bytes, as the plan's barriers.
        kept = list(least[1])
        fewer, _ = _unprotected(prog, [*existing, *kept], al)
        placed = _place(s, s.live | fewer, bound, [*existing, *kept], fits=quick, exact=False)
        alt = _synchronised(s, placed, allowed, kept)
        if (alt.arena, *_cost(req, alt)) < (chosen.arena, *_cost(req, chosen)):
            chosen = alt
    return chosen, peak


Bound = tuple[int, int, list[int]]  # bytes, the point where they are held, the buffers there


def _capped_peak(
    prog: Program,
    sizes: list[int],
    existing: list[int],
    allowed: list[int],
    own_reuse: npt.NDArray[np.bool_],
    cap: int,
) -> tuple[Bound, tuple[int, ...]] | None:
    """The least ``barrier_peak`` over the request's barriers plus ``cap`` of the allowed
    points that protect every buffer's reuse of its own bytes, and the first set of points
    that gives it; None when there are more than ``CAP_SETS_MAX`` sets to try. Every plan
    under the cap has its new barriers within one such set, and more barriers only hold
    fewer bytes, so this bounds every plan."""
    k = min(cap, len(allowed))
    if math.comb(len(allowed), k) > CAP_SETS_MAX:
        return None
    best: tuple[Bound, tuple[int, ...]] | None = None
    for chosen in itertools.combinations(allowed, k):
        points = [*existing, *chosen]
        if (own_reuse & ~prog.protected(points)).any():
            continue  # a buffer's own reuse left open: no plan has these barriers only
        found = prog.barrier_peak(sizes, points)
        if best is None or found[0] < best[0][0]:
            best = found, chosen
    return best


def _cost(req: PlanRequest, p: Placement) -> tuple[int, int]:
    return sum(req.executions_at(x) for x in p.barriers.inserted), len(p.barriers.inserted)


def _finish(
    s: _Setup, edges: set[tuple[int, int]], bound: int, allowed: list[int], kept: list[int]
) -> Placement:
    """Place on ``edges``, then choose the new barriers (``kept``, and more from
    ``allowed``) and the ones the placement relies on. ``bound``: an arena nothing below is
    needed (greedy stops there; CP-SAT, where it may run, closes the gap to it)."""
    reach = sorted({*s.g.existing, *allowed, *kept})
    placed = _place(s, edges, bound, reach)
    return _synchronised(s, placed, allowed, kept)


def _synchronised(s: _Setup, placed: Placement, allowed: list[int], kept: list[int]) -> Placement:
    """The placement with its new barriers (``kept``, and more from ``allowed``), the
    barriers it relies on and the reuses rule (b) lets go without one."""
    prog, sizes, existing, al = s.prog, s.g.sizes, s.g.existing, s.al
    shared = _needs_barrier(prog, al, placed.offsets, sizes)
    # The cheapest points for this placement, ``kept`` or not; past the cap on new points,
    # ``kept`` and the fewest more.
    new = choose(prog, shared, allowed, existing)
    inserted = new.points
    cap = prog.req.options.max_new_barriers
    if kept and cap is not None and len(inserted) > cap:
        more = choose(prog, shared, allowed, [*existing, *kept])
        inserted = sorted(set(kept) | set(more.points))
        new = replace(more, proved=False)
    runtime = sorted(set(existing) | set(inserted))
    # The ones it relies on, of those that run (all of them run: the greedy suffices).
    required = sorted(set(greedy(prog, shared, runtime, [])))
    aliases = _aliased(prog, al, placed.offsets, sizes, runtime)
    unproved = () if new.proved else (new,)
    return replace(
        placed,
        barriers=BarrierChoice(inserted, required, []),
        aliases=aliases,
        unproved=unproved,
    )


def _needs_barrier(prog: Program, al: PieceAliases, offsets: I64, sizes: list[int]) -> Mask:
    """Per hazard: its pieces share a byte under the placement and rule (b) does not hold."""
    shared = _sharing(prog, offsets, sizes)
    if al.active:
        shared &= ~al.holds(shared, offsets)
    return shared


def _aliased(
    prog: Program, al: PieceAliases, offsets: I64, sizes: list[int], runtime: list[int]
) -> tuple[tuple[int, int], ...]:
    """Pairs of distinct buffers (earlier, later) with a reuse that shares bytes, that no
    barrier at ``runtime`` protects and that rule (b) lets go: the plan's ``aliases``."""
    if not al.active:
        return ()
    h = prog.hazards
    shared = _sharing(prog, offsets, sizes) & (h.a != h.b) & ~prog.protected(runtime)
    held = al.holds(shared, offsets) & shared
    return tuple(sorted(set(zip(h.a[held].tolist(), h.b[held].tolist(), strict=True))))


def _graph(s: _Setup, edges: set[tuple[int, int]]) -> ExplicitGraph:
    """The request's buffers with the conflict pairs ``edges``, each from its first piece's
    start for the length of its pieces together."""
    prog = s.prog
    first = [min((prog.pieces[k].start for k in ks), default=0) for ks in prog.by_buffer]
    length = [sum(prog.pieces[k].end - prog.pieces[k].start for k in ks) for ks in prog.by_buffer]
    return pair_graph(s.g, edges, (first, length))


def _place(
    s: _Setup,
    edges: set[tuple[int, int]],
    bound: int,
    points: list[int],
    *,
    fits: list[str] | None = None,
    exact: bool = True,
) -> Placement:
    """Place on ``edges`` (``placement.place``: ``fits``, None the ground's, then CP-SAT on
    the pairs where ``exact`` and the ground allow). Pairs left free only since rule (b)
    holds at one offset are checked at the placement (``points``: the barrier points that
    may run): where their reuse shares bytes at another shift, breaks the rule and no
    barrier at those points can protect it, they become conflicts and the buffers are
    placed again."""
    prog, sizes, al = s.prog, s.g.sizes, s.al
    placed = _place_once(s, edges, bound, fits, exact)
    if not al.active:
        return placed
    h = prog.hazards
    open_ = ~prog.protected(points) & (h.a != h.b)
    for last in (False, True):
        shared = _sharing(prog, placed.offsets, sizes) & open_
        bad = _pairs_of(prog, shared & ~al.holds(shared, placed.offsets)) - edges
        if not bad:  # (pinned buffers stay where they are: the static check judges them)
            return placed
        # Once with the pairs that broke the rule apart; then every pair left free by the
        # rule, which needs no check. The fits only: CP-SAT had its share.
        edges = edges | (_pairs_of(prog, open_) if last else bad)
        placed = _place_once(s, edges, bound, fits, False)
    return placed


def _place_once(
    s: _Setup,
    edges: set[tuple[int, int]],
    bound: int,
    fits: list[str] | None,
    exact: bool,
) -> Placement:
    g = _graph(s, edges)
    placed = place(s.g, g, bound, fits=fits, exact=exact)
    return Placement(placed, BarrierChoice([], [], []), edges=g.pairs)


def _unproved_notes(req: PlanRequest, chosen: Placement) -> list[Diagnostic]:
    """A note per barrier choice not proved the cheapest for the placement."""
    return [
        Diagnostic(
            level="info",
            code="barriers_not_proven",
            message=f"barrier points {c.points} run "
            f"{sum(req.executions_at(p) for p in c.points)} times: the best of the greedy "
            f"stabbing and a search within its budget (at most {SEARCH_NODES} sets of points "
            f"and a share of the time limit); the fewest possible is at least {c.bound[0]}",
        )
        for c in chosen.unproved
    ]


def _assemble(s: _Setup, chosen: Placement, peak: Bound) -> Outcome:
    req, prog = s.g.req, s.prog
    bound = peak[0]
    barriers = block_barriers(s.g, chosen.barriers.inserted, chosen.barriers.required)
    notes = [
        *s.g.notes,
        *_unproved_notes(req, chosen),
        Diagnostic(
            level="info",
            code="unrolled_program",
            message=f"planned on the unrolled program: {len(prog.pieces)} pieces of "
            f"{len(req.buffers)} buffers, {len(req.loops)} loops, {len(req.branches)} branches; "
            f"{barriers.static} barrier points run {barriers.executions} times",
        ),
    ]
    result = chosen.result
    edges = chosen.edges
    assert edges is not None  # placed on the program's pairs
    return Outcome(
        **solved(result, chosen.offsets, chosen.arena),
        sizes=s.g.sizes,
        lower_bound=bound,
        barriers=barriers,
        graph=pair_stats(len(req.buffers), len(prog.live_pairs), edges),
        certify=pair_certifier(req, Witness(peak[2], bound, peak[1]), result.bound),
        explain=lambda _status: notes,
        footprints=s.g.footprints,
        aliases=list(chosen.aliases),
    )
