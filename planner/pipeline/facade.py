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
the clock checks, which then cut optional work to keep the limit. Such a plan says so
(``solver.cut_by_clock``, see ``planner.core.clock.watching``): the same request gets the
same plan, byte for byte, unless the plan says the clock cut its work. A time limit below the
fixed work's estimate cannot be kept at all: such a request is refused at once
(``time_limit_too_small``, naming the least limit that fits), never planned past its limit.
"""

from __future__ import annotations

import os
from typing import Any

from planner.core._jit import interpreted
from planner.core.budget import FIXED_SECONDS_PER_BUFFER
from planner.core.clock import deadline, now, watching
from planner.core.csvio import load_request, with_overrides
from planner.core.errors import InternalError, RequestError
from planner.core.install import install_hint
from planner.core.io import parse_plan, parse_request
from planner.core.models import (
    DEFAULT_MAX_BUFFERS,
    ParetoPoint,
    Plan,
    PlanRequest,
    ValidationReport,
)
from planner.pipeline.assembly import assemble
from planner.pipeline.checks import checked
from planner.pipeline.ground import build_ground
from planner.pipeline.outcome import Outcome, Routed
from planner.pipeline.straight import route_straight
from planner.solvers import registry
from planner.solvers.registry import SolverChoice
from planner.validators import validate_plan

__all__ = ["INTERPRETED_MAX_BUFFERS", "plan", "validate"]

# Up to this many buffers, kernels run interpreted while this process has loaded no compiled
# kernel (``planner.core._jit``): a few milliseconds at this size, against a few hundred to
# load numba and the compiled code.
INTERPRETED_MAX_BUFFERS = 64


def validate(
    request: PlanRequest | dict[str, Any] | str | bytes,
    plan: Plan | dict[str, Any] | str | bytes,
) -> ValidationReport:
    """The static check (docs/design.md, Validation): every violation of ``plan`` for
    ``request``. Raises ``InternalError`` when the process runs out of memory."""
    try:
        return validate_plan(parse_request(request), parse_plan(plan))
    except MemoryError as exc:
        raise InternalError(f"out of memory while validating: {exc or 'no detail'}") from exc


def plan(
    request: PlanRequest | dict[str, Any] | str | bytes | os.PathLike[str],
    *,
    max_buffers: int = DEFAULT_MAX_BUFFERS,
    capacity: int | None = None,
    target: str | None = None,
    sync: str | None = None,
    solver: str | None = None,
    time_limit: float | None = None,
) -> Plan:
    """Plan a request (a model, a dict, JSON text, or the path of a JSON or MiniMalloc CSV
    file, as a string or a path); the result has passed the static validator. The keywords
    replace the request's fields as the command line's flags do. Raises ``RequestError``, and
    ``InternalError`` when the process runs out of memory.

    ``options.time_limit`` bounds the whole call, parsing and the static check included
    (see the module docstring)."""
    began = now()
    if isinstance(request, os.PathLike) or (
        isinstance(request, str) and not request.lstrip().startswith("{")
    ):
        request = load_request(os.fspath(request), max_buffers=max_buffers)
    if (capacity, target, sync, solver, time_limit) != (None,) * 5:
        request = with_overrides(
            parse_request(request, max_buffers=max_buffers),
            capacity=capacity,
            target=target,
            sync=sync,
            solver=solver,
            time_limit=time_limit,
        )
    try:
        with watching() as cuts:
            result = _plan(request, max_buffers, began)
    except MemoryError as exc:
        raise InternalError(f"out of memory while planning: {exc or 'no detail'}") from exc
    if not cuts.cut:
        return result
    # A plan proved, or within its tolerance, stopped for that reason whatever the clock did.
    stopped = "time" if result.solver.stopped == "budget" else result.solver.stopped
    return result.model_copy(
        update={
            "solver": result.solver.model_copy(update={"cut_by_clock": True, "stopped": stopped})
        }
    )


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
    if req.rings:
        # Rings: the depths are chosen by planning requests without rings (their modules
        # load with the first such request).
        from planner.pipeline.rings import plan_rings

        return checked(req, plan_rings(req, lambda r: _plan(r, max_buffers, began)))
    choice = registry.lookup(req.options.solver)
    if registry.unavailable(choice.name):
        raise RequestError.field(
            ("options", "solver"),
            f"solver {choice.name!r} is not installed: {install_hint('exact')}",
            "solver_unavailable",
            choice.name,
        )
    # Compiled kernels load on their first call in a process, with the clock paused; until
    # then a small request's kernels run as the Python they are written in, with the same
    # results (planner.core._jit), so it needs no compiled code at all.
    small = len(req.buffers) <= INTERPRETED_MAX_BUFFERS
    with deadline(max(0.0, limit - fixed), since=began), interpreted(small):
        routed = _route(req, choice, max(0.0, 1.0 - fixed / limit))
    result = assemble(req, routed.chosen)
    if req.options.pareto:
        front = [
            ParetoPoint(
                arena_bytes=o.arena,
                new_barriers=o.new_barriers,
                plan=result if o is routed.chosen else checked(req, assemble(req, o)),
            )
            for o in routed.front
        ]
        result = result.model_copy(update={"pareto": front})
    if req.options.overflow == "spill" and result.status in ("infeasible", "unknown"):
        result = _spilled(req, result)
    return checked(req, result)


def _route(req: PlanRequest, choice: SolverChoice, optional_share: float) -> Routed:
    """The request's outcome, by the route its shape takes (docs/architecture.md): the
    straight-line portfolio on intervals, or the program routes (their modules load with
    the first such request). Every route plans on the one ground resolved here."""
    ground = build_ground(req, choice, optional_share)
    if ground.route == "partitions":
        # Warp-specialised partitions: planned on their happens-before order.
        from planner.pipeline.partitioned import plan_partitioned

        return _alone(plan_partitioned(ground))
    if ground.route == "cluster":
        from planner.pipeline.clusters import plan_clustered  # cluster barriers besides

        return _alone(plan_clustered(ground))
    if ground.route == "program":
        # Loops, branches, ranges or asynchronous agents: planned on the unrolled program.
        from planner.pipeline.unrolled import plan_unrolled

        return _alone(plan_unrolled(ground))
    return route_straight(ground)


def _alone(outcome: Outcome) -> Routed:
    """A route that keeps one plan: the front is that plan."""
    return Routed(outcome, [outcome])


def _spilled(req: PlanRequest, base: Plan) -> Plan:
    # Spilling (and the program analysis it runs) loads with the first request that spills.
    from planner.pipeline.spill import plan_with_spill

    return plan_with_spill(req, base, plan)
