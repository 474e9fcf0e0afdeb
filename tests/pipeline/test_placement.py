"""The one placement step every route places its buffers with (planner/pipeline/placement.py
``place``): on the straight line's interval graph the ground's solver, on explicit pairs the
ground's fits and CP-SAT on the pairs where the ground allows it."""

from __future__ import annotations

from typing import Any

from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.pipeline.context import build_context
from planner.pipeline.ground import Ground, build_ground
from planner.pipeline.placement import on_common_bytes, pair_graph, place
from planner.solvers import registry

# Three buffers 100 bytes each, aligned to 128: a and b live together, c after them.
BUFFERS = [
    {"id": "a", "size": 100, "start": 0, "end": 4},
    {"id": "b", "size": 100, "start": 2, "end": 6},
    {"id": "c", "size": 100, "start": 6, "end": 8},
]
APART = {(0, 1), (1, 2)}


def _ground(solver: str = "auto", **options: Any) -> Ground:
    req = PlanRequest.model_validate({"buffers": BUFFERS, "alignment": 128, "options": options})
    return build_ground(req, registry.lookup(solver), 1.0)


def _apart(g: Ground, offsets: Any, pairs: set[tuple[int, int]]) -> bool:
    return not on_common_bytes(g.sizes, offsets) & pairs


def test_pairs_of_the_ground_s_buffers_take_their_sizes_alignment_and_lifetimes() -> None:
    g = _ground()
    graph = pair_graph(g, APART)
    assert graph.size.tolist() == [100, 100, 100]
    assert graph.alignment.tolist() == [128, 128, 128]
    assert (graph.start.tolist(), graph.length.tolist()) == ([0, 2, 6], [4, 4, 2])
    spans = pair_graph(g, APART, ([1, 2, 3], [1, 1, 1]))
    assert (spans.start.tolist(), spans.length.tolist()) == ([1, 2, 3], [1, 1, 1])


def test_explicit_pairs_close_the_gap_to_the_bound_with_cp_sat_where_the_ground_allows() -> None:
    g = _ground()
    placed = place(g, APART, 200)
    assert _apart(g, placed.plan_offsets, APART)
    assert placed.plan_arena == 228  # b at 128: the alignment leaves 28 bytes over the bound
    assert placed.tried[-1][0] == "exact:cpsat-pairs"
    assert (placed.bound, placed.proved_optimal) == (228, True)
    fits_only = place(g, APART, 200, exact=False)
    assert "exact:cpsat-pairs" not in [name for name, _ in fits_only.tried]
    assert (fits_only.bound, fits_only.proved_optimal) == (200, False)


def test_explicit_pairs_run_the_ground_s_fit_or_the_fits_asked_for() -> None:
    g = _ground("greedy:size/first-fit")
    assert g.pair_model is False
    placed = place(g, APART, 200)
    assert [name for name, _ in placed.tried] == ["greedy:size/first-fit"]
    other = place(g, APART, 200, fits=["length/best-fit"])
    assert [name for name, _ in other.tried] == ["greedy:length/best-fit"]
    assert _apart(g, other.plan_offsets, APART)


def test_the_interval_graph_is_placed_by_the_ground_s_solver() -> None:
    ctx = build_context(_ground("greedy:size/first-fit"))
    graph = build_graph(ctx.req, sizes=ctx.sizes)
    placed = place(ctx, graph, seconds=1.0)
    assert [name for name, _ in placed.tried] == ["greedy:size/first-fit"]
    assert _apart(ctx, placed.plan_offsets, {(0, 1)})
    assert placed.plan_arena == 228
