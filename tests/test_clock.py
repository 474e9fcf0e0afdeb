"""The clock caps exact methods at the request's deadline, not at their own share."""

from __future__ import annotations

import time
from functools import partial

from planner.core.clock import deadline, wall_limit
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.solvers.search import solve_search

from .bruteforce import assert_valid_offsets, brute_force

STAIRS = PlanRequest.model_validate(
    {
        "options": {"sync": "none"},
        "buffers": [
            {"id": "P", "size": 5, "start": 4, "end": 6},
            {"id": "Q", "size": 3, "start": 1, "end": 3},
            {"id": "d", "size": 3, "start": 2, "end": 4},
            {"id": "e", "size": 2, "start": 3, "end": 6},
            {"id": "g", "size": 10, "start": 5, "end": 7},
        ],
    }
)


def test_wall_limit_is_the_share_without_a_deadline_and_what_is_left_with_one() -> None:
    assert wall_limit(0.25) == 0.25
    with deadline(30.0):
        left = wall_limit(0.25)
        assert 29.0 < left <= 30.0
        with deadline(0.0):
            time.sleep(0.001)
            assert wall_limit(0.25) == 0.0  # never negative
        assert 29.0 < wall_limit(0.25) <= 30.0
    assert wall_limit(0.25) == 0.25


def test_a_tiny_share_runs_its_node_budget_within_the_deadline() -> None:
    g = build_graph(STAIRS, "none")
    search = partial(solve_search, g, capacity=None, lower_bound=g.lower_bound.bytes, hint=None)
    # By its own share of a nanosecond the clock stops the search before it starts...
    alone = search(time_limit=1e-9, nodes=1_000_000)
    assert alone.offsets is None
    assert not alone.proved_optimal
    # ...while under a request's deadline the node budget decides, the same every time.
    with deadline(30.0):
        first = search(time_limit=1e-9, nodes=1_000_000)
        again = search(time_limit=1e-9, nodes=1_000_000)
    assert first.proved_optimal
    assert first.arena_bytes == brute_force(g)
    assert first.offsets is not None
    assert again.offsets is not None
    assert first.offsets.tolist() == again.offsets.tolist()
    assert_valid_offsets(STAIRS, g, first.offsets)
