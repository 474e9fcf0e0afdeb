"""One deterministic CP-SAT run: a single worker and a fixed seed, stopped by a budget of
deterministic time (a wall-clock cap only guards it, ``planner.core.clock``), with a stop by
that cap noted (``note_cpsat_run``)."""

from __future__ import annotations

from typing import Any

from ortools.sat.python import cp_model

from planner.solvers.exact import note_cpsat_run

__all__ = ["SEED", "deterministic_solver", "run"]

SEED = 20231  # CP-SAT's random seed: fixed, so a model solves the same way every run


def deterministic_solver(work: float, wall: float) -> cp_model.CpSolver:
    """A one-worker solver with the fixed seed, ``work`` units of deterministic time and a
    hard cap of ``wall`` seconds."""
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.num_workers = 1
    params.random_seed = SEED
    params.max_deterministic_time = work
    params.max_time_in_seconds = wall
    return solver


def run(solver: cp_model.CpSolver, model: cp_model.CpModel, callback: Any = None) -> Any:
    """``model`` solved by ``solver`` (with ``callback`` on each solution, if given); its
    status, after noting a stop by the wall-clock cap."""
    status = solver.solve(model, callback)
    note_cpsat_run(solver, status in (cp_model.OPTIMAL, cp_model.INFEASIBLE))
    return status
