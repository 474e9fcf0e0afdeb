"""Minimisation needs no capacity: without one, a graph of more than ``DESCEND_MIN`` buffers
decides its bound on half the nodes and then steps down from the best arena, as below a
capacity, so the search improves on the greedy plan where the bound is out of reach."""

from __future__ import annotations

import pytest

from planner.core.graph import build_graph
from planner.families import TRAINING_SEED, family_instance
from planner.solvers.greedy import arena_of, portfolio
from planner.solvers.search import DESCEND_MIN, node_budget, solve_search
from tests.support.bruteforce import assert_valid_offsets

# Training-set instances whose bound the nodes of two thirds of a second leave undecided.
CASES = [
    ("guillotine", 411, TRAINING_SEED + 53),
    ("random-narrow", 411, TRAINING_SEED + 57),
    ("guillotine", 374, TRAINING_SEED + 60),
]


@pytest.mark.parametrize(("family", "buffers", "seed"), CASES)
def test_without_a_capacity_the_search_improves_on_the_greedy_plan(
    family: str, buffers: int, seed: int
) -> None:
    request = family_instance(family, buffers, seed).request
    request = request.model_copy(update={"capacity": None, "target": None})
    g = build_graph(request, "none")
    assert g.n > DESCEND_MIN
    hint = portfolio(g).plan_offsets
    result = solve_search(
        g,
        capacity=None,
        lower_bound=g.lower_bound.bytes,
        hint=hint,
        time_limit=60.0,
        nodes=node_budget(g, 2.0 / 3),
    )
    assert result.offsets is not None
    assert_valid_offsets(request, g, result.offsets)
    assert not result.proved_optimal  # the bound stays out of reach
    assert result.arena_bytes is not None
    assert result.arena_bytes < arena_of(g, hint)
