"""The ground every route plans on (planner/pipeline/ground.py): the route a request's shape
takes, the sync mode planned under, the points a new barrier may go at, and the fits a
solver name gives each route."""

from __future__ import annotations

from typing import Any

import pytest

from planner.core.io import parse_request
from planner.core.models import PlanRequest
from planner.pipeline.ground import Route, build_ground, route_of
from planner.solvers import registry
from tests.support.control_flow import tiled_loop
from tests.support.paths import ROOT


def _example(name: str) -> PlanRequest:
    return parse_request((ROOT / "examples" / f"{name}.json").read_text())


def _loop(**options: Any) -> PlanRequest:
    return tiled_loop([2, 4], **options)


@pytest.mark.parametrize(
    ("example", "route"),
    [
        ("tvm_tiled_gemm", "straight"),
        ("loop_tiled_gemm", "program"),
        ("cluster_multicast_gemm", "cluster"),
        ("ws_gemm_k_loop", "partitions"),
    ],
)
def test_each_shape_takes_its_route(example: str, route: Route) -> None:
    req = _example(example)
    assert route_of(req) == route
    assert build_ground(req, registry.lookup("auto"), 1.0).route == route


@pytest.mark.parametrize(
    ("options", "sync", "origin"),
    [
        ({"sync": "insert"}, "insert", "inserted"),
        ({"sync": "insert", "max_new_barriers": 0}, "existing", "required"),
        ({"sync": "insert", "max_new_barriers": 1}, "insert", "inserted"),
        ({"sync": "none"}, "none", "required"),
        ({"sync": "existing"}, "existing", "required"),
    ],
)
def test_insert_allowing_no_new_barrier_plans_as_existing(
    options: dict[str, Any], sync: str, origin: str
) -> None:
    g = build_ground(_loop(**options), registry.lookup("auto"), 1.0)
    assert (g.sync, g.origin) == (sync, origin)
    assert g.existing == [2, 4]


def test_allowed_points_are_the_candidates_or_the_route_s_points_less_those_taken() -> None:
    solver = registry.lookup("auto")
    anywhere = build_ground(_loop(sync="insert"), solver, 1.0)
    assert anywhere.allowed([0, 2, 3, 6], anywhere.existing) == [0, 3, 6]
    pooled = build_ground(_loop(sync="insert", barrier_candidates=[3, 4, 6]), solver, 1.0)
    assert pooled.allowed([0, 2, 3], pooled.existing) == [3, 6]
    assert pooled.allowed([0, 2, 3], [6]) == [3, 4]


def test_a_fit_of_the_conflict_graph_is_kept_on_the_program_routes() -> None:
    g = build_ground(_loop(), registry.lookup("greedy:size/best-fit"), 1.0)
    assert (g.heuristics, g.notes) == (["size/best-fit"], [])
    assert g.pair_model is False


def test_a_solver_the_program_route_cannot_run_gets_the_default_fits_and_a_note() -> None:
    g = build_ground(_loop(), registry.lookup("greedy:size/skyline"), 1.0)
    assert g.heuristics is None
    assert [d.code for d in g.notes] == ["solver_not_applicable"]
    searched = build_ground(_loop(), registry.lookup("search"), 1.0)
    assert "CP-SAT on its pairs" in searched.notes[0].message
    assert searched.pair_model is True


def test_the_straight_route_keeps_the_solver_s_heuristics() -> None:
    solver = registry.lookup("greedy:size/skyline")
    straight = build_ground(_example("tvm_tiled_gemm"), solver, 0.5)
    assert (straight.heuristics, straight.notes) == (["size/skyline"], [])
    assert straight.optional_share == 0.5


def test_the_partitions_route_keeps_a_fit_of_its_pairs_else_notes_the_default() -> None:
    req = _example("ws_gemm_k_loop")
    fit = build_ground(req, registry.lookup("greedy:area/first-fit"), 1.0)
    assert (fit.heuristics, fit.notes) == (["area/first-fit"], [])
    skyline = build_ground(req, registry.lookup("greedy:size/skyline"), 1.0)
    assert skyline.heuristics is None
    assert [d.code for d in skyline.notes] == ["solver_not_applicable"]
    assert "partitions were planned by the fits" in skyline.notes[0].message


def test_another_form_of_the_kernel_keeps_the_route_and_the_solver() -> None:
    g = build_ground(_loop(sync="insert"), registry.lookup("greedy:size/best-fit"), 0.25)
    view = g.req.model_copy(update={"barriers": [2, 3, 4]})
    other = g.on(view)
    assert (other.route, other.solver, other.optional_share) == (g.route, g.solver, 0.25)
    assert other.existing == [2, 3, 4]
    assert other.heuristics == ["size/best-fit"]
