"""``plan(request) -> Plan``: graph, portfolio, barriers, assembly, and the static check.

How ``options.time_limit`` bounds a plan, and why the plan still does not depend on the
machine.

The clock starts when ``plan`` is called. Work that every plan needs (parsing, the graph,
one greedy heuristic, barriers, assembly and the static check) grows with the buffers
and is estimated as ``FIXED_SECONDS_PER_BUFFER`` per buffer; optional work gets the rest:

- which greedy heuristics run is decided from counts alone (buffers, conflicts, time
  slots) by ``solvers.greedy.affordable``: their estimated cost must fit
  ``GREEDY_SHARE`` of each attempt's share of the time left after the fixed work. The
  first heuristic always runs, or, when its estimate alone is over (or its neighbour
  lists would pass their memory limit), the cheapest, a sweep with no lists;
- the exact methods run only when building their instances is estimated to fit
  (``solvers.auto``), and stop by node budgets derived from their share;
- attempts other than the policy's (fewer barriers, exact barrier models) and each
  further heuristic are skipped once the deadline (the time limit less the fixed work,
  kept for barriers, assembly and the check) has passed by the clock.

So the same request runs the same work, and gets the same plan, on any machine on which
that work fits its time limit; only a machine slower than the estimates assume reaches
the clock checks, which then cut optional work to keep the limit. A time limit below the
fixed work's estimate cannot be kept at all: such a request is refused at once
(``time_limit_too_small``, naming the least limit that fits), never planned past its limit.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, replace
from importlib.util import find_spec
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core._jit import announce
from planner.core.access import budget_diagnostics
from planner.core.aliasing import (
    ALIAS_MAX_BUFFERS,
    Owners,
    alias_chains,
    merge_chains,
    sharing_pairs,
)
from planner.core.barriers import BarrierChoice, choose_barriers, hits, reuses, warm_reuses
from planner.core.csvio import load_request
from planner.core.errors import InternalError, RequestError
from planner.core.graph import (
    InterferenceGraph,
    LowerBound,
    access_bounds,
    build_graph,
    sync_barriers,
)
from planner.core.install import install_hint
from planner.core.io import parse_plan, parse_request, request_sha256
from planner.core.models import (
    DEFAULT_MAX_BUFFERS,
    Barriers,
    Certificate,
    Diagnostic,
    Footprint,
    GraphStats,
    Launch,
    ParetoPoint,
    Placement,
    Plan,
    PlanRequest,
    SolverAttempt,
    SolverInfo,
    Status,
    ValidationReport,
)
from planner.core.patterns import block_slice
from planner.core.targets import launch_figures
from planner.pipeline.budget import FIXED_SECONDS_PER_BUFFER
from planner.pipeline.lean import lean_points, warm_lean
from planner.pipeline.spill import plan_with_spill
from planner.pipeline.warm import ensure_warm
from planner.solvers.auto import (
    EXACT_METHODS,
    GREEDY_SHARE,
    SOLVERS,
    Solution,
    exact_method,
    solve,
)
from planner.solvers.bounds import hazard_bound
from planner.solvers.clock import deadline, expired, now
from planner.solvers.exact import granularity, round_up
from planner.solvers.greedy import HEURISTICS
from planner.validators import validate_plan

__all__ = ["plan", "validate"]

I64 = npt.NDArray[np.int64]
MAX_DIAGNOSTICS = 50
MAX_FORWARD_POINTS = 32  # new barriers the fewer-barrier search picks from
BARRIER_MODEL_MAX_BUFFERS = 64  # the exact barrier model has a disjunction per pair
LEAN_MAX_BUFFERS = 128  # greedy barrier points: candidates x buffers work per point chosen
PARETO_STEPS = 8  # intermediate plans per method on the Pareto front


def validate(
    request: PlanRequest | dict[str, Any] | str | bytes,
    plan: Plan | dict[str, Any] | str | bytes,
) -> ValidationReport:
    """The static check of DESIGN section 6: every violation of ``plan`` for ``request``.
    Raises ``InternalError`` when the process runs out of memory."""
    try:
        return validate_plan(parse_request(request), parse_plan(plan))
    except MemoryError as exc:
        raise InternalError(f"out of memory while validating: {exc or 'no detail'}") from exc


def plan(
    request: PlanRequest | dict[str, Any] | str | bytes | os.PathLike[str],
    *,
    max_buffers: int = DEFAULT_MAX_BUFFERS,
) -> Plan:
    """Plan a request (a model, a dict, JSON text, or the path of a JSON or MiniMalloc CSV
    file); the result has passed the static validator. Raises ``RequestError``, and
    ``InternalError`` when the process runs out of memory.

    ``options.time_limit`` bounds the whole call, parsing and the static check included
    (see the module docstring)."""
    began = now()
    if isinstance(request, os.PathLike):
        request = load_request(os.fspath(request), max_buffers=max_buffers)
    try:
        return _plan(request, max_buffers, began)
    except MemoryError as exc:
        raise InternalError(f"out of memory while planning: {exc or 'no detail'}") from exc


def _plan(
    request: PlanRequest | dict[str, Any] | str | bytes, max_buffers: int, began: float
) -> Plan:
    req = parse_request(request, max_buffers=max_buffers)
    limit = req.options.time_limit
    fixed = FIXED_SECONDS_PER_BUFFER * len(req.buffers)
    if fixed > limit:
        # The work every plan needs would outlast the limit: say so now, not after it.
        raise RequestError.field(
            ("options", "time_limit"),
            f"planning {len(req.buffers)} buffers takes at least about {fixed:.3g} s "
            f"({FIXED_SECONDS_PER_BUFFER * 1e6:g} us per buffer); the time limit is {limit:g} s",
            "time_limit_too_small",
            limit,
        )
    announce("core")
    heuristics = _heuristics(req.options.solver)
    # Compiled code loads once per process, off the request's clock: the warm-up requests
    # run every planning path once, since a kernel compiled on the clock would cut the first
    # plan of a process short of later ones. The clock has not started its deadline yet, so
    # the time spent here moves its start.
    loading = now()
    ensure_warm(plan, compiled_only=True)
    warm_lean()
    warm_reuses()
    began += now() - loading
    with deadline(max(0.0, limit - fixed), since=began):
        ctx = _context(req, heuristics, max(0.0, 1.0 - fixed / limit) if limit > 0 else 0.0)
        attempts = _attempts(ctx)
    chosen = _choose(req, attempts)
    best = chosen
    # Every attempt's bound holds for the whole request (within the cap): keep the best.
    bound = max(a.result.bound for a in attempts)
    if bound > best.result.bound:
        proved = best.result.proved_optimal or best.arena <= bound
        best = replace(best, result=replace(best.result, bound=bound, proved_optimal=proved))
    pareto: list[ParetoPoint] = []
    if req.options.pareto:
        # Under "existing" and "none" no barrier is inserted: the front is the one plan.
        front = _frontier(_allowed(req, attempts)) if req.options.sync == "insert" else [chosen]
        for a in front:
            point = _checked(req, _assemble(ctx, best if a is chosen else a, a is chosen))
            pareto.append(ParetoPoint(arena_bytes=a.arena, new_barriers=a.new_barriers, plan=point))
    result = _assemble(ctx, best, True)
    if pareto:
        result = result.model_copy(update={"pareto": pareto})
    if req.options.overflow == "spill" and result.status in ("infeasible", "unknown"):
        result = plan_with_spill(req, result, plan)
    return _checked(req, result)


def _checked(req: PlanRequest, result: Plan) -> Plan:
    report = validate_plan(req, result)
    if not report.valid:
        _raise_for(req, report)
    return result


@dataclass(frozen=True)
class _Context:
    """What every attempt of one request shares."""

    req: PlanRequest
    heuristics: list[str] | None
    sizes: list[int]  # bytes planned per buffer: declared, or the per-block footprint
    footprints: list[Footprint]
    existing: list[int]  # sorted
    owners: Owners | None  # None: no buffer can alias (no patterns, or too many buffers)
    reference: InterferenceGraph  # the policy's graph: every conflict it must respect
    first: I64  # per buffer: first access
    after: I64  # per buffer: last access + 1
    bound: LowerBound  # valid for every plan of the request, aliases included
    exact: bool  # the reference graph's conflicts are exactly the request's: proofs hold
    spare: float  # of each attempt's time share: what the fixed work leaves (0..1)


@dataclass(frozen=True)
class _Attempt:
    """One placement and the barriers and aliases that make it safe."""

    label: str  # which attempt: "policy", "existing", "aliases", "forward:k", "exact:k"
    result: Solution
    barriers: BarrierChoice
    aliases: list[tuple[int, int]]

    @property
    def arena(self) -> int:
        return self.result.arena_bytes

    @property
    def new_barriers(self) -> int:
        return len(self.barriers.inserted)


def _context(req: PlanRequest, heuristics: list[str] | None, spare: float) -> _Context:
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
    shrunk = frozenset(i for i, b in enumerate(req.buffers) if sizes[i] != b.size)
    existing = sorted(set(req.barriers))
    patterned = any(b.accesses for i, b in enumerate(req.buffers) if i not in shrunk)
    aliasing = patterned and len(req.buffers) <= ALIAS_MAX_BUFFERS and req.options.sync != "none"
    owners = Owners(req, existing, shrunk) if aliasing else None
    reference = build_graph(req, sizes=sizes)
    first, after = access_bounds(req)
    # The graph is exact unless aliases are possible, or a buffer's first access comes after
    # a barrier point inside its lifetime (the graph then keeps it from bytes that barrier
    # frees). Otherwise only the lifetimes themselves bound the arena.
    exact = owners is None and not _late_first_access(reference.start, first, sync_barriers(req))
    loose = reference if exact else reference.released(after, None, req.horizon)
    bound = loose.lower_bound
    if req.options.sync != "none":  # barriers and aliases decide what may share
        hazard = _hazard_bound(req, reference, first, after, owners, shrunk, bound.bytes)
        bound = hazard if hazard.bytes > bound.bytes else bound
    return _Context(
        req,
        heuristics,
        sizes,
        footprints,
        existing,
        owners,
        reference,
        first,
        after,
        bound,
        exact,
        spare,
    )


def _hazard_bound(
    req: PlanRequest,
    g: InterferenceGraph,
    first: I64,
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
    plain = hazard_bound(g, first, after, allowed, None)  # as if no buffer could alias
    if allowed is None or owners is None or plain.bytes <= floor:
        return plain  # exact, or no more than ``floor``, which the caller keeps
    cut = owners if allowed == owners.barriers else Owners(req, allowed, shrunk)
    return hazard_bound(g, first, after, allowed, cut)


def _late_first_access(start: I64, first: I64, points: list[int] | None) -> bool:
    """Whether a point that ends occupied intervals lies in ``(start, first access]`` of a
    buffer."""
    if not points:
        return False
    for s, f in zip(start.tolist(), first.tolist(), strict=True):
        k = bisect.bisect_right(points, s)
        if k < len(points) and points[k] <= f:
            return True
    return False


def _attempts(ctx: _Context) -> list[_Attempt]:
    """Placements to choose from: the policy's, and under "insert" fewer-barrier ones.

    Each gets a fixed share of the time limit, so the same request gets the same budgets.
    """
    req = ctx.req
    limit = req.options.time_limit
    policy = sync_barriers(req)
    if req.options.sync != "insert" or req.options.max_new_barriers == 0:
        if ctx.owners is None:
            return [_attempt(ctx, policy, limit, "policy")]
        found = [_attempt(ctx, policy, limit / 2, "policy")]
        if not expired():
            found.append(_attempt(ctx, policy, limit / 2, "aliases", merge=True))
        return found
    floor = _lean_floor(ctx)
    early: _Attempt | None = None
    if floor is not None and not expired():
        # Few barriers at the bound: when that plan exists nothing beats it, and the full
        # plan (a barrier after nearly every last access) is not worth computing.
        early = _lean(ctx, floor, limit / 16, enough=floor)
        if early.arena <= floor and not early.barriers.missed:
            at_bound = replace(early.result, bound=floor, proved_optimal=True)
            return [replace(early, result=at_bound)]
    full = _attempt(ctx, policy, limit * 3 / 8, "policy")
    found = [full]
    if ctx.owners is not None and not expired():
        found.append(_attempt(ctx, policy, limit / 16, "aliases", merge=True))
    if not full.new_barriers:
        return found
    # Without new barriers no plan is below that graph's bound: when it is above the full
    # plan, such a plan is only wanted as a fallback (a cap, or candidates that may not
    # protect every reuse) or on the Pareto front.
    opts = req.options
    wanted = opts.max_new_barriers is not None or opts.barrier_candidates is not None
    wanted = wanted or opts.pareto or bool(full.barriers.missed)
    # Optional work below is skipped once the deadline has passed (module docstring); the plan on
    # the existing barriers is kept when it is the fallback.
    if wanted or (not expired() and _bound_with(ctx, []) <= full.arena):
        found.append(_attempt(ctx, ctx.existing, limit / 8, "existing"))
    if ctx.owners is not None and not expired():
        found.append(_attempt(ctx, ctx.existing, limit / 16, "existing+aliases", merge=True))
    if full.new_barriers > 1 and len(req.buffers) <= LEAN_MAX_BUFFERS and not expired():
        # A plan of the full one's arena is all this attempt is for when that arena is
        # proved optimal: these lifetimes are no shorter, so no plan on them is smaller.
        capacity = req.effective_capacity
        fits = capacity is None or full.arena <= capacity
        enough = full.arena if full.result.proved_optimal and fits else None
        if early is not None and floor == full.arena == enough:
            found.append(early)  # the attempt made above: the same target and budget
        else:
            found.append(_lean(ctx, full.arena, limit / 16, enough))
    if not expired():
        found.extend(_fewer_barriers(ctx, full, limit / 8))
    # Nothing to gain when a plan without new barriers is already as small as the full one.
    settled = min((a.arena for a in found if not a.new_barriers), default=full.arena + 1) <= (
        full.arena
    )
    if _exact_applies(ctx) and not (settled and not req.options.pareto) and not expired():
        found.extend(_exact_barriers(ctx, full, limit * 3 / 16))
    return found


def _lean_floor(ctx: _Context) -> int | None:
    """The arena no plan of the request is below, when a lean plan is tried first: under
    "insert" with no cap, candidates, Pareto front or aliases, on an exact graph, within the
    capacity. None: plan as usual."""
    req = ctx.req
    opts = req.options
    if (
        opts.max_new_barriers is not None
        or opts.barrier_candidates is not None
        or opts.pareto
        or ctx.owners is not None
        or not ctx.exact
        or len(req.buffers) > LEAN_MAX_BUFFERS
    ):
        return None
    g = ctx.reference
    floor = round_up(g.aligned_bound.bytes, granularity(g))
    capacity = req.effective_capacity
    return floor if capacity is None or floor <= capacity else None


def _lean(ctx: _Context, target: int, budget: float, enough: int | None = None) -> _Attempt:
    """A plan on the existing barriers plus new ones chosen greedily to bring the peak of
    live bytes down to ``target`` (bytes): usually that arena with far fewer barriers than
    the full plan. ``enough``: an arena nothing below is any better (a true bound)."""
    req, g = ctx.req, ctx.reference
    points = lean_points(
        g.start,
        g.end,
        ctx.after,
        g.size,
        existing=ctx.existing,
        candidates=req.options.barrier_candidates,
        horizon=req.horizon,
        target=target,
    )
    return _attempt(ctx, points, budget, "lean", enough=enough)


def _allowed(req: PlanRequest, attempts: list[_Attempt]) -> list[_Attempt]:
    """The attempts within ``max_new_barriers`` whose reuses all have a barrier."""
    cap = req.options.max_new_barriers
    return [a for a in attempts if (cap is None or a.new_barriers <= cap) and not a.barriers.missed]


def _choose(req: PlanRequest, attempts: list[_Attempt]) -> _Attempt:
    """Smallest arena, then fewest new barriers, among the plans within the cap."""
    return min(_allowed(req, attempts) or attempts, key=lambda a: (a.arena, a.new_barriers))


def _frontier(attempts: list[_Attempt]) -> list[_Attempt]:
    """Non-dominated (arena, new barriers) attempts, fewest barriers first."""
    out: list[_Attempt] = []
    for a in sorted(attempts, key=lambda a: (a.new_barriers, a.arena)):
        if not out or a.arena < out[-1].arena:
            out.append(a)
    return out


def _fewer_barriers(ctx: _Context, full: _Attempt, budget: float) -> list[_Attempt]:
    """Plans on the existing barriers plus k of the full plan's new ones, chosen greedily by
    the lower bound they allow, for the k the cap or the Pareto front asks for."""
    req = ctx.req
    pool = full.barriers.inserted[:MAX_FORWARD_POINTS]
    cap = req.options.max_new_barriers
    top = min(full.new_barriers - 1, len(pool))  # more would be the full plan again
    wanted: set[int] = set()
    if req.options.pareto and top > 0:
        if top <= PARETO_STEPS:
            wanted = set(range(1, top + 1))
        else:
            wanted = {1 + (top - 1) * s // (PARETO_STEPS - 1) for s in range(PARETO_STEPS)}
    if cap is not None and 0 < cap <= top:
        wanted.add(cap)
    if not wanted:
        return []
    chosen: list[int] = []
    found: list[_Attempt] = []
    share = budget / len(wanted)
    for k in range(1, max(wanted) + 1):
        rest = [p for p in pool if p not in chosen]
        if not rest:
            break
        chosen.append(min(rest, key=lambda p: (_bound_with(ctx, [*chosen, p]), p)))
        if k in wanted:
            points = sorted(set(ctx.existing) | set(chosen))
            found.append(_attempt(ctx, points, share, f"forward:{k}"))
    return found


def _bound_with(ctx: _Context, extra: list[int]) -> int:
    points = sorted(set(ctx.existing) | set(extra))
    g = ctx.reference.released(ctx.after, points, ctx.req.horizon)
    return g.lower_bound.bytes


def _exact_applies(ctx: _Context) -> bool:
    """The barrier model runs on small requests when the solver asks for exact methods, or
    for the Pareto front. Under "auto" the greedy choices stand: the model saves barriers
    over them, never bytes, at 0.1-0.3 s a request (measured on 32 buffers)."""
    req = ctx.req
    asked = req.options.solver in ("exact", "cpsat") or (
        req.options.pareto and req.options.solver == "auto"
    )
    return (
        asked and len(req.buffers) <= BARRIER_MODEL_MAX_BUFFERS and find_spec("ortools") is not None
    )


def _exact_barriers(ctx: _Context, full: _Attempt, budget: float) -> list[_Attempt]:
    """The barrier model at the cap (or none), and under ``pareto`` at every smaller cap."""
    from planner.solvers.barrier_model import BarrierProblem, solve_barriers

    req, g = ctx.req, ctx.reference
    aliases: frozenset[tuple[int, int]] = frozenset()
    if ctx.owners is not None:
        owners = ctx.owners
        aliases = frozenset(
            (a, b)
            for a in range(g.n)
            for b in range(g.n)
            if g.end[a] <= g.start[b] and owners.compatible(a, b, 0)
        )
    candidates = req.options.barrier_candidates
    problem = BarrierProblem(
        start=g.start,
        end=g.end,
        after=ctx.after,
        before=ctx.first,
        size=g.size,
        alignment=g.alignment,
        pinned=g.pinned,
        existing=ctx.existing,
        allowed=None if candidates is None else sorted(set(candidates)),
        aliases=aliases,
    )
    cap = req.options.max_new_barriers
    caps: list[int | None] = [cap]
    if req.options.pareto:
        top = full.new_barriers if cap is None else min(cap, full.new_barriers)
        caps += list(range(min(top, PARETO_STEPS)))
    share = budget / len(caps)
    stacked = int(g.size.sum()) + int(g.alignment.sum())  # bytes: room for any plan
    found: list[_Attempt] = []
    for k in caps:
        solved = solve_barriers(
            problem,
            capacity=req.effective_capacity,
            lower_bound=ctx.bound.bytes,
            # Without a cap the full plan is one of the model's: its arena bounds the space.
            upper=full.arena if k is None else stacked,
            max_new=k,
            time_limit=share,
            hint=(full.result.offsets, full.barriers.inserted) if k is None else None,
        )
        if solved is None:
            continue
        # The model aliases only at equal offsets: its optimum proves nothing when aliases at
        # other offsets are possible.
        proved = solved.optimal and k == cap and ctx.owners is None
        result = Solution(
            name="exact:barrier-model",
            offsets=solved.offsets,
            arena_bytes=solved.arena_bytes,
            bound=solved.arena_bytes if proved else ctx.bound.bytes,
            proved_optimal=proved or solved.arena_bytes <= ctx.bound.bytes,
            tried=[*full.result.tried, ("exact:barrier-model", solved.arena_bytes)],
        )
        found.append(_protected(ctx, f"exact:{k}", result))
    return found


def _attempt(
    ctx: _Context,
    points: list[int] | None,
    time_limit: float,
    label: str,
    *,
    merge: bool = False,
    enough: int | None = None,
) -> _Attempt:
    """Plan on occupied intervals that end at ``points`` (None: at the lifetime's end)."""
    req = ctx.req
    g = ctx.reference.released(ctx.after, points, req.horizon)
    solve_on, node = g, None
    if merge and ctx.owners is not None:
        parent = alias_chains(g, ctx.owners)
        if any(p >= 0 for p in parent):
            solve_on, node = merge_chains(g, parent)
    result = solve(
        solve_on,
        solver=req.options.solver,
        heuristics=ctx.heuristics,
        capacity=req.effective_capacity,
        time_limit=time_limit,
        enough=enough,
        greedy_seconds=GREEDY_SHARE * time_limit * ctx.spare,
    )
    trusted = label == "policy" and ctx.exact
    if node is not None:
        offsets = result.offsets[node]
        arena = int((offsets + g.size).max()) if g.n else 0
        result = replace(result, offsets=offsets, arena_bytes=arena, infeasible=None)
    if not trusted:
        # Proofs on this graph hold for it alone; only the request-wide bound is kept.
        bound = ctx.bound.bytes
        result = replace(
            result,
            bound=bound,
            proved_optimal=result.arena_bytes <= bound,
            infeasible=None,
        )
    return _protected(ctx, label, result)


def _protected(ctx: _Context, label: str, result: Solution) -> _Attempt:
    """The barriers (fewest) and aliases that make a placement safe."""
    req = ctx.req
    g = ctx.reference
    sync = req.options.sync
    candidates = req.options.barrier_candidates
    allowed = None if candidates is None else sorted(set(candidates))
    offsets = result.offsets
    if ctx.owners is None:
        found = reuses(g.start, g.end, offsets, g.size, after=ctx.after, before=ctx.first)
        return _Attempt(label, result, choose_barriers(found, ctx.existing, sync, allowed), [])
    owners = ctx.owners
    pairs = sharing_pairs(req, offsets, g.size)
    local = [
        r
        for r in pairs
        if not hits(ctx.existing, r.after, r.before)
        and owners.compatible(r.previous, r.next, int(offsets[r.next] - offsets[r.previous]))
    ]
    alias_set = {(r.previous, r.next) for r in local}
    rest = [r for r in pairs if (r.previous, r.next) not in alias_set]
    choice = choose_barriers(rest, ctx.existing, sync, allowed)
    runtime = sorted(set(ctx.existing) | set(choice.inserted))
    aliases = [(r.previous, r.next) for r in local if not hits(runtime, r.after, r.before)]
    return _Attempt(label, result, choice, sorted(aliases))


def _heuristics(solver: str) -> list[str] | None:
    """The heuristics a solver name asks for; None: the default portfolio."""
    if solver in SOLVERS:
        wanted = EXACT_METHODS if solver == "exact" else (solver,)
        if solver in ("exact", *EXACT_METHODS) and all(exact_method(m) is None for m in wanted):
            raise RequestError.field(
                ("options", "solver"),
                f"solver {solver!r} is not installed: {install_hint('exact')}",
                "solver_unavailable",
                solver,
            )
        return None
    name = solver.removeprefix("greedy:")
    if name in HEURISTICS:
        return [name]
    known = ", ".join([*SOLVERS, *HEURISTICS])
    raise RequestError.field(
        ("options", "solver"),
        f"unknown solver {solver!r}; known solvers: {known}",
        "unknown_solver",
        solver,
    )


def _naive_bytes(req: PlanRequest) -> int:
    """Every buffer end to end, in request order, each aligned: the arena with no reuse."""
    top = 0
    for size, align in ((b.size, req.alignment_of(b)) for b in req.buffers):
        top = (top + align - 1) // align * align + size
    return top


def _status(result: Solution, capacity: int | None) -> Status:
    if capacity is not None and (result.bound > capacity or result.infeasible is not None):
        return "infeasible"
    if capacity is not None and result.arena_bytes > capacity:
        return "unknown"
    return "optimal" if result.proved_optimal else "feasible"


def _certificate(
    g: InterferenceGraph, result: Solution, capacity: int | None
) -> Certificate | None:
    """Why nothing fits: the peak of live bytes, or a set of buffers proved not to fit."""
    if capacity is None:
        return None
    for reason, bound in (("lower_bound", g.lower_bound), ("aligned_bound", g.aligned_bound)):
        if bound.bytes > capacity:
            return Certificate(
                reason=reason,
                capacity=capacity,
                live_bytes=bound.bytes,
                point=bound.point,
                buffers=[g.ids[i] for i in bound.buffers],
            )
    if result.infeasible is not None:
        subset = np.asarray(result.infeasible, dtype=np.int64)
        return Certificate(
            reason="infeasible_subset",
            capacity=capacity,
            live_bytes=g.subgraph(subset).lower_bound.bytes,
            buffers=[g.ids[i] for i in subset.tolist()],
        )
    return None


def _assemble(ctx: _Context, attempt: _Attempt, chosen: bool) -> Plan:
    """The plan of one attempt; ``chosen``: the main plan (its diagnostics say why)."""
    req, g = ctx.req, ctx.reference
    result, choice = attempt.result, attempt.barriers
    arena = result.arena_bytes
    capacity = req.effective_capacity
    status = _status(result, capacity)
    certificate = _certificate(g, result, capacity) if status == "infeasible" else None
    gap = (arena - result.bound) / result.bound if result.bound else 0.0
    naive = _naive_bytes(req)
    return Plan(
        name=req.name,
        status=status,
        arena_bytes=arena,
        lower_bound=ctx.bound.bytes,
        naive_bytes=naive,
        capacity=capacity,
        placements=[
            # Built from checked arrays; skipping re-validation matters at 100k buffers.
            Placement.model_construct(id=ident, offset=off, size=size, memory="shared")
            for ident, off, size in zip(
                g.ids, result.offsets.tolist(), g.size.tolist(), strict=True
            )
        ],
        barriers=Barriers(
            existing=ctx.existing,
            inserted=choice.inserted,
            required=choice.required,
        ),
        footprints=ctx.footprints,
        launch=Launch(**launch_figures(req.target, arena, naive)),
        solver=SolverInfo(
            name=result.name,
            proved_optimal=result.proved_optimal,
            bound=result.bound,
            gap=round(gap, 6),
            tried=[SolverAttempt(name=n, arena_bytes=a) for n, a in result.tried],
        ),
        graph=GraphStats(
            buffers=g.n,
            live_edges=g.live_edges,
            hazard_edges=g.hazard_edges,
            components=g.components,
        ),
        diagnostics=_diagnostics(ctx, attempt, status, chosen),
        certificate=certificate,
        request_sha256=request_sha256(req),
        aliases=[[g.ids[a], g.ids[b]] for a, b in attempt.aliases],
    )


def _diagnostics(
    ctx: _Context, attempt: _Attempt, status: Status, chosen: bool
) -> list[Diagnostic]:
    req, g = ctx.req, ctx.reference
    arena = attempt.arena
    notes: list[Diagnostic] = []
    capacity = req.effective_capacity
    if status == "infeasible" and attempt.result.infeasible is not None:
        assert capacity is not None
        count = len(attempt.result.infeasible)
        notes.append(
            Diagnostic(
                level="error",
                code="over_capacity",
                message=f"proved: the {count} buffers in the certificate cannot be placed "
                f"together within the capacity of {capacity}; no placement exists",
            )
        )
    elif status == "infeasible":
        assert capacity is not None
        plain = g.lower_bound.bytes > capacity
        bound = g.lower_bound if plain else g.aligned_bound
        padded = "" if plain else " with their alignment padding"
        notes.append(
            Diagnostic(
                level="error",
                code="over_capacity",
                message=f"{bound.bytes} bytes are live at point {bound.point}{padded}, "
                f"over the capacity of {capacity}; no placement exists",
            )
        )
    elif status == "unknown":
        assert capacity is not None
        notes.append(
            Diagnostic(
                level="warning",
                code="over_capacity",
                message=f"the best plan found needs {arena} bytes, {arena - capacity} over the "
                f"capacity of {capacity}; the lower bound is {ctx.bound.bytes}",
            )
        )
    for note in attempt.result.notes:
        notes.append(Diagnostic(level="warning", code="solver_unavailable", message=note))
    insert = req.options.sync == "insert"
    if chosen and insert and not attempt.barriers.inserted and attempt.label != "policy":
        cap = req.options.max_new_barriers
        notes.append(
            Diagnostic(
                level="info",
                code="no_new_barriers",
                message="planned on barrier-extended lifetimes: inserting barriers would "
                "not make the arena smaller"
                if cap is None or cap > 0
                else "planned on barrier-extended lifetimes to respect max_new_barriers",
            )
        )
    for point in attempt.barriers.inserted:
        notes.append(
            Diagnostic(
                level="info",
                code="barrier_inserted",
                message=f"barrier inserted at point {point} so that buffers can reuse bytes "
                "freed before it",
            )
        )
    for a, b in attempt.aliases:
        notes.append(
            Diagnostic(
                level="info",
                code="thread_local_alias",
                message=f"{g.ids[b]} reuses bytes of {g.ids[a]} with no barrier: each shared "
                "byte is touched by one and the same thread in both",
            )
        )
    notes.extend(_footprint_notes(ctx))
    if ctx.owners is not None:
        notes.extend(budget_diagnostics(req))
    if len(notes) > MAX_DIAGNOSTICS:
        dropped = len(notes) - MAX_DIAGNOSTICS + 1
        notes = [
            *notes[: MAX_DIAGNOSTICS - 1],
            Diagnostic(level="info", code="truncated", message=f"{dropped} more notes omitted"),
        ]
    return notes


def _footprint_notes(ctx: _Context) -> list[Diagnostic]:
    """Per buffer indexed by blockIdx: bytes each block declares but never touches."""
    notes: list[Diagnostic] = []
    for f in ctx.footprints:
        notes.append(
            Diagnostic(
                level="info",
                code="footprint_shrunk",
                message=f"{f.id}: each block touches {f.planned} of its {f.declared} declared "
                f"bytes; planned {f.planned}, the compiler subtracts index_base",
            )
        )
    if ctx.req.options.shrink:
        return notes
    for b in ctx.req.buffers:
        part = block_slice(ctx.req, b)
        if part is not None and part.size < b.size:
            notes.append(
                Diagnostic(
                    level="info",
                    code="untouched_bytes",
                    message=f"{b.id}: each block touches only {part.size} of its {b.size} "
                    f"declared bytes; options.shrink would save {b.size - part.size} bytes",
                )
            )
    return notes


def _raise_for(req: PlanRequest, report: ValidationReport) -> None:
    """A violation between two pinned buffers is the caller's; anything else is ours."""
    pinned = {b.id: i for i, b in enumerate(req.buffers) if b.offset is not None}
    mine = [v for v in report.violations if not set(v.buffers) <= set(pinned) or not v.buffers]
    if not mine:
        v = report.violations[0]
        index = max(pinned[ident] for ident in v.buffers)
        raise RequestError.field(
            ("buffers", index, "offset"),
            f"pinned buffers {' and '.join(v.buffers)} cannot share bytes under sync "
            f"{req.options.sync!r}: {v.message}",
            "pinned_conflict",
            req.buffers[index].offset,
        )
    details = "; ".join(f"{v.code}: {v.message}" for v in mine[:5])
    raise InternalError(f"the planner built a plan that fails its static check: {details}")
