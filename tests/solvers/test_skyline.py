"""The skyline kernel decides exactly, and the search portfolio needs more than one member."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.families import CAPACITY, CHECK_SEED, family_instance
from planner.solvers._search_kernel import EXHAUSTED, FOUND, OUT_OF_NODES
from planner.solvers._skyline_kernel import FEWEST, LEFTMOST, LOWEST
from planner.solvers.exact import granularity
from planner.solvers.greedy import arena_of
from planner.solvers.search import (
    ORDERS,
    SKYLINE_MIN,
    SKYLINE_ORDERS,
    _decide,
    _instance,
    _members,
    _Skyline,
    _skyline,
    solve_search,
)
from tests.support.bruteforce import assert_valid_offsets, brute_force
from tests.support.strategies import requests

VARIANTS = [
    (order, valley, reverse)
    for order in ("S", "W", "WAT")
    for valley in (FEWEST, LOWEST, LEFTMOST)
    for reverse in (False, True)
]


def _variant(g: InterferenceGraph, order: str, valley: int, reverse: bool) -> _Skyline:
    return _skyline(_instance(g, order), valley, reverse)


# Wide slack above small buffers: the waste steps up a byte at a time, so some variants
# need over 100 000 nodes to find the 138-byte optimum here.
SLACK_BUFFERS = [(1, 1, 2, 4), (54, 1, 0, 2), (59, 1, 0, 1), (23, 1, 0, 1), (1, 1, 2, 3)]
SLACK_BUFFERS += [(1, 4, 0, 4), (1, 4, 0, 1)]  # (size, alignment, start, end)
SLACK_ABOVE_SMALL_BUFFERS = PlanRequest.model_validate(
    {
        "options": {"sync": "none"},
        "buffers": [
            {"id": f"b{i}", "size": size, "alignment": align, "start": start, "end": end}
            for i, (size, align, start, end) in enumerate(SLACK_BUFFERS)
        ],
    }
)


@settings(max_examples=60, deadline=None)
@given(requests(max_buffers=7, pins=False, capacity=False, max_new=False))
@example(request=SLACK_ABOVE_SMALL_BUFFERS)
def test_every_variant_decides_exactly(request: PlanRequest) -> None:
    # Each priority, valley rule and direction finds a plan at the brute-force optimum and
    # proves one byte less impossible.
    g = build_graph(request)
    optimum = brute_force(g)
    assert optimum is not None
    for order, valley, reverse in VARIANTS:
        sky = _variant(g, order, valley, reverse)
        status, offsets, _ = _decide(sky, optimum, 1_000_000)
        assert status == FOUND, (order, valley, reverse)
        assert arena_of(g, offsets) <= optimum
        assert_valid_offsets(request, g, offsets)
        if optimum > 0:
            assert _decide(sky, optimum - 1, 1_000_000)[0] == EXHAUSTED, (order, valley, reverse)


@pytest.mark.parametrize("budget", [0, 1, 5, 50])
def test_skyline_stops_at_its_node_budget(budget: int) -> None:
    g = build_graph(family_instance("pinwheel", 101, 7).request)
    status, _, used = _decide(_variant(g, "S", FEWEST, False), CAPACITY, budget)
    assert used <= budget
    assert status in (FOUND, OUT_OF_NODES)


def test_skyline_joins_only_without_pins_and_on_large_graphs() -> None:
    tiling = family_instance("guillotine", 80, 3).request
    assert sum(isinstance(m, _Skyline) for m in _members(build_graph(tiling))) >= 4
    kernel_sized = build_graph(family_instance("guillotine", SKYLINE_MIN, 3).request)
    assert kernel_sized.n == SKYLINE_MIN
    assert not any(isinstance(m, _Skyline) for m in _members(kernel_sized))
    data = tiling.model_dump(exclude_none=True)
    data["buffers"][0]["offset"] = 0
    pinned = PlanRequest.model_validate(data)
    assert not any(isinstance(m, _Skyline) for m in _members(build_graph(pinned)))


# Tilings of the training set whose optimum is known by construction: each member of the
# portfolio alone misses one of them within ``PORTFOLIO_NODES`` nodes, the portfolio with
# that many nodes in all places every one at its optimum (its skyline members spending an
# eighth of a published order's share).
PORTFOLIO_SET = [("guillotine", 444, 1000), ("guillotine", 351, 1001), ("pinwheel", 352, 1000)]
PORTFOLIO_NODES = 20_000


@pytest.mark.slow
def test_portfolio_decides_what_no_single_member_does() -> None:
    assert len(set(ORDERS)) >= 4
    assert {"WAT", "TAW", "TWA"} <= set(ORDERS)  # MiniMalloc's published defaults
    assert len(SKYLINE_ORDERS) >= 2
    graphs = []
    for family, buffers, seed in PORTFOLIO_SET:
        assert seed != CHECK_SEED
        inst = family_instance(family, buffers, seed)
        g = build_graph(inst.request)
        graphs.append(g)
        result = solve_search(
            g,
            capacity=CAPACITY,
            lower_bound=CAPACITY,
            hint=None,
            time_limit=60.0,
            nodes=PORTFOLIO_NODES,
        )
        assert result.proved_optimal, family
        assert result.arena_bytes == inst.optimum
        assert_valid_offsets(inst.request, g, result.offsets)
    members = [_members(g) for g in graphs]
    assert len({len(m) for m in members}) == 1
    for k in range(len(members[0])):
        # Member k alone, with every node the portfolio had, misses one of them.
        assert any(_decide(m[k], CAPACITY, PORTFOLIO_NODES)[0] != FOUND for m in members), k


@pytest.mark.parametrize("family", ["guillotine", "pinwheel", "mixed", "sparse"])
def test_search_never_goes_below_a_known_optimum(family: str) -> None:
    inst = family_instance(family, 90, 11)
    g = build_graph(inst.request)
    assert inst.optimum is not None
    result = solve_search(g, capacity=None, lower_bound=1, hint=None, time_limit=30.0, nodes=40_000)
    assert result.offsets is not None
    assert result.arena_bytes is not None
    assert result.arena_bytes >= inst.optimum
    assert result.bound <= inst.optimum
    assert_valid_offsets(inst.request, g, result.offsets)
    # One step below the optimum every member proves impossible or runs out; none finds.
    below = inst.optimum - granularity(g)
    for member in _members(g):
        assert _decide(member, below, 5_000)[0] != FOUND
