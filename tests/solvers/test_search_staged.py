"""The portfolio's decision at a capacity: MiniMalloc's published orders first, alone, on
``FIRST_NODES_PER_BUFFER`` nodes a buffer each; the whole portfolio, the published orders on
a full share and the others on a fraction of one, only where they leave it undecided."""

from __future__ import annotations

from planner.core.graph import build_graph
from planner.families import CAPACITY, TRAINING_SEED, family_instance
from planner.solvers._search_kernel import FOUND
from planner.solvers.search import (
    FIRST_NODES_PER_BUFFER,
    MINIMALLOC_ORDERS,
    _decide,
    _decide_staged,
    _members,
    _Portfolio,
    _published,
    _weights,
)
from tests.support.bruteforce import assert_valid_offsets

NODES = 200_000


def test_a_capacity_the_published_orders_decide_quickly_costs_only_their_nodes() -> None:
    request = family_instance("random-narrow", 330, TRAINING_SEED).request
    g = build_graph(request, "none")
    portfolio = _Portfolio(g)
    quick = FIRST_NODES_PER_BUFFER * g.n
    assert any(_decide(m, CAPACITY, quick)[0] == FOUND for m in portfolio.first)
    status, offsets, used = _decide_staged(portfolio, CAPACITY, NODES)
    assert status == FOUND
    assert_valid_offsets(request, g, offsets)
    assert used <= quick * len(MINIMALLOC_ORDERS)
    # The rest of the portfolio was never needed, so never built.
    assert portfolio._rest is None


def test_where_the_published_orders_are_slow_the_whole_portfolio_decides() -> None:
    request = family_instance("mixed", 441, TRAINING_SEED + 102).request
    g = build_graph(request, "none")
    published = [m for m in _members(g) if _published(m)]
    assert len(published) == len(MINIMALLOC_ORDERS)
    # Not one of them decides even on every node the race could give it.
    assert all(_decide(m, CAPACITY, NODES // len(published))[0] != FOUND for m in published)
    status, offsets, _ = _decide_staged(_Portfolio(g), CAPACITY, NODES)
    assert status == FOUND
    assert_valid_offsets(request, g, offsets)


def test_the_published_orders_take_a_full_share_and_the_others_less() -> None:
    g = build_graph(family_instance("guillotine", 200, TRAINING_SEED).request, "none")
    members = _members(g)
    weights = _weights(members)
    assert [w for m, w in zip(members, weights, strict=True) if _published(m)] == [0, 0, 0]
    assert all(w > 0 for m, w in zip(members, weights, strict=True) if not _published(m))
