"""Gap filling on the segment tree: the same offsets as the neighbour lists, valid plans."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings

import planner
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.generate import model_request, random_kernel, random_request
from planner.solvers import greedy
from planner.solvers._place import place
from planner.solvers._tree import place_tree
from tests.support.bruteforce import assert_valid_offsets
from tests.support.strategies import requests

ORDERS = ("size", "length", "area", "start", "degree", "input", "degree-size")


def _both(g: InterferenceGraph, ordering: str, best_fit: bool) -> tuple[np.ndarray, np.ndarray]:
    order = greedy.ordering_of(ordering)(g)
    pinned = g.pinned[order] >= 0
    order = np.concatenate([order[pinned], order[~pinned]])
    pos, hi, back_ptr, back = g.neighbours
    lists = place(
        order, g.size, g.alignment, g.pinned, pos, g.by_start, hi, back_ptr, back, best_fit, 0
    )
    bits = greedy._offset_bits(g)
    tree = place_tree(order, g.start, g.occupied_end, g.size, g.alignment, g.pinned, best_fit, bits)
    return lists, tree


@pytest.mark.parametrize("ordering", ORDERS)
@pytest.mark.parametrize("best_fit", [True, False])
@settings(max_examples=30, deadline=None)
@given(request=requests(max_buffers=14, capacity=False, max_new=False))
def test_tree_places_as_the_neighbour_lists(
    ordering: str, best_fit: bool, request: PlanRequest
) -> None:
    g = build_graph(request)
    lists, tree = _both(g, ordering, best_fit)
    assert (lists == tree).all()
    assert_valid_offsets(request, g, tree)


@pytest.mark.parametrize(
    "request_",
    [
        random_request(1500, overlap=0.05, seed=3),
        random_kernel(5, max_buffers=64),
        model_request(1200, seed=2),
    ],
    ids=["random", "kernel", "model"],
)
@pytest.mark.parametrize("best_fit", [True, False])
def test_tree_places_as_the_lists_on_larger_requests(request_: PlanRequest, best_fit: bool) -> None:
    g = build_graph(request_)
    # Pin every 7th buffer where the lists' first fit put it: pins go first in both kernels.
    first, _ = _both(g, "input", False)
    pins = np.where(np.arange(g.n) % 7 == 0, first, -1)
    for graph in (g, replace(g, pinned=pins)):
        for ordering in ("size", "start", "degree-size"):
            lists, tree = _both(graph, ordering, best_fit)
            assert (lists == tree).all(), ordering


def test_portfolio_past_the_edge_limit_keeps_the_sweep_and_improves_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = model_request(5000, seed=1)
    g = build_graph(request)
    monkeypatch.setattr(greedy, "TREE_MIN_EDGES", g.conflict_edges // 2)
    assert greedy.uses_tree(g)
    result = greedy.portfolio(g)
    names = [name for name, _ in result.tried]
    assert names == list(greedy.TREE_PORTFOLIO)
    sweep = dict(result.tried)["start/first-fit"]
    assert result.arena_bytes <= sweep
    assert result.arena_bytes == min(arena for _, arena in result.tried)
    assert_valid_offsets(request, g, result.offsets)


@pytest.mark.slow
def test_large_model_plan_is_valid_and_beats_the_sweep() -> None:
    request = model_request(20_000, seed=4)
    g = build_graph(request)
    assert greedy.uses_tree(g)  # tens of millions of conflicts: no neighbour lists
    plan = planner.plan(
        request.model_copy(
            update={"options": request.options.model_copy(update={"solver": "greedy"})}
        )
    )
    assert planner.validate(request, plan).valid
    tried = {a.name: a.arena_bytes for a in plan.solver.tried}
    assert "greedy:size/first-fit" in tried
    assert plan.arena_bytes <= tried["greedy:start/first-fit"]
    assert plan.arena_bytes >= plan.lower_bound


def test_dense_graphs_run_every_first_fit_first_on_the_tree() -> None:
    request = model_request(5000, seed=0)
    g = build_graph(request)
    assert greedy.dense(g)  # weights and nested activations: ~1600 conflicts a buffer
    names = greedy.default_heuristics(g)
    assert names[: len(greedy.DENSE_FIRST)] == list(greedy.DENSE_FIRST)
    assert sorted(names) == sorted({*greedy.HEURISTICS, greedy.MODEL_HEURISTIC})
    assert greedy.uses_tree(g, "size/first-fit")
    assert not greedy.uses_tree(g, "size/best-fit")
    sparse = build_graph(random_request(5000, seed=0))
    assert not greedy.dense(sparse)
    assert not greedy.uses_tree(sparse, "size/first-fit")  # its unions would fragment
    assert greedy.default_heuristics(sparse)[:2] == ["size/first-fit", "degree-size/first-fit"]
    offsets = greedy.run(g, "degree-size/first-fit")
    lists, tree = _both(g, "degree-size", False)
    assert (offsets == tree).all()
    assert (tree == lists).all()
    assert_valid_offsets(request, g, offsets)
