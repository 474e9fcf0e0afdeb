"""The search's first try at the bound, where the portfolio's first heuristic misses it: a
plan met there ends the plan without the rest of the portfolio; where it is not met, the plan
is the one the portfolio and the exact methods give without it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import planner
import planner.solvers.auto as auto
import planner.solvers.search as search
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import Plan, PlanRequest
from planner.families import CAPACITY, CHECK_SEED, family_instance
from planner.generate import random_request
from planner.solvers._search_kernel import FOUND
from planner.solvers.solution import Solution
from tests.support.bruteforce import assert_valid_offsets

pytestmark = pytest.mark.slow


def _request(family: str, buffers: int, seed: int) -> PlanRequest:
    request = family_instance(family, buffers, seed).request
    options = request.options.model_copy(update={"time_limit": 10.0})
    return request.model_copy(update={"options": options})


def _planned(request: PlanRequest) -> Plan:
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return plan


def test_a_plan_at_the_bound_from_the_first_try_skips_the_rest_of_the_portfolio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = _request("random-narrow", 330, CHECK_SEED + 41)
    plan = _planned(request)
    assert plan.status == "optimal"
    assert plan.arena_bytes == CAPACITY
    # One heuristic, then the search: the other heuristics never ran.
    names = [t.name for t in plan.solver.tried]
    assert len(names) == 2, names
    assert names[0].startswith("greedy:")
    assert names[1] == "exact:search"
    assert plan.solver.name == "exact:search"
    # Without the first try the same arena comes from the whole portfolio and the search.
    monkeypatch.setattr(auto, "FIRST_TRY_SHARE", 0.0)
    without = _planned(request)
    assert without.arena_bytes == plan.arena_bytes
    assert without.status == "optimal"
    assert len(without.solver.tried) > len(plan.solver.tried)


def test_a_first_heuristic_at_the_bound_needs_no_search() -> None:
    request = random_request(200, seed=CHECK_SEED + 3, sync="none")
    plan = _planned(request)
    assert plan.status == "optimal"
    assert [t.name for t in plan.solver.tried] == [plan.solver.name]
    assert plan.solver.name.startswith("greedy:")


def test_the_first_try_stays_out_where_it_costs_more_than_its_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = _request("random-narrow", 330, CHECK_SEED + 41)
    # A share below one try's nodes at this time limit: the portfolio runs as without it.
    monkeypatch.setattr(auto, "FIRST_TRY_SHARE", 1e-6)
    plan = _planned(request)
    assert len(plan.solver.tried) > 2


def _first_try(g: InterferenceGraph, nodes: int) -> Solution:
    """The search's first try alone, at the capacity, within ``nodes``."""
    return search.solve_search(
        g,
        capacity=CAPACITY,
        lower_bound=CAPACITY,
        hint=None,
        time_limit=10.0,
        nodes=nodes,
        first_try=True,
    )


def test_the_banded_twins_decide_in_the_first_try_where_the_published_orders_run_out() -> None:
    # A generated instance (the first of its family at these seeds) whose published orders
    # run their first try out of nodes at the bound; their banded twins, on the same few
    # nodes a buffer each, find a plan there.
    request = _request("random-wide", 350, CHECK_SEED + 100)
    g = build_graph(request, "none")
    both = search.first_try_nodes(g)
    published = search.first_try_nodes(g, both - 1)
    assert published == both // 2 > 0
    alone = _first_try(g, published)
    assert not alone.proved_optimal
    g = build_graph(request, "none")
    tried = _first_try(g, both)
    assert tried.proved_optimal
    assert tried.arena_bytes == CAPACITY
    assert tried.offsets is not None
    assert_valid_offsets(request, g, tried.offsets)
    # The planner's answer is that first try's: one heuristic, then the search.
    plan = _planned(request)
    assert plan.arena_bytes == CAPACITY
    assert [t.name for t in plan.solver.tried][1:] == ["exact:search"]


def test_rounds_skip_members_that_cannot_beat_a_plan_found_and_answer_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = build_graph(family_instance("random-narrow", 322, CHECK_SEED + 13).request, "none")
    portfolio = search._Portfolio(g)
    first = portfolio.first
    quick = search.first_try_nodes(g)
    raced = search._decide_all(first, CAPACITY, quick, parallel=True)
    calls: list[int] = []
    real = search._decide

    def counted(*args: object, **kwargs: object) -> tuple[int, np.ndarray, int]:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(result[0])
        return result

    monkeypatch.setattr(search, "_decide", counted)
    rounds = search._decide_all(first, CAPACITY, quick, parallel=False)
    assert rounds[0] == raced[0] == FOUND
    assert rounds[2] == raced[2]
    assert np.array_equal(rounds[1], raced[1])
    # The first order finds a plan in one node a buffer, which no later order can beat:
    # they never run.
    assert calls == [FOUND]


def _searched(request: PlanRequest, g: InterferenceGraph) -> Solution:
    result = search.solve_search(
        g, capacity=CAPACITY, lower_bound=CAPACITY, hint=None, time_limit=10.0
    )
    if result.offsets is not None:
        assert_valid_offsets(request, g, result.offsets)
    return result


def test_a_search_after_a_first_try_out_of_nodes_does_not_decide_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first generated instance whose first try runs every published order out of nodes.
    for seed in range(CHECK_SEED + 60, CHECK_SEED + 90):
        request = _request("random-wide", 400, seed)
        g = build_graph(request, "none")
        nodes = search.first_try_nodes(g)
        tried = _first_try(g, nodes)
        if tried.offsets is not None:
            assert_valid_offsets(request, g, tried.offsets)
        if not tried.proved_optimal:
            break
    assert g.memo, "no drawn instance left its first try out of nodes"
    decided: list[tuple[int, int]] = []  # (members, capacity) of each decision
    real = search._decide_all

    def counted(
        insts: list[search._Member], capacity: int, *args: Any, **kwargs: Any
    ) -> tuple[int, np.ndarray, int]:
        decided.append((len(insts), capacity))
        return real(insts, capacity, *args, **kwargs)

    monkeypatch.setattr(search, "_decide_all", counted)
    after = _searched(request, g)
    # The published orders alone were not asked at the capacity again: the race came first.
    first = len(search.MINIMALLOC_ORDERS)
    assert decided
    assert decided[0][1] == CAPACITY
    assert decided[0][0] > first
    assert not g.memo  # taken up
    # The same search as one that decides them again, on a graph without the memo.
    start = len(decided)
    again = _searched(request, build_graph(request, "none"))
    assert decided[start] == (first, CAPACITY)
    twins = len(search._Portfolio(g).twins)
    assert twins == first  # this graph has them: they go next, on their own
    assert decided[start + 1] == (twins, CAPACITY)
    assert after.arena_bytes == again.arena_bytes
    assert after.bound == again.bound
    assert np.array_equal(np.asarray(after.offsets), np.asarray(again.offsets))


def test_the_published_orders_are_built_as_read_and_equal_those_built_at_once() -> None:
    request = _request("random-wide", 320, CHECK_SEED + 43)
    g = build_graph(request, "none")
    portfolio = search._Portfolio(g)
    eager = search._instances(g, search.MINIMALLOC_ORDERS)
    assert len(portfolio.first) == len(eager) == 3
    assert not portfolio.first._built  # nothing ranked before a decision reads it
    last = portfolio.first[-1]
    assert list(portfolio.first._built) == [2]
    for lazy, built in zip([*portfolio.first], eager, strict=True):
        assert isinstance(lazy, search._Instance)
        for field in lazy._fields:
            assert np.array_equal(getattr(lazy, field), getattr(built, field)), field
    tail = portfolio.first[1:]
    assert len(tail) == 2
    assert tail[0] is portfolio.first[1]
    assert tail[1] is last
    assert portfolio.first[2] is last  # built once
    with pytest.raises(IndexError):
        portfolio.first[3]


def _traced(
    monkeypatch: pytest.MonkeyPatch, request: PlanRequest
) -> tuple[Plan, list[str], list[int], int]:
    """The plan of ``request`` (every kernel loaded first), the orders ranked for it, the
    node budgets the search kernel was called on and how many times the members' shared
    arrays were built."""
    _planned(request)  # every kernel of the plan loaded
    ranked: list[str] = []
    kernel_calls: list[int] = []
    built: list[int] = []
    real_ranked, real_decide, real_common = search._by_rank, search._decide, search._Common.of

    def ranking(g: InterferenceGraph, keys: Any, order: str) -> Any:
        ranked.append(order)
        return real_ranked(g, keys, order)

    def common(g: InterferenceGraph, *args: Any) -> Any:
        built.append(g.n)
        return real_common(g, *args)

    def deciding(inst: search._Member, capacity: int, nodes: int, *args: Any) -> Any:
        kernel_calls.append(nodes)
        return real_decide(inst, capacity, nodes, *args)

    monkeypatch.setattr(search, "_by_rank", ranking)
    monkeypatch.setattr(search, "_decide", deciding)
    monkeypatch.setattr(search._Common, "of", staticmethod(common))
    return _planned(request), ranked, kernel_calls, len(built)


FIRST_TRY_NODES = search.FIRST_NODES_PER_BUFFER * 330  # WAT's search on these requests


@pytest.mark.parametrize(
    ("seed", "ranked_orders", "nodes", "built"),
    [
        # First fit misses the bound in each published order; WAT's search meets it, once,
        # on the members' arrays built once, WAT's ranking not computed again.
        (CHECK_SEED + 31, list(search.MINIMALLOC_ORDERS), [FIRST_TRY_NODES], 1),
        # WAT's first fit misses it, TAW's meets it: TWA is never ranked, no search runs, no
        # member's arrays are built.
        (CHECK_SEED + 41, ["WAT", "TAW"], [], 0),
    ],
)
def test_the_first_try_ranks_and_searches_only_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
    seed: int,
    ranked_orders: list[str],
    nodes: list[int],
    built: int,
) -> None:
    request = _request("random-narrow", 330, seed)
    plan, ranked, kernel_calls, commons = _traced(monkeypatch, request)
    assert plan.status == "optimal"
    assert plan.arena_bytes == CAPACITY
    assert plan.solver.name == "exact:search"
    assert ranked == ranked_orders
    # A kernel already loaded is not called on no node first.
    assert kernel_calls == nodes
    assert commons == built
