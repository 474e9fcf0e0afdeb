"""Gap filling on the segment tree: the same offsets as the neighbour lists, valid plans."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings

import planner
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.generate import model_request, random_kernel, random_request
from planner.solvers import greedy
from planner.solvers._place import SHORT_SORT, place, sort_keys
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
    assert names == greedy._distinct(g, list(greedy.TREE_PORTFOLIO))
    assert "size-stable/first-fit" in names  # its order differs from size's here
    sweep = dict(result.tried)["start/first-fit"]
    assert result.plan_arena <= sweep
    assert result.plan_arena == min(arena for _, arena in result.tried)
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
    assert sorted(names) == sorted(
        {*greedy.HEURISTICS, greedy.MODEL_HEURISTIC, *greedy.STABLE_FIRST_FITS}
    )
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


def test_stable_orders_keep_ties_in_request_order() -> None:
    g = build_graph(model_request(2500, seed=3))
    for name in ("size-stable", "length-stable", "area-stable", "degree-stable"):
        order = greedy.ordering_of(name)(g)
        assert sorted(order.tolist()) == list(range(g.n))
    order = greedy.ordering_of("size-stable")(g)
    sizes = g.size[order]
    assert (np.diff(sizes) <= 0).all()
    for size in np.unique(sizes):
        tied = order[sizes == size]
        assert (np.diff(tied) > 0).all()  # equal sizes: the request's order
    big = np.iinfo(np.int64).max
    product = greedy._product(np.asarray([3, big // 2, 0]), np.asarray([4, 3, big]))
    assert product.tolist() == [12, big, 0]


def test_dense_graphs_give_best_fits_only_what_the_first_fits_leave() -> None:
    g = build_graph(model_request(5000, seed=0))
    assert greedy.dense(g)
    names = greedy.default_heuristics(g)
    first_fits = [n for n in names if n.endswith("/first-fit")]
    total = sum(greedy.cost(g, n) for n in first_fits)
    short = greedy.affordable(g, names, total)
    assert short == first_fits  # every first fit, no best fit
    long = greedy.affordable(g, names, 100 * total)
    assert set(first_fits) < set(long)  # a longer limit buys best fits too
    assert any(n.endswith("/best-fit") for n in long)


def _tied_model(seed: int) -> PlanRequest:
    """A model-like request with sizes rounded up to powers of two (many ties) in a shuffled
    order, so orders that break ties differently place differently."""
    request = model_request(5000, seed=seed)
    rng = random.Random(seed)
    buffers = [
        b.model_copy(update={"size": 1 << (int(b.size) - 1).bit_length()}) for b in request.buffers
    ]
    rng.shuffle(buffers)
    return request.model_copy(update={"buffers": buffers})


# Each of OmniMalloc's greedy_by_* orders and ours that places as it does.
OMNI_ORDERS = {
    "size-stable": "greedy_by_size",
    "length-stable": "greedy_by_duration",
    "area-stable": "greedy_by_area",
    "degree-stable": "greedy_by_conflict",
    "degree-size-stable": "greedy_by_conflict_size",
    "input": "greedy",
}


def test_dense_portfolio_is_never_above_omnimallocs_omni() -> None:
    omnimalloc = pytest.importorskip("omnimalloc")
    request = _tied_model(1)
    g = build_graph(request)
    assert greedy.dense(g)
    allocations = [
        omnimalloc.Allocation(i, int(g.size[i]), int(g.start[i]), int(g.occupied_end[i]))
        for i in range(g.n)
    ]

    def theirs(name: str) -> int:
        allocator = type(omnimalloc.allocators.BaseAllocator.resolve(name))()
        placed = omnimalloc.allocate(allocations, allocator=allocator)
        return max(int(a.offset) + int(a.size) for a in placed)

    for ours, name in OMNI_ORDERS.items():
        offsets = greedy.run(g, f"{ours}/first-fit")
        assert_valid_offsets(request, g, offsets)
        assert greedy.arena_of(g, offsets) == theirs(name), ours
    result = greedy.portfolio(g, seconds=5.0)
    assert_valid_offsets(request, g, result.offsets)
    assert result.plan_arena <= theirs("omni")


@pytest.mark.parametrize("m", [0, 1, 2, 7, SHORT_SORT, SHORT_SORT + 1, 3 * SHORT_SORT])
def test_sort_keys_sorts_the_first_keys_in_place(m: int) -> None:
    # Insertion up to SHORT_SORT keys, the general sort above: both sort the first m keys
    # (with repeats) and leave the rest of the scratch untouched.
    rng = np.random.default_rng(m)
    key = rng.integers(-50, 50, size=m + 5).astype(np.int64)
    tail = key[m:].copy()
    expected = np.sort(key[:m])
    sort_keys(key, m)
    assert np.array_equal(key[:m], expected)
    assert np.array_equal(key[m:], tail)
