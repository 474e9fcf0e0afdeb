"""Budgets grow with the time limit: the same request with more search never gets a larger
arena, and a request the search decides within some budget stays decided with more."""

from __future__ import annotations

import pytest

from planner.core.graph import build_graph
from planner.families import CAPACITY, CHECK_SEED, family_instance
from planner.generate import random_kernel
from planner.solvers.greedy import portfolio
from planner.solvers.search import node_budget, solve_search
from tests.support.bruteforce import assert_valid_offsets

# Node budgets from a few hundred nodes (the search barely starts) to tens of thousands.
BUDGETS = (300, 1_000, 3_000, 10_000, 30_000)


@pytest.mark.parametrize("seed", range(6))
def test_more_nodes_never_give_a_larger_arena(seed: int) -> None:
    request = random_kernel(seed, max_buffers=48)
    g = build_graph(request, "none")
    hint = portfolio(g).offsets  # the pipeline's search starts from greedy's plan
    arenas = []
    for nodes in BUDGETS:
        result = solve_search(
            g,
            capacity=None,
            lower_bound=g.lower_bound.bytes,
            hint=hint,
            time_limit=60.0,
            nodes=nodes,
        )
        assert result.arena_bytes is not None
        assert_valid_offsets(request, g, result.offsets)
        arenas.append(result.arena_bytes)
    assert arenas == sorted(arenas, reverse=True), arenas


@pytest.mark.parametrize("seed", [CHECK_SEED + 1, CHECK_SEED + 3])
def test_a_capacity_decided_with_fewer_nodes_stays_decided(seed: int) -> None:
    request = family_instance("random-wide", 160, seed).request
    g = build_graph(request, "none")
    found = []
    for nodes in BUDGETS:
        result = solve_search(
            g,
            capacity=CAPACITY,
            lower_bound=g.lower_bound.bytes,
            hint=None,
            time_limit=60.0,
            nodes=nodes,
        )
        if result.offsets is not None:
            assert_valid_offsets(request, g, result.offsets)
        found.append(result.offsets is not None or result.infeasible is not None)
    assert found == sorted(found), found  # once decided, decided with every larger budget


def test_the_node_budget_is_proportional_to_the_time_limit() -> None:
    g = build_graph(family_instance("random-narrow", 300, CHECK_SEED).request, "none")
    one = node_budget(g, 1.0)
    assert abs(node_budget(g, 10.0) - 10 * one) <= 10
    assert abs(node_budget(g, 60.0) - 60 * one) <= 60


@pytest.mark.parametrize("family", ["random-wide", "random-narrow"])
def test_some_capacities_are_decided_only_with_a_longer_time_limit(family: str) -> None:
    # The nodes a time limit buys (``node_budget``): a tenth of the limit leaves the
    # capacity undecided where the whole limit decides it, and ten times more keeps it so.
    request = family_instance(family, 300, CHECK_SEED + 1).request
    g = build_graph(request, "none")
    short, long, longer = (node_budget(g, seconds) for seconds in (0.005, 0.05, 0.5))
    verdicts = []
    for nodes in (short, long, longer):
        result = solve_search(
            g,
            capacity=CAPACITY,
            lower_bound=g.lower_bound.bytes,
            hint=None,
            time_limit=60.0,
            nodes=nodes,
        )
        if result.offsets is not None:
            assert_valid_offsets(request, g, result.offsets)
            assert result.arena_bytes is not None
            assert result.arena_bytes <= CAPACITY
        verdicts.append(result.offsets is not None or result.infeasible is not None)
    assert verdicts == [False, True, True], (short, long, longer, verdicts)
