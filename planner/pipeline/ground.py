"""What every planning route shares about one request: the route its shape takes, and what
the facade resolves once for it (``build_ground``) before any route plans."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from planner.core.models import Diagnostic, Footprint, PlanRequest
from planner.core.models.request import SyncPolicy
from planner.core.patterns import block_slice
from planner.solvers.edges import EDGE_HEURISTICS
from planner.solvers.registry import SolverChoice

__all__ = ["Ground", "Route", "build_ground", "planned_sizes", "route_of"]

# straight: intervals; program: the unrolled program (loops, branches, ranges, asynchronous
# agents); cluster: the program with cluster barriers besides; partitions: the happens-before
# order of warp-specialised partitions (on every path where there are loops or branches)
Route = Literal["straight", "program", "cluster", "partitions"]


@dataclass(frozen=True)
class Ground:
    """What every route planning one request shares; a route's own work (the straight-line
    graph and bounds, the unrolled program, the partition verdicts) hangs off it."""

    req: PlanRequest
    route: Route
    solver: SolverChoice  # ``options.solver`` resolved, once per request
    heuristics: list[str] | None  # the fits asked for that the route can run; None: its default
    notes: list[Diagnostic]  # about the request as planned (a solver the route cannot run)
    sizes: list[int]  # bytes planned per buffer: declared, or the per-block footprint
    footprints: list[Footprint]
    existing: list[int]  # the request's barriers, sorted
    sync: SyncPolicy  # the mode planned under: "insert" allowing no new barrier is "existing"
    pair_model: bool  # CP-SAT on explicit conflict pairs may close a gap the fits leave
    optional_share: float  # of each attempt's time share: what the fixed work leaves (0..1)

    @property
    def origin(self) -> Literal["inserted", "required"]:
        """How the plan lists the syncs it adds: inserted (planned under "insert") or
        required."""
        return "inserted" if self.sync == "insert" else "required"

    def allowed(self, points: Iterable[int], taken: Iterable[int]) -> list[int]:
        """Points where a new barrier may go: the request's ``barrier_candidates``, else
        ``points`` (where one can make a difference on the route), less ``taken``."""
        pool = self.req.options.barrier_candidates
        return sorted(set(points if pool is None else pool) - set(taken))

    def on(self, req: PlanRequest) -> Ground:
        """The ground of another form of the same kernel (lowered, with added syncs, or a
        view with more barriers), on the same route with the same solver."""
        return build_ground(req, self.solver, self.optional_share, self.route)


def route_of(req: PlanRequest) -> Route:
    """The route a request's shape takes (docs/architecture.md)."""
    if req.partitions:
        return "partitions"
    if req.cluster is not None:
        return "cluster"
    if req.has_control_flow:
        return "program"
    return "straight"


def build_ground(
    req: PlanRequest, solver: SolverChoice, optional_share: float, route: Route | None = None
) -> Ground:
    """The ground of ``req`` on ``route`` (default: the one its shape takes)."""
    route = route_of(req) if route is None else route
    sizes, footprints = planned_sizes(req)
    heuristics, notes = _fits(solver, route)
    sync = req.options.sync
    return Ground(
        req=req,
        route=route,
        solver=solver,
        heuristics=heuristics,
        notes=notes,
        sizes=sizes,
        footprints=footprints,
        existing=sorted(set(req.barriers)),
        sync="existing" if sync == "insert" and req.options.max_new_barriers == 0 else sync,
        pair_model=solver.pair_model,
        optional_share=optional_share,
    )


def planned_sizes(req: PlanRequest) -> tuple[list[int], list[Footprint]]:
    """Bytes planned per buffer (request order): declared, or with ``options.shrink`` the
    per-block footprint; and the footprints that are smaller than the declaration."""
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
    return sizes, footprints


# What the routes on explicit conflict pairs plan on, in a solver_not_applicable note.
_PLANNED_ON: dict[Route, str] = {
    "program": "loops, branches or ranges were planned by the fits on the unrolled program's",
    "cluster": "loops, branches or ranges were planned by the fits on the unrolled program's",
    "partitions": "partitions were planned by the fits on their happens-before order's",
}


def _fits(solver: SolverChoice, route: Route) -> tuple[list[str] | None, list[Diagnostic]]:
    """The fits a solver asks for that the route can run, and a diagnostic where it asks
    for what the route cannot run. Straight: the solver's heuristics (those that apply to
    the request's graph are kept by ``context.build_context``); program, cluster and
    partitions: a fit of the explicit conflict graph, else the default fits."""
    if route == "straight":
        return solver.heuristics, []
    name = solver.name.removeprefix("greedy:")
    if name in EDGE_HEURISTICS:
        return [name], []
    if name in ("auto", "greedy", "exact", "cpsat"):
        return None, []
    note = Diagnostic(
        level="warning",
        code="solver_not_applicable",
        message=f"solver {solver.name!r} plans straight-line lifetimes; this "
        f"request's {_PLANNED_ON[route]} conflict graph"
        + (" and CP-SAT on its pairs" if name == "search" else ""),
    )
    return None, [note]
