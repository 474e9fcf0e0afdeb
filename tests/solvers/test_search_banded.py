"""The published orders' banded twins: the same ranking, with a sub-problem started wherever
the buffer just placed was the last unplaced one across any boundary (not only where some
buffer ends, as MiniMalloc's sections do), ranked afresh and placed from the lowest floor.
They search other nodes than their orders, and the portfolio races them on their order's
full share on graphs of the challenging family's size, on a small share on smaller ones."""

from __future__ import annotations

import numpy as np

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.families import CAPACITY, family_instance
from planner.solvers._search_kernel import FOUND, OUT_OF_NODES
from planner.solvers.search import (
    BREADTH_SHARE,
    HALF_SHARE,
    TWIN_FULL_MIN,
    _Banded,
    _decide,
    _decide_all,
    _decide_staged,
    _Instance,
    _members,
    _Portfolio,
    _weights,
    first_try_nodes,
    solve_search,
)
from tests.support.bruteforce import assert_valid_offsets

# At its bound (the capacity): every published order runs out of nodes far beyond what its
# banded twin needs; one of the twins decides within a few nodes a buffer.
STUCK = ("random-wide", 349, 15_701)
NODES = 40_000


def _stuck() -> tuple[PlanRequest, InterferenceGraph]:
    request = family_instance(*STUCK).request
    return request, build_graph(request, "none")


def test_a_banded_twin_decides_where_its_order_runs_out() -> None:
    request, g = _stuck()
    portfolio = _Portfolio(g)
    twins = [m for m in portfolio.rest if isinstance(m, _Banded)]
    assert len(twins) == len(portfolio.first)
    for order in portfolio.first:
        assert _decide(order, CAPACITY, NODES)[0] == OUT_OF_NODES
    decided = [_decide(twin, CAPACITY, 4 * g.n) for twin in twins]
    assert any(status == FOUND for status, _, _ in decided)
    for status, offsets, _ in decided:
        if status == FOUND:
            assert int((offsets + g.size).max()) <= CAPACITY
            assert_valid_offsets(request, g, offsets)


def test_the_portfolio_decides_it_and_would_not_without_the_twins() -> None:
    request, g = _stuck()
    members = _members(g)
    without = [m for m in members if not isinstance(m, _Banded)]
    assert _decide_all(without, CAPACITY, NODES, parallel=False)[0] == OUT_OF_NODES
    status, offsets, used = _decide_staged(_Portfolio(g), CAPACITY, NODES)
    assert status == FOUND
    assert used < NODES // 2
    assert_valid_offsets(request, g, offsets)


def _twin_weights(g: InterferenceGraph, decision: bool) -> list[int]:
    members = _members(g)
    weights = _weights(members, decision)
    return [w for m, w in zip(members, weights, strict=True) if isinstance(m, _Banded)]


def test_deciding_the_capacity_asked_for_the_twins_of_large_graphs_race_on_a_full_share() -> None:
    _, g = _stuck()
    assert g.n > TWIN_FULL_MIN
    assert _twin_weights(g, decision=True) == [0, 0, 0]
    # Minimising below a plan, and on small graphs, half a breadth order's share.
    assert _twin_weights(g, decision=False) == [BREADTH_SHARE + HALF_SHARE] * 3
    small = build_graph(family_instance("random-wide", TWIN_FULL_MIN, STUCK[2]).request, "none")
    assert _twin_weights(small, decision=True) == [BREADTH_SHARE + HALF_SHARE] * 3


# At its bound only TAW's banded twin decides it within a few thousand nodes: on its
# order's full share the race decides it within NARROW_NODES, on an eighth of one it does
# not.
NARROW = ("random-narrow", 333, 18_018)
NARROW_NODES = 20_000


def test_a_twin_on_a_full_share_decides_what_it_could_not_on_an_eighth() -> None:
    request = family_instance(*NARROW).request
    g = build_graph(request, "none")
    members = _members(g)
    status, offsets, _ = _decide_all(members, CAPACITY, NARROW_NODES, parallel=False, decision=True)
    assert status == FOUND
    assert_valid_offsets(request, g, offsets)
    assert _decide_all(members, CAPACITY, NARROW_NODES, parallel=False)[0] == OUT_OF_NODES


def test_a_request_at_its_bound_is_decided_by_a_twin_on_a_full_share() -> None:
    # The whole search at the capacity asked for: the decision the twin wins.
    request = family_instance(*NARROW).request
    g = build_graph(request, "none")
    solution = solve_search(
        g,
        capacity=CAPACITY,
        lower_bound=CAPACITY,
        hint=None,
        time_limit=10.0,
        nodes=NARROW_NODES + first_try_nodes(g),
    )
    assert solution.proved_optimal
    assert solution.arena_bytes == CAPACITY
    assert solution.offsets is not None
    assert_valid_offsets(request, g, solution.offsets)


def test_no_twin_where_every_boundary_has_an_end() -> None:
    # Back-to-back phases: every buffer of a phase ends where the next phase starts, so the
    # twins would split exactly where their orders do and search the same nodes.
    buffers = [
        {"id": f"b{p}{k}", "size": 64 * (k + 1), "start": 4 * p, "end": 4 * p + 4}
        for p in range(20)
        for k in range(4)
    ]
    g = build_graph(PlanRequest.model_validate({"buffers": buffers}), "none")
    assert g.n > 64
    members = _members(g)
    assert not any(isinstance(m, _Banded) for m in members)
    first = members[0]
    assert isinstance(first, _Instance)
    assert np.all(first.end_at[1:-1] != 0)
