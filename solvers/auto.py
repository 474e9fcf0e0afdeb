"""Solver ``"auto"``: the greedy portfolio, then exact methods where it leaves a gap.

Where the portfolio's first heuristic misses the bound, the search first tries the bound
alone on a few nodes a buffer (``_first_try``); a plan met there ends the request.

The bound is the aligned peak, rounded up to the granularity every arena is a multiple of,
and, when greedy misses it, the clique bound (``solvers.bounds``). Independent connected
components of the interference graph never share a point in time, so each is solved on its
own and the arena is the largest of theirs. Only components whose greedy arena is above the
bound can lower the maximum; the exact methods run on those, in turn, seeded with the best
plan so far (on kernel-sized ones searches and CP-SAT runs in turn, see ``_schedule``). On
kernel-sized requests the random skyline runs wait until the exact methods have left the
plan unproved: the search decides the bound sooner than they run. Every
budget is a fixed share of ``time_limit``, not what the clock says is left, so the same
request gets the same budgets and the same plan. Which greedy heuristics run is chosen by
their estimated cost (``solvers.greedy.affordable``), and whether the exact methods run at
all by the conflicts their instances would hold (``_exact_affordable``): counts, never the
clock. The clock only ends work once the request's deadline has passed
(the ``planner.pipeline`` docstring).

``listening(listener)`` lets a benchmark see every improvement of the whole plan (arena and
bound) while ``solve`` runs in this context; it never changes the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.core._jit import announce, compiled
from planner.core.budget import (
    EXACT_SETUP_RATE,
    EXACT_SETUP_SHARE,
    FIRST_TRY_SHARE,
    GREEDY_SHARE,
    LOAD_SECONDS,
    SMALL_ABOVE_SEARCH,
    SMALL_AT_BOUND,
    SMALL_CPSAT,
    SMALL_FIRST_SEARCH,
    SMALL_WINDOWS,
    TINY_CPSAT,
    TINY_FIRST_SEARCH,
)
from planner.core.clock import deadline, expired, paused
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.install import install_hint
from planner.core.models import PlanRequest
from planner.solvers import registry
from planner.solvers.bounds import CLIQUE_MAX, clique_bound, stack_height
from planner.solvers.exact import (
    GapTolerance,
    exact_budget,
    granularity,
    round_up,
)
from planner.solvers.greedy import RANDOM_SKYLINE, applicable, arena_of, cost, portfolio
from planner.solvers.registry import SolverChoice
from planner.solvers.solution import Solution
from planner.solvers.speculative import SpeculativeRun

__all__ = [
    "WARM_UP_BUFFERS",
    "Listener",
    "Solution",
    "listening",
    "solve",
]

I64 = npt.NDArray[np.int64]
ExactMethod = registry.ExactMethod
Listener = Callable[[int, int], None]  # (arena bytes of the whole plan, bound bytes)
_LISTENER: ContextVar[Listener | None] = ContextVar("planner_progress", default=None)

IIS_MAX_BUFFERS = 64  # the deletion filter for a certificate runs up to this many buffers
SMALL_PART = 64  # buffers (kernel-sized): up to this many, CP-SAT runs between searches
TINY_PART = 16  # buffers: below this many, one CP-SAT run between two searches
SMALL_AT_BOUND_TRIES = 3  # runs at the bound while each proves it too low (and raises it)
EXACT_MAX_EDGES = 1 << 23  # conflicts: past this the exact methods' instances do not run

# (size, start, end, alignment) of ten buffers greedy cannot place at the bound, so the
# skyline heuristics, the clique bound, the search and CP-SAT all run: the instance the
# solvers load their compiled code on, and the pipeline's warm-up requests.
WARM_UP_BUFFERS: list[tuple[int, int, int, int | None]] = [
    (39, 13, 16, 16),
    (34, 11, 14, 4),
    (25, 11, 15, 16),
    (62, 1, 16, None),
    (49, 2, 16, 16),
    (44, 8, 14, 16),
    (3, 0, 8, 4),
    (1, 5, 14, 1),
    (59, 3, 10, 4),
    (23, 15, 16, None),
]


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Within the block, ``listener`` sees each improvement of a plan being solved."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def _tell(arena: int, bound: int) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener(arena, bound)


_LOADED: set[str] = set()  # the exact methods this process has run once


def _load(methods: list[tuple[str, ExactMethod]]) -> None:
    """Run each exact method once per process on a small instance, with the request's clock
    paused: the first run loads compiled code and the solver's own libraries (tenths of a
    second; seconds after a fresh install), which must not eat into a request's budget, or
    the first request in a process would stop where later ones go on. (The greedy kernels
    pause the clock for their own first call.)"""
    todo = [(n, m) for n, m in methods if n not in _LOADED]
    if not todo:
        return
    # Paused for the request; the warm-up's own runs get a deadline of their own.
    with paused(), deadline(LOAD_SECONDS), compiled():
        g = build_graph(_warm_up_request(), "none")
        bound = g.aligned_bound.bytes
        for name, method in todo:
            announce(name)
            method(g, capacity=None, lower_bound=bound, hint=None, time_limit=1.0)
            _LOADED.add(name)


def _warm_up_request() -> PlanRequest:
    buffers = [
        {"id": f"b{i}", "size": size, "start": start, "end": end, "alignment": align}
        for i, (size, start, end, align) in enumerate(WARM_UP_BUFFERS)
    ]
    return PlanRequest.model_validate({"barriers": [1], "buffers": buffers})


def solve(
    g: InterferenceGraph,
    *,
    solver: SolverChoice,
    heuristics: list[str] | None,
    capacity: int | None,
    time_limit: float,
    stop_at: int | None = None,
    greedy_seconds: float | None = None,
    gap_tolerance: GapTolerance = 0,
) -> Solution:
    """Plan ``g`` with ``solver``'s methods; ``heuristics`` restricts the greedy portfolio.

    ``gap_tolerance`` (``options.gap_tolerance``; None: its default rule, see
    ``solvers.exact.exact_budget``): once the plan is that close to the bound, no exact
    method runs and a running one stops. The default 0 asks for a proof.

    ``greedy_seconds``: what the default portfolio may cost by its estimates (default
    ``GREEDY_SHARE`` of ``time_limit``); once the request's deadline has passed by the clock
    no exact method starts.

    ``stop_at``: an arena the caller gains nothing below (it holds a plan of that size,
    proved optimal for a problem with fewer conflicts), within ``capacity``: the search
    stops at a plan that small; the bound returned is still this graph's own.
    """
    names = solver.exact
    seconds = GREEDY_SHARE * time_limit if greedy_seconds is None else greedy_seconds
    # Kernel-sized or within a capacity, with exact methods to follow: the search decides the
    # bound (or the capacity) sooner than hundreds of random skyline runs, which run only
    # where it leaves the plan unproved.
    defer = g.n <= SMALL_PART or capacity is not None
    later = (RANDOM_SKYLINE,) if heuristics is None and names and defer else ()
    try:
        result = _solve(
            g, names, heuristics, capacity, time_limit, stop_at, seconds, later, gap_tolerance
        )
    finally:
        g.memo.clear()  # what a method left for a later one of this solve (its memory too)
    # The heuristics left for later run whatever the tolerance: it stops exact methods only.
    if later and not result.proved_optimal and (stop_at is None or result.plan_arena > stop_at):
        result = _greedy_after(g, result, list(later), seconds)
    return result


def _solve(
    g: InterferenceGraph,
    names: tuple[str, ...],
    heuristics: list[str] | None,
    capacity: int | None,
    time_limit: float,
    stop_at: int | None,
    seconds: float,
    later: tuple[str, ...],
    gap_tolerance: GapTolerance,
) -> Solution:
    """``solve`` but for the heuristics ``later`` (left out of the default portfolio)."""
    # Every arena is a multiple of the granularity, so the bound rounds up to one.
    step = granularity(g)
    bound = round_up(g.aligned_bound.bytes, step)
    witness = g.aligned_bound.buffers  # buffers that alone need ``bound`` bytes
    target = bound if stop_at is None else max(bound, stop_at)
    greedy = None
    if heuristics is None and stop_at is None and (capacity is None or bound <= capacity):
        # Where the portfolio's first heuristic misses the bound by more than the gap
        # tolerance, the search's first try may meet it for less than the rest of the
        # portfolio costs.
        greedy = portfolio(g, None, target, seconds=seconds, without=later, head=1)
        _, slack = exact_budget(
            gap_tolerance, greedy.plan_arena - target, bound, _max_alignment(g), time_limit
        )
        if greedy.plan_arena > _roof(target, slack, capacity):
            first = _first_try(g, names, bound, capacity, time_limit, greedy.tried)
            if first is not None:
                return first
    if greedy is None or greedy.plan_arena > target:  # the whole portfolio
        greedy = portfolio(g, heuristics, target, seconds=seconds, without=later)
    if greedy.plan_arena > bound:
        clique = clique_bound(g, bound)  # dearer, so only where it may help
        if round_up(clique.bytes, step) > bound:
            bound, witness = round_up(clique.bytes, step), clique.buffers
    tried = [(f"greedy:{n}", a) for n, a in greedy.tried]
    best = Solution(
        name=f"greedy:{greedy.name}",
        offsets=greedy.plan_offsets,
        arena_bytes=greedy.plan_arena,
        bound=bound,
        proved_optimal=greedy.plan_arena <= bound,
        tried=tried,
    )
    _tell(best.plan_arena, bound)
    if stop_at is not None and best.plan_arena <= stop_at:
        return best
    if capacity is not None and bound > capacity:
        # The bound already proves it; those buffers alone cannot fit. Nothing to search.
        return replace(best, infeasible=_shrink(g, witness, capacity))
    return _exact(g, best, names, capacity, time_limit, stop_at, gap_tolerance)


def _exact(
    g: InterferenceGraph,
    best: Solution,
    names: tuple[str, ...],
    capacity: int | None,
    time_limit: float,
    stop_at: int | None,
    gap_tolerance: GapTolerance,
) -> Solution:
    """``best`` (the greedy plan) improved by the exact methods ``names`` where it misses
    the bound by more than the gap tolerance."""
    bound = best.bound
    # Bytes above the bound (the target's, with ``stop_at``) the plan may stay, and the time
    # the exact methods get to close the gap (``solvers.exact.exact_budget``).
    target = bound if stop_at is None else max(bound, stop_at)
    time_limit, slack = exact_budget(
        gap_tolerance, best.plan_arena - target, bound, _max_alignment(g), time_limit
    )
    if not names or best.proved_optimal or best.plan_arena <= _roof(target, slack, capacity):
        return best  # (past the deadline, ``_improve`` runs no method)
    with paused():  # the first import of a method's module (tenths of a second)
        found = {n: registry.exact_method(n) for n in names}
    methods = [(n, m) for n, m in found.items() if m is not None]
    notes = [
        f"exact method {n!r} needs the exact extra: {install_hint('exact')}"
        for n, m in found.items()
        if m is None
    ]
    if not methods:
        return replace(best, notes=notes)
    _load(methods)
    return _improve(g, best, methods, capacity, time_limit, notes, stop_at, slack)


def _first_try(
    g: InterferenceGraph,
    names: tuple[str, ...],
    bound: int,
    capacity: int | None,
    time_limit: float,
    greedy_tried: list[tuple[str, int]],
) -> Solution | None:
    """A plan at ``bound`` from the search's first try (first fit in the ranking of each of
    MiniMalloc's published orders, then those orders' searches, a few nodes a buffer each)
    after the portfolio's first heuristic (``greedy_tried``) missed it,
    or None. It runs where the search is one of ``names`` and its nodes cost at most
    ``FIRST_TRY_SHARE`` of ``time_limit`` by the search's node rate: on the dense instances
    where every heuristic misses the bound it costs less than the rest of the portfolio,
    which then does not run."""
    if "search" not in names or g.n <= SMALL_PART:
        return None
    if not _exact_affordable(g, [np.arange(g.n, dtype=np.int64)], time_limit):
        return None
    with paused():  # the first import of the method's module
        method = registry.exact_method("search")
    if method is None:
        return None
    from planner.solvers.search import first_try_nodes, node_budget

    nodes = first_try_nodes(g, FIRST_TRY_SHARE * node_budget(g, time_limit))
    if nodes == 0:
        return None
    _load([("search", method)])
    options: dict[str, Any] = {"first_try": True, "nodes": nodes}
    found = method(
        g, capacity=capacity, lower_bound=bound, hint=None, time_limit=time_limit, **options
    )
    if not found.proved_optimal or found.offsets is None or found.arena_bytes is None:
        return None
    _tell(found.arena_bytes, found.bound)
    return Solution(
        name="exact:search",
        offsets=found.offsets,
        arena_bytes=found.arena_bytes,
        bound=found.bound,
        proved_optimal=True,
        tried=[*((f"greedy:{n}", a) for n, a in greedy_tried), ("exact:search", found.arena_bytes)],
    )


def _roof(bound: int, slack: int, capacity: int | None) -> int:
    """The largest arena (bytes) the gap tolerance accepts: ``slack`` above ``bound``, never
    above ``capacity`` (a plan over it is no answer, however close)."""
    return bound + slack if capacity is None else min(bound + slack, max(bound, capacity))


def _max_alignment(g: InterferenceGraph) -> int:
    """The largest alignment of the graph's buffers, bytes (1 without buffers)."""
    return int(g.alignment.max(initial=1))


def _greedy_after(
    g: InterferenceGraph, result: Solution, heuristics: list[str], seconds: float
) -> Solution:
    """The heuristics left for after the exact methods, run where these left the plan
    unproved (those ``affordable`` in ``seconds``, unless the deadline has passed); a smaller
    arena than theirs replaces the plan."""
    names = [h for h in heuristics if applicable(g, h) and cost(g, h) <= seconds]
    if not names or expired():
        return result
    greedy = portfolio(g, names, result.bound)
    tried = [*result.tried, *((f"greedy:{n}", a) for n, a in greedy.tried)]
    if greedy.plan_arena >= result.plan_arena:
        return replace(result, tried=tried)
    _tell(greedy.plan_arena, result.bound)
    return replace(
        result,
        name=f"greedy:{greedy.name}",
        offsets=greedy.plan_offsets,
        arena_bytes=greedy.plan_arena,
        proved_optimal=greedy.plan_arena <= result.bound,
        tried=tried,
    )


@dataclass
class _Improving:
    """The plan as the exact methods improve it, part by part."""

    offsets: I64
    name: str
    tried: list[tuple[str, int]]


def _improve(
    g: InterferenceGraph,
    best: Solution,
    methods: list[tuple[str, ExactMethod]],
    capacity: int | None,
    time_limit: float,
    notes: list[str],
    stop_at: int | None = None,
    slack: int = 0,
) -> Solution:
    """``best`` improved by the exact methods, part by part, until the plan is within
    ``slack`` bytes of the target (the bound, or ``stop_at``) or the budgets run out."""
    plan = _Improving(best.plan_offsets.copy(), best.name, list(best.tried))
    bound = best.bound
    # With ``stop_at`` the methods aim at it as if it were the bound; what they prove then
    # holds for that target, not for the request, and no bound is taken from them.
    target = bound if stop_at is None else max(bound, stop_at)
    roof = _roof(target, slack, capacity)
    parts = [m for m in g.members() if arena_of(_part_graph(g, m), plan.offsets[m]) > roof]
    if not _exact_affordable(g, parts, time_limit):
        return best
    per_part = time_limit / max(1, len(parts))  # seconds
    for members in sorted(parts, key=lambda m: -arena_of(_part_graph(g, m), plan.offsets[m])):
        sub = _part_graph(g, members)
        if arena_of(sub, plan.offsets[members]) <= roof:
            continue  # the arena is the largest component's: lower gains nothing
        part = _Part(g, members, sub, capacity, per_part, target, bound, slack)
        sub_bound, refuted = _improve_part(part, plan, methods)
        if refuted is not None:
            arena = arena_of(g, plan.offsets)
            return Solution(
                name=f"exact:{refuted.name}",
                offsets=plan.offsets,
                arena_bytes=arena,
                bound=bound if stop_at is not None else max(bound, sub_bound),
                proved_optimal=False,
                tried=[*plan.tried, (f"exact:{refuted.name}", arena)],
                infeasible=_irreducible(g, members, refuted.method, capacity, per_part / 2),
                notes=notes,
            )
        if stop_at is None:
            bound = max(bound, sub_bound)
    arena = arena_of(g, plan.offsets)
    _tell(arena, bound)
    return Solution(
        name=plan.name,
        offsets=plan.offsets,
        arena_bytes=arena,
        bound=bound,
        proved_optimal=arena <= bound,
        tried=plan.tried,
        notes=notes,
    )


def _part_graph(g: InterferenceGraph, members: I64) -> InterferenceGraph:
    """The graph of ``members`` (distinct indices): ``g`` itself, with what it has
    computed already, when they are all its buffers."""
    return g if members.size == g.n else g.subgraph(members)


@dataclass(frozen=True)
class _Part:
    """One connected part of the graph as the exact methods work on it."""

    g: InterferenceGraph
    members: I64
    sub: InterferenceGraph  # the part's own graph
    capacity: int | None
    seconds: float  # the part's share of the exact methods' time
    target: int  # the whole request's target: nothing below it is gained
    bound: int  # the whole request's bound so far
    slack: int  # bytes over the target the plan may stay


def _improve_part(
    part: _Part, plan: _Improving, methods: list[tuple[str, ExactMethod]]
) -> tuple[int, _Step | None]:
    """The part's offsets in ``plan`` improved by the methods' steps in turn; the part's
    bound, and the step that proved nothing fits the capacity (None: none did)."""
    g, members, sub, capacity, slack = part.g, part.members, part.sub, part.capacity, part.slack
    sub_arena = arena_of(sub, plan.offsets[members])
    # Below the whole request's bound nothing is gained either, so that is the target.
    sub_bound = max(round_up(sub.aligned_bound.bytes, granularity(sub)), part.target)
    others = np.ones(g.n, dtype=bool)
    others[members] = False
    rest = int((plan.offsets + g.size)[others].max(initial=0))  # arena of the other parts
    step = granularity(sub)
    steps = _schedule(methods, sub.n)
    speculative: SpeculativeRun | None = None  # the next step's first run, started early

    def arguments(run: _Step, bound: int) -> dict[str, Any]:
        progress = _progress_of_part(rest, sub_arena, part.bound)
        share = part.seconds * run.fraction
        return _arguments(
            run, capacity, bound, plan.offsets[members], share, sub_arena, progress, slack
        )

    try:
        for k, run in enumerate(steps):
            if expired():  # building an instance past the deadline would overrun it
                break
            method_name = f"exact:{run.name}"
            for _ in range(run.tries):
                before = sub_bound
                next_run = None  # the next step's first run, to start beside this one
                if run.next_speculative and k + 1 < len(steps):
                    next_run = (steps[k + 1].method, arguments(steps[k + 1], sub_bound))
                result, speculative = _call(
                    run.method, sub, arguments(run, sub_bound), speculative, next_run
                )
                # Every arena is a multiple of the granularity: so is the least one.
                sub_bound = max(sub_bound, round_up(result.bound, step))
                if result.proved_optimal and result.arena_bytes is not None:
                    sub_bound = max(sub_bound, result.arena_bytes)  # its optimum, proved
                if result.infeasible is not None:
                    return sub_bound, run
                found, arena = result.offsets, result.arena_bytes
                if found is not None and arena is not None and arena < sub_arena:
                    plan.offsets[members] = found
                    sub_arena = arena
                    plan.name = method_name
                plan.tried.append((method_name, arena_of(g, plan.offsets)))
                if sub_arena <= _roof(sub_bound, slack, capacity) or sub_bound == before:
                    break  # optimal (or within the tolerance), or the bound stands
            if sub_arena <= _roof(sub_bound, slack, capacity):
                break
    finally:
        if speculative is not None:
            speculative.cancel()
    return sub_bound, None


def _call(
    method: ExactMethod,
    sub: InterferenceGraph,
    arguments: dict[str, Any],
    speculative: SpeculativeRun | None,
    next_run: tuple[ExactMethod, dict[str, Any]] | None,
) -> tuple[Solution, SpeculativeRun | None]:
    """``method``'s result on ``arguments``, and the run left going ahead of its turn.

    That is ``speculative``'s result where it started on these arguments. Otherwise it is
    stopped and ``method`` runs, with ``next_run`` (the next step's method and first
    arguments) started on another thread first, which ``method`` is told to stop for once
    that run settles the bound (``SpeculativeRun.settled``)."""
    if speculative is not None and speculative.matches(arguments):
        return speculative.result(), None
    if speculative is not None:
        speculative.cancel()
    if next_run is None:
        return method(sub, **arguments), None
    speculative = SpeculativeRun(next_run[0], sub, next_run[1])
    return method(sub, **arguments, stop=speculative.settled), speculative


def _exact_affordable(g: InterferenceGraph, parts: list[I64], time_limit: float) -> bool:
    """Whether the exact methods may run on ``parts`` (deterministic: from counts and the time
    limit, never the clock). Their instances hold every conflicting pair of a part, so past
    ``EXACT_MAX_EDGES`` conflicts, or when building them is estimated to take more than
    ``EXACT_SETUP_SHARE`` of the time limit, the greedy plan stands."""
    if not parts:
        return True
    sub = _part_graph(g, np.concatenate(parts))
    edges = sub.conflict_edges
    setup = (sub.n + edges) / EXACT_SETUP_RATE  # seconds
    return edges <= EXACT_MAX_EDGES and setup <= EXACT_SETUP_SHARE * time_limit


@dataclass(frozen=True)
class _Step:
    """One run of an exact method on a part."""

    name: str
    method: ExactMethod
    fraction: float  # of the part's time
    at_bound: bool = False  # only a plan at the part's bound is searched for
    tries: int = 1  # runs while each proves the bound too low (and raises it)
    options: dict[str, bool] = field(default_factory=dict)  # the method's own options
    # The next step's first run starts beside this one (``SpeculativeRun``); both take ``stop``.
    next_speculative: bool = False


def _arguments(
    run: _Step,
    capacity: int | None,
    bound: int,
    hint: I64,
    share: float,
    arena: int,
    progress: Callable[[int | None, int], None],
    slack: int,
) -> dict[str, Any]:
    """What ``run`` is called with on a part whose bound and best arena are these (``slack``:
    the bytes above the bound the plan may stay)."""
    return {
        "capacity": capacity,
        "lower_bound": bound,
        "hint": hint,
        "time_limit": share,
        "upper": bound if run.at_bound else arena,
        "on_progress": progress,
        "tolerance": slack,
        **run.options,
    }


def _schedule(methods: list[tuple[str, ExactMethod]], n: int) -> list[_Step]:
    """The exact methods to run on a part of ``n`` buffers, each with its fraction of the
    part's time.

    On small parts the search finds plans fast but proves little; CP-SAT proves them well.
    The bound is tight on nearly every kernel-sized part, and what takes time is finding a
    plan at it. So the search first decides the bound alone (no bisection above it); where
    it does not, its windows (``solvers.windows``) may prove the bound a few granules too
    low, which the search cannot on the whole part and CP-SAT takes a run per granule to. Then
    CP-SAT is asked only for a plan at the bound (its first run starts beside the windows, as
    if they leave the bound: ``solvers.speculative``): a far smaller model than the whole range
    below the best arena, which it decides in milliseconds on most parts the search
    misses, or proves the bound too low (then again at the raised bound, up to
    ``SMALL_AT_BOUND_TRIES`` runs). Where it decides neither, the search bisects above the
    bound (a better plan to start from), CP-SAT minimizes, and the search goes on with the
    rest, seeded by what CP-SAT found. On tiny parts (fewer than ``TINY_PART`` buffers) a
    short search, CP-SAT minimizing, then the search again. Large parts split the time
    evenly, the search first.
    """
    if n > SMALL_PART or len(methods) < 2 or [m for m, _ in methods] != ["search", "cpsat"]:
        return [_Step(name, method, 1.0 / len(methods)) for name, method in methods]
    (s_name, search), (c_name, cpsat) = methods
    if n < TINY_PART:
        return [
            _Step(s_name, search, TINY_FIRST_SEARCH),
            _Step(c_name, cpsat, TINY_CPSAT),
            _Step(s_name, search, 1.0 - TINY_FIRST_SEARCH - TINY_CPSAT),
        ]
    spent = (
        SMALL_FIRST_SEARCH
        + SMALL_WINDOWS
        + SMALL_AT_BOUND * SMALL_AT_BOUND_TRIES
        + SMALL_ABOVE_SEARCH
    )
    steps = [_Step(s_name, search, SMALL_FIRST_SEARCH, options={"bound_only": True})]
    windows = registry.exact_method("windows")  # the search's own: always installed
    if windows is not None:
        # The windows run on one core and mostly leave the bound as it is: CP-SAT's first
        # run at the bound goes on beside them.
        steps.append(_Step(s_name, windows, SMALL_WINDOWS, next_speculative=True))
    return [
        *steps,
        _Step(c_name, cpsat, SMALL_AT_BOUND, at_bound=True, tries=SMALL_AT_BOUND_TRIES),
        _Step(s_name, search, SMALL_ABOVE_SEARCH, options={"above_bound": True}),
        _Step(c_name, cpsat, SMALL_CPSAT),
        _Step(s_name, search, 1.0 - spent - SMALL_CPSAT),
    ]


def _shrink(g: InterferenceGraph, witness: list[int], capacity: int) -> list[int]:
    """The buffers of ``witness`` (all live at one point) that still cannot be stacked
    within ``capacity``, each dropped in turn if the rest still cannot; a set too large to
    stack exactly stays whole."""
    keep = sorted(witness)
    if len(keep) > CLIQUE_MAX:
        return keep
    for i in list(keep):
        rest = np.asarray([j for j in keep if j != i], dtype=np.int64)
        if rest.size and stack_height(g.size[rest], g.alignment[rest]) > capacity:
            keep = rest.tolist()
    return keep


def _progress_of_part(rest: int, arena: int, bound: int) -> Callable[[int | None, int], None]:
    """A method's progress on one part, told as the whole plan's: the other parts keep
    ``rest`` bytes, this one ``arena`` until the method finds better."""

    def progress(found: int | None, proved: int) -> None:
        mine = arena if found is None else min(found, arena)
        _tell(max(rest, mine), max(bound, proved))

    return progress


def _irreducible(
    g: InterferenceGraph,
    members: I64,
    method: ExactMethod,
    capacity: int | None,
    budget: float,
) -> list[int]:
    """A subset of ``members`` that still cannot fit, shrunk by a deletion filter.

    Each buffer is dropped in turn if the rest is still proved infeasible; a buffer whose
    removal cannot be decided within its share of ``budget`` stays. Larger sets stay whole.
    """
    keep = [int(i) for i in members]
    if len(keep) > IIS_MAX_BUFFERS or capacity is None:
        return keep
    per_test = budget / len(keep)
    for i in list(keep):
        rest = np.asarray([j for j in keep if j != i], dtype=np.int64)
        sub = g.subgraph(rest)
        result = method(
            sub,
            capacity=capacity,
            lower_bound=sub.aligned_bound.bytes,
            hint=None,
            time_limit=per_test,
            upper=None,
        )
        if result.infeasible is not None:
            keep = rest.tolist()
    return keep
