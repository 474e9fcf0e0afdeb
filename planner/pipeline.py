"""``plan(request) -> Plan``: graph, portfolio, barriers, assembly, and the static check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from planner.barriers import BarrierChoice, choose_barriers, reuses
from planner.errors import InternalError, RequestError
from planner.graph import InterferenceGraph, build_graph
from planner.io import parse_plan, parse_request, request_sha256
from planner.models import (
    DEFAULT_MAX_BUFFERS,
    Barriers,
    Certificate,
    Diagnostic,
    GraphStats,
    Launch,
    Placement,
    Plan,
    PlanRequest,
    SolverAttempt,
    SolverInfo,
    Status,
    ValidationReport,
)
from planner.models.request import SyncPolicy
from planner.spill import plan_with_spill
from planner.targets import launch_figures
from solvers.auto import EXACT_METHODS, SOLVERS, Solution, exact_method, solve
from solvers.greedy import HEURISTICS
from validators import validate_plan

__all__ = ["plan", "validate"]

I64 = npt.NDArray[np.int64]
MAX_DIAGNOSTICS = 50


def validate(
    request: PlanRequest | dict[str, Any] | str | bytes,
    plan: Plan | dict[str, Any] | str | bytes,
) -> ValidationReport:
    """The static check of DESIGN section 6: every violation of ``plan`` for ``request``."""
    return validate_plan(parse_request(request), parse_plan(plan))


def plan(
    request: PlanRequest | dict[str, Any] | str | bytes,
    *,
    max_buffers: int = DEFAULT_MAX_BUFFERS,
) -> Plan:
    """Plan a request; the result has passed the static validator. Raises ``RequestError``."""
    req = parse_request(request, max_buffers=max_buffers)
    heuristics = _heuristics(req.options.solver)
    # With sync "insert" a second attempt on barrier-extended lifetimes may follow; each gets
    # half the time limit so the total stays within it.
    budget = req.options.time_limit / (2 if req.options.sync == "insert" else 1)
    attempt = _attempt(req, req.options.sync, heuristics, budget)
    fallback = _needs_fallback(req, attempt)
    if fallback:
        # Objective: smallest arena, then fewest new barriers. The plan on barrier-extended
        # lifetimes needs none; take it when it is as small, or when the cap forbids more.
        other = _attempt(req, "existing", heuristics, budget)
        capped = req.options.max_new_barriers is not None
        if capped or other.result.arena_bytes <= attempt.result.arena_bytes:
            attempt = other
    result = _assemble(req, attempt, fallback)
    if req.options.overflow == "spill" and result.status in ("infeasible", "unknown"):
        result = plan_with_spill(req, result, plan)
    report = validate_plan(req, result)
    if not report.valid:
        _raise_for(req, report)
    return result


@dataclass(frozen=True)
class _Attempt:
    graph: InterferenceGraph
    result: Solution
    barriers: BarrierChoice


def _attempt(
    req: PlanRequest, sync: SyncPolicy, heuristics: list[str] | None, time_limit: float
) -> _Attempt:
    graph = build_graph(req, sync)
    result = solve(
        graph,
        solver=req.options.solver,
        heuristics=heuristics,
        capacity=req.effective_capacity,
        time_limit=time_limit,
    )
    found = reuses(graph.start, graph.end, result.offsets, graph.size)
    candidates = req.options.barrier_candidates
    choice = choose_barriers(
        found,
        sorted(set(req.barriers)),
        sync,
        None if candidates is None else sorted(set(candidates)),
    )
    return _Attempt(graph, result, choice)


def _needs_fallback(req: PlanRequest, attempt: _Attempt) -> bool:
    opts = req.options
    if opts.sync != "insert" or not attempt.barriers.inserted:
        return False
    return opts.max_new_barriers is None or len(attempt.barriers.inserted) > opts.max_new_barriers


def _heuristics(solver: str) -> list[str] | None:
    """The heuristics a solver name asks for; None: the default portfolio."""
    if solver in SOLVERS:
        wanted = EXACT_METHODS if solver == "exact" else (solver,)
        if solver in ("exact", *EXACT_METHODS) and all(exact_method(m) is None for m in wanted):
            raise RequestError.field(
                ("options", "solver"),
                f"solver {solver!r} is not installed: pip install 'alloc-planner[exact]'",
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


def _naive_bytes(g: InterferenceGraph) -> int:
    """Every buffer end to end, in request order, each aligned: the arena with no reuse."""
    top = 0
    for size, align in zip(g.size.tolist(), g.alignment.tolist(), strict=True):
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


def _assemble(req: PlanRequest, attempt: _Attempt, fell_back: bool) -> Plan:
    g, result, choice = attempt.graph, attempt.result, attempt.barriers
    arena = result.arena_bytes
    bound = g.lower_bound
    capacity = req.effective_capacity
    status = _status(result, capacity)
    certificate = _certificate(g, result, capacity)
    gap = (arena - result.bound) / result.bound if result.bound else 0.0
    return Plan(
        name=req.name,
        status=status,
        arena_bytes=arena,
        lower_bound=bound.bytes,
        naive_bytes=_naive_bytes(g),
        capacity=capacity,
        placements=[
            # Built from checked arrays; skipping re-validation matters at 100k buffers.
            Placement.model_construct(id=ident, offset=off, size=size, memory="shared")
            for ident, off, size in zip(
                g.ids, result.offsets.tolist(), g.size.tolist(), strict=True
            )
        ],
        barriers=Barriers(
            existing=sorted(set(req.barriers)),
            inserted=choice.inserted,
            required=choice.required,
        ),
        launch=Launch(**launch_figures(req.target, arena, _naive_bytes(g))),
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
        diagnostics=_diagnostics(req, g, attempt, arena, status, fell_back),
        certificate=certificate,
        request_sha256=request_sha256(req),
    )


def _diagnostics(
    req: PlanRequest,
    g: InterferenceGraph,
    attempt: _Attempt,
    arena: int,
    status: Status,
    fell_back: bool,
) -> list[Diagnostic]:
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
                f"capacity of {capacity}; the lower bound is {g.lower_bound.bytes}",
            )
        )
    for note in attempt.result.notes:
        notes.append(Diagnostic(level="warning", code="solver_unavailable", message=note))
    if fell_back and not attempt.barriers.inserted:
        notes.append(
            Diagnostic(
                level="info",
                code="no_new_barriers",
                message="planned on barrier-extended lifetimes: inserting barriers would not "
                "make the arena smaller"
                if req.options.max_new_barriers is None
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
    if any(b.accesses for b in req.buffers):
        notes.append(
            Diagnostic(
                level="info",
                code="accesses_not_used",
                message="access patterns were checked but are not used for planning in this "
                "version: every buffer is taken as touched by any thread over its lifetime",
            )
        )
    if len(notes) > MAX_DIAGNOSTICS:
        dropped = len(notes) - MAX_DIAGNOSTICS + 1
        notes = [
            *notes[: MAX_DIAGNOSTICS - 1],
            Diagnostic(level="info", code="truncated", message=f"{dropped} more notes omitted"),
        ]
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
