"""The branch-and-bound search agrees with brute force and keeps every constraint."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.generate import random_kernel
from planner.solvers.exact import granularity
from planner.solvers.greedy import arena_of, portfolio
from planner.solvers.search import _Instance, solve_search
from tests.support.bruteforce import assert_valid_offsets, brute_force
from tests.support.strategies import requests


def _request(buffers: list[dict[str, Any]], **extra: Any) -> PlanRequest:
    return PlanRequest.model_validate({"buffers": buffers, "options": {"sync": "none"}, **extra})


def _solve(g: InterferenceGraph, **kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "capacity": None,
        "lower_bound": g.lower_bound.bytes,
        "hint": None,
        "time_limit": 5.0,
    }
    args.update(kwargs)
    return solve_search(g, **args)


HAND_MADE = [
    # A staircase where the lowest candidate must stay empty for the optimum.
    [
        {"id": "P", "size": 5, "start": 4, "end": 6, "offset": 0},
        {"id": "Q", "size": 3, "start": 1, "end": 3, "offset": 0},
        {"id": "d", "size": 3, "start": 2, "end": 4},
        {"id": "e", "size": 2, "start": 3, "end": 6},
        {"id": "g", "size": 10, "start": 5, "end": 7},
    ],
    # The same without pins: the search must find the 17-byte plan itself or better.
    [
        {"id": "P", "size": 5, "start": 4, "end": 6},
        {"id": "Q", "size": 3, "start": 1, "end": 3},
        {"id": "d", "size": 3, "start": 2, "end": 4},
        {"id": "e", "size": 2, "start": 3, "end": 6},
        {"id": "g", "size": 10, "start": 5, "end": 7},
    ],
    # Fragmentation: a pin splits the space, so the peak of 3 bytes cannot be reached.
    [
        {"id": "p", "size": 1, "start": 0, "end": 2, "offset": 1},
        {"id": "f", "size": 2, "start": 0, "end": 2},
        {"id": "g", "size": 3, "start": 2, "end": 3},
    ],
    # Alignment pushes buffers up.
    [
        {"id": "a", "size": 3, "start": 0, "end": 4, "alignment": 1},
        {"id": "b", "size": 8, "start": 1, "end": 3, "alignment": 16},
        {"id": "c", "size": 5, "start": 2, "end": 5, "alignment": 4},
    ],
    # Interchangeable twins.
    [{"id": f"t{i}", "size": 4, "start": 0, "end": 2} for i in range(5)]
    + [{"id": "x", "size": 6, "start": 1, "end": 3}],
]


@pytest.mark.parametrize("buffers", HAND_MADE)
def test_hand_made_optimum(buffers: list[dict[str, Any]]) -> None:
    request = _request(buffers)
    g = build_graph(request)
    result = _solve(g)
    assert result.name == "search"
    assert result.proved_optimal
    assert result.arena_bytes == brute_force(g)
    assert result.bound == result.arena_bytes
    assert_valid_offsets(request, g, result.offsets)


def test_leaves_the_lowest_candidate_empty_when_that_wins() -> None:
    request = _request(HAND_MADE[0])
    g = build_graph(request)
    result = _solve(g)
    assert result.arena_bytes == 17  # d at 3 costs 18
    assert not result.infeasible


@settings(max_examples=150, deadline=None)
@given(requests(max_buffers=6, pins=False, capacity=False, max_new=False))
def test_agrees_with_brute_force(request: PlanRequest) -> None:
    g = build_graph(request)
    result = _solve(g)
    assert result.proved_optimal
    assert result.arena_bytes == brute_force(g)
    assert_valid_offsets(request, g, result.offsets)


@settings(max_examples=80, deadline=None)
@given(requests(max_buffers=6, pins=True, capacity=False, max_new=False))
def test_pins_kept_and_optimum_matches(request: PlanRequest) -> None:
    g = build_graph(request)
    result = _solve(g)
    expected = brute_force(g)
    if expected is None:
        # Pinned buffers clash under the barrier-extended intervals: nothing fits.
        assert result.infeasible
        assert result.offsets is None
        return
    assert result.proved_optimal
    assert result.arena_bytes == expected
    assert_valid_offsets(request, g, result.offsets)


@settings(max_examples=80, deadline=None)
@given(requests(max_buffers=6, pins=False, capacity=False, max_new=False))
def test_capacity_decided_exactly(request: PlanRequest) -> None:
    g = build_graph(request)
    optimum = brute_force(g)
    assert optimum is not None
    below = _solve(g, capacity=optimum - 1) if optimum > 0 else None
    if below is not None:
        assert below.infeasible
        assert below.offsets is None
        assert below.bound >= optimum
    at = _solve(g, capacity=optimum)
    assert not at.infeasible
    assert at.proved_optimal
    assert at.arena_bytes == optimum
    assert_valid_offsets(request, g, at.offsets)


def test_infeasible_capacity_proved() -> None:
    request = _request(HAND_MADE[2])
    g = build_graph(request)
    assert g.lower_bound.bytes == 3
    optimum = brute_force(g)
    assert optimum == 4
    result = _solve(g, capacity=3)
    assert result.infeasible
    assert result.bound == 4
    assert not result.proved_optimal
    assert result.offsets is None


def test_lower_bound_above_capacity_is_infeasible() -> None:
    request = _request(HAND_MADE[4])
    g = build_graph(request)
    result = _solve(g, capacity=g.lower_bound.bytes - 1)
    assert result.infeasible
    assert result.bound == g.lower_bound.bytes


def test_alignment_honoured() -> None:
    request = _request(HAND_MADE[3])
    g = build_graph(request)
    result = _solve(g)
    assert result.offsets is not None
    assert int(result.offsets[1]) % 16 == 0
    assert int(result.offsets[2]) % 4 == 0
    assert_valid_offsets(request, g, result.offsets)


def test_pinned_buffer_above_free_space() -> None:
    # The free buffer fits under the pin: the search must look below pinned buffers.
    request = _request(
        [
            {"id": "p", "size": 4, "start": 0, "end": 2, "offset": 8},
            {"id": "f", "size": 8, "start": 0, "end": 2},
        ]
    )
    g = build_graph(request)
    result = _solve(g)
    assert result.arena_bytes == 12
    assert result.proved_optimal
    assert result.offsets is not None
    assert result.offsets.tolist() == [8, 0]
    assert_valid_offsets(request, g, result.offsets)


def test_empty_request() -> None:
    g = build_graph(_request([]))
    result = _solve(g, lower_bound=0)
    assert result.offsets is not None
    assert result.offsets.size == 0
    assert result.arena_bytes == 0
    assert result.proved_optimal
    assert not result.infeasible


@settings(max_examples=30, deadline=None)
@given(requests(max_buffers=10, capacity=False, max_new=False))
def test_deterministic(request: PlanRequest) -> None:
    g = build_graph(request)
    first = _solve(g, nodes=200)
    again = _solve(build_graph(request), nodes=200)
    assert first.arena_bytes == again.arena_bytes
    assert first.bound == again.bound
    assert first.proved_optimal == again.proved_optimal
    if first.offsets is None:
        assert again.offsets is None
    else:
        assert again.offsets is not None
        assert np.array_equal(first.offsets, again.offsets)


def _hard_request() -> PlanRequest:
    """60 random buffers on which the greedy portfolio misses the lower bound."""
    rng = np.random.default_rng(3)
    buffers = []
    for i in range(60):
        start = int(rng.integers(0, 40))
        buffers.append(
            {
                "id": f"b{i}",
                "size": int(rng.integers(1, 1000)),
                "start": start,
                "end": start + int(rng.integers(1, 20)),
            }
        )
    return _request(buffers)


def test_tiny_budget_keeps_the_hint() -> None:
    request = _hard_request()
    g = build_graph(request)
    hint = portfolio(g).plan_offsets
    assert arena_of(g, hint) > g.lower_bound.bytes
    result = _solve(g, hint=hint, nodes=3)
    assert not result.proved_optimal
    assert not result.infeasible
    assert result.offsets is not None
    assert result.arena_bytes is not None
    assert result.arena_bytes <= arena_of(g, hint)
    assert result.bound <= result.arena_bytes
    assert_valid_offsets(request, g, result.offsets)


def test_tiny_budget_without_hint_proves_nothing() -> None:
    g = build_graph(_hard_request())
    result = _solve(g, nodes=3)
    assert not result.proved_optimal
    assert not result.infeasible
    assert result.bound == g.lower_bound.bytes


def test_upper_limits_the_search() -> None:
    request = _request(HAND_MADE[2])
    g = build_graph(request)
    # The caller already holds a 4-byte plan: proving 3 impossible proves it optimal.
    result = _solve(g, upper=4)
    assert result.bound == 4
    assert result.offsets is None
    assert not result.infeasible


@pytest.mark.parametrize("budget", [0, 1, 5, 50])
def test_kernel_stops_at_its_node_budget(budget: int) -> None:
    from planner.solvers._search_kernel import FOUND, OUT_OF_NODES
    from planner.solvers.search import _decide, _instance

    g = build_graph(_hard_request())
    status, _, used = _decide(_instance(g), g.lower_bound.bytes, budget)
    assert used <= budget
    assert status in (FOUND, OUT_OF_NODES)


@settings(max_examples=30, deadline=None)
@given(requests(max_buffers=12, pins=True, capacity=False, max_new=False))
def test_neighbours_come_smallest_first(request: PlanRequest) -> None:
    # A waiting buffer's scan stops at the first neighbour too large to lift it lower:
    # sound only while every buffer's neighbours are listed by size, each exactly once.
    from planner.solvers.search import _instance

    g = build_graph(request)
    inst = _instance(g)
    for i in range(g.n):
        row = inst.adj[inst.adj_ptr[i] : inst.adj_ptr[i + 1]]
        assert np.all(np.diff(g.size[row]) >= 0)
        live = (g.start < g.occupied_end[i]) & (g.start[i] < g.occupied_end)
        live[i] = False
        assert sorted(row.tolist()) == np.flatnonzero(live).tolist()


@settings(max_examples=60, deadline=None)
@given(requests(max_buffers=6, pins=True, capacity=False, max_new=False))
def test_every_order_decides_exactly(request: PlanRequest) -> None:
    # Each branching order (and the gap dominance under it) finds a plan at the optimum
    # and proves one byte less impossible.
    from planner.solvers._search_kernel import EXHAUSTED, FOUND
    from planner.solvers.search import ORDERS, _decide

    g = build_graph(request)
    optimum = brute_force(g)
    if optimum is None:
        return
    for inst in _with_banded_twins(g, (*ORDERS, "WAT", "L")):
        status, offsets, _ = _decide(inst, optimum, 100_000)
        assert status == FOUND
        assert arena_of(g, offsets) <= optimum
        assert_valid_offsets(request, g, offsets)
        if optimum > 0:
            assert _decide(inst, optimum - 1, 100_000)[0] == EXHAUSTED


@pytest.mark.parametrize("budget", [0, 1, 7, 500])
def test_round_robin_stops_at_its_node_budget(budget: int) -> None:
    from planner.solvers._search_kernel import FOUND, OUT_OF_NODES
    from planner.solvers.search import ORDERS, _decide_all, _instance

    g = build_graph(_hard_request())
    insts = [_instance(g, order) for order in ORDERS]
    status, _, used = _decide_all(insts, g.lower_bound.bytes, budget)
    assert used <= budget
    assert status in (FOUND, OUT_OF_NODES)


@st.composite
def phased_requests(draw: st.DrawFn) -> PlanRequest:
    """Buffers of two phases, [0, 6) and [6, 12), maybe joined by a bridge across 6.

    Once the bridge is placed the phases are independent: the search splits them and
    backjumps when the second fails, which must neither lose a plan nor claim a false proof.
    """
    buffers: list[dict[str, Any]] = []
    spans = [(draw(st.integers(0, 5)), draw(st.integers(7, 12)))] * draw(st.integers(0, 1))
    for lo in (0, 6):
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.integers(lo, lo + 4))
            spans.append((start, draw(st.integers(start + 1, lo + 6))))
    for i, (start, end) in enumerate(spans):
        buffers.append(
            {
                "id": f"b{i}",
                "size": 4 * draw(st.integers(1, 6)),
                "start": start,
                "end": end,
                "alignment": draw(st.sampled_from([4, 8])),
            }
        )
    return _request(buffers)


@settings(max_examples=80, deadline=None)
@given(phased_requests())
def test_independent_phases_decided_exactly(request: PlanRequest) -> None:
    from planner.solvers.search import ORDERS

    _decides_the_optimum(request, (*ORDERS, "S"))


def _with_banded_twins(g: InterferenceGraph, orders: tuple[str, ...]) -> list[_Instance]:
    """The kernel's instance of ``g`` per order of ``orders``, then the banded twin of each
    published order (a decomposition at every boundary no unplaced buffer crosses)."""
    from planner.solvers.search import MINIMALLOC_ORDERS, _banded, _instance

    insts = [_instance(g, order) for order in orders]
    return insts + [_banded(_instance(g, order)) for order in MINIMALLOC_ORDERS]


def _decides_the_optimum(request: PlanRequest, orders: tuple[str, ...]) -> None:
    """Under each branching order the kernel finds a plan at the brute-force optimum and
    proves one byte less impossible."""
    from planner.solvers._search_kernel import EXHAUSTED, FOUND
    from planner.solvers.search import _decide

    g = build_graph(request)
    optimum = brute_force(g)
    assert optimum is not None
    for inst in _with_banded_twins(g, orders):
        status, offsets, _ = _decide(inst, optimum, 100_000)
        assert status == FOUND
        assert arena_of(g, offsets) <= optimum
        assert_valid_offsets(request, g, offsets)
        assert _decide(inst, optimum - 1, 100_000)[0] == EXHAUSTED


def test_granularity_and_bound_in_its_steps() -> None:
    # Sizes and alignments are multiples of 16, so every arena is: one byte short of the
    # optimum is proved impossible with the bound at the optimum itself, not one byte less.
    request = _request(
        [
            {"id": "a", "size": 48, "start": 0, "end": 4, "alignment": 64},
            {"id": "b", "size": 32, "start": 0, "end": 2, "alignment": 64},
            {"id": "c", "size": 16, "start": 2, "end": 4, "alignment": 16},
        ]
    )
    g = build_graph(request)
    assert granularity(g) == 16
    assert g.lower_bound.bytes == 80
    optimum = brute_force(g)
    assert optimum == 96  # a and b at 0 and 64, in some order
    below = _solve(g, capacity=optimum - 1)
    assert below.infeasible
    assert below.bound == optimum
    at = _solve(g, capacity=optimum + 15)
    assert at.proved_optimal
    assert at.arena_bytes == optimum
    assert_valid_offsets(request, g, at.offsets)


def test_granularity_counts_pins() -> None:
    request = _request(
        [
            {"id": "a", "size": 32, "start": 0, "end": 2, "alignment": 16},
            {"id": "p", "size": 16, "start": 0, "end": 2, "offset": 40, "alignment": 8},
        ]
    )
    assert granularity(build_graph(request)) == 8
    assert granularity(build_graph(_request([]))) == 1


def test_backjump_only_to_the_split() -> None:
    # With b (ranked first: the longest) at 0, p and q split into independent groups: p
    # fits at 4, but q (8-aligned) must go to 8 and ends at 16. The failure of q's group
    # condemns b at 0, not the root: the plan puts p and q at 0 and b on top, 12 bytes.
    request = _request(
        [
            {"id": "b", "size": 4, "start": 1, "end": 11},
            {"id": "p", "size": 8, "start": 0, "end": 6},
            {"id": "q", "size": 8, "start": 6, "end": 12, "alignment": 8},
        ]
    )
    g = build_graph(request)
    assert brute_force(g) == 12
    from planner.solvers._search_kernel import EXHAUSTED, FOUND
    from planner.solvers.search import ORDERS, _decide, _instance

    assert int(_instance(g, "L").by_rank[0]) == 0  # b first: its dive splits p from q
    for order in (*ORDERS, "L"):
        inst = _instance(g, order)
        status, offsets, _ = _decide(inst, 12, 1_000)
        assert status == FOUND
        assert_valid_offsets(request, g, offsets)
        assert _decide(inst, 11, 1_000)[0] == EXHAUSTED


@pytest.mark.parametrize("budget", [3, 40, 400, 100_000])
def test_threads_and_turns_give_the_same_answer(budget: int) -> None:
    from planner.solvers.search import ORDERS, _decide_all, _instance

    for request in (_hard_request(), _request(HAND_MADE[0]), _request(HAND_MADE[4])):
        g = build_graph(request)
        insts = [_instance(g, order) for order in (*ORDERS, "S")]
        for capacity in (g.lower_bound.bytes, g.lower_bound.bytes + 8):
            raced = _decide_all(insts, capacity, budget, parallel=True)
            turns = _decide_all(insts, capacity, budget, parallel=False)
            assert raced[0] == turns[0]
            assert raced[2] == turns[2] <= budget
            assert (raced[1] == turns[1]).all()


def test_every_member_decides_within_its_own_effort() -> None:
    # A member that decides in k nodes decides again under a limit of exactly k: a rival
    # that decides first and lowers the others' limits to its own effort can then never stop
    # a member of less effort, so which member wins does not depend on timing.
    from planner.families import family_instance
    from planner.solvers._search_kernel import FOUND, OUT_OF_NODES
    from planner.solvers.search import _decide, _members

    request = family_instance("guillotine", 120, 1000).request
    g = build_graph(request, "none")
    capacity = request.effective_capacity
    assert capacity is not None
    members = _members(g)
    assert len(members) > 8  # the skyline kernel's members are in the portfolio
    for member in members:
        status, offsets, used = _decide(member, capacity, 100_000)
        assert status != OUT_OF_NODES
        again = _decide(member, capacity, used)
        assert again[0] == status
        assert again[2] == used
        assert (again[1] == offsets).all()
        if status == FOUND:
            assert_valid_offsets(request, g, offsets)


def test_a_race_with_the_skyline_members_gives_the_turns_answer() -> None:
    from planner.families import family_instance
    from planner.solvers._search_kernel import FOUND
    from planner.solvers.search import _decide_all, _members

    request = family_instance("guillotine", 120, 1000).request
    g = build_graph(request, "none")
    members = _members(g)
    capacity = request.effective_capacity
    assert capacity is not None
    turns = _decide_all(members, capacity, 20_000, parallel=False)
    for _ in range(8):
        raced = _decide_all(members, capacity, 20_000, parallel=True)
        assert raced[0] == turns[0] == FOUND
        assert raced[2] == turns[2]
        assert (raced[1] == turns[1]).all()
    assert_valid_offsets(request, g, turns[1])


def test_a_member_that_repeats_an_earlier_one_runs_in_name_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a tiling every section is full, so orders that differ only by the fullest-section
    # key rank alike: such a member would search the earlier one's nodes and tie with it.
    # Not running it changes neither the answer nor the nodes charged, only the work.
    from planner.families import family_instance
    from planner.solvers import search
    from planner.solvers._search_kernel import FOUND

    request = family_instance("guillotine", 120, 1000).request
    g = build_graph(request, "none")
    capacity = request.effective_capacity
    assert capacity is not None
    members = search._members(g)
    repeats = search._repeats(members)
    assert sum(r >= 0 for r in repeats) >= 2
    for j, i in enumerate(repeats):
        if i >= 0:
            a, b = members[i], members[j]
            assert i < j
            assert type(a) is type(b)
            assert (a.rank == b.rank).all()
            if isinstance(a, search._Skyline) and isinstance(b, search._Skyline):
                assert a.valley == b.valley
                assert (a.first == b.first).all()
    # Members built apart (another graph, as far as anyone can tell) never repeat.
    apart = [search._instance(g, order) for order in ("TWA", "WAT")]
    assert (apart[0].rank == apart[1].rank).all()
    assert search._repeats(apart) == [-1, -1]

    ran: list[int] = []
    real = search._decide

    def counted(inst: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append(id(inst))
        return real(inst, *args, **kwargs)

    for parallel in (False, True):
        for nodes in (300, 20_000):
            with monkeypatch.context() as patch:
                patch.setattr(search, "_repeats", lambda ms: [-1] * len(ms))
                every = search._decide_all(members, capacity, nodes, parallel=parallel)
            with monkeypatch.context() as patch:
                patch.setattr(search, "_decide", counted)
                ran.clear()
                once = search._decide_all(members, capacity, nodes, parallel=parallel)
            not_run = {id(members[j]) for j, i in enumerate(repeats) if i >= 0}
            assert ran
            assert not_run.isdisjoint(ran)
            assert once[0] == every[0]
            assert once[2] == every[2]
            assert (once[1] == every[1]).all()
            if once[0] == FOUND:
                assert_valid_offsets(request, g, once[1])
    assert once[0] == FOUND  # the last run, on 20 000 nodes, found a plan


def _padded_request(pairs: list[tuple[int, int, int, int]]) -> PlanRequest:
    return _request(
        [
            {"id": f"b{i}", "size": s, "alignment": a, "start": t0, "end": t0 + length}
            for i, (s, a, t0, length) in enumerate(pairs)
        ]
    )


def test_padding_check_prunes_what_alignment_forbids() -> None:
    # Two 40-byte buffers aligned to 32 and an 8-byte one, live together: 88 bytes, but no
    # order stacks them under 104. At 103 the padding check fails the root itself.
    from planner.solvers._search_kernel import EXHAUSTED, FOUND, STATS
    from planner.solvers.search import _decide, _instance

    request = _padded_request([(40, 32, 0, 2), (40, 32, 0, 2), (8, 8, 0, 2)])
    g = build_graph(request)
    assert brute_force(g) == 104
    inst = _instance(g)
    stats = np.zeros(STATS, dtype=np.int64)
    status, _, used = _decide(inst, 103, 100_000, stats=stats)
    assert status == EXHAUSTED
    assert stats[0] >= 1  # checked
    assert stats[2] >= 1  # and pruned
    assert 0 < used < 100  # no placement made, but the check's work is charged as nodes
    status, offsets, _ = _decide(inst, 104, 100_000)
    assert status == FOUND
    assert_valid_offsets(request, g, offsets)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 40), st.sampled_from([1, 8, 32]), st.integers(0, 3), st.integers(1, 3)
        ),
        min_size=2,
        max_size=6,
    )
)
def test_padding_check_keeps_every_optimum(pairs: list[tuple[int, int, int, int]]) -> None:
    # Crowded sections with mixed alignments, where the padding check runs: each order still
    # finds a plan at the optimum and proves one byte less impossible.
    from planner.solvers.search import ORDERS

    _decides_the_optimum(_padded_request(pairs), ORDERS)


@pytest.mark.parametrize("seed", [2, 5, 7, 10, 13])
def test_reaches_the_clique_bound_where_padding_sets_the_optimum(seed: int) -> None:
    # Alignment makes the buffers live at the peak need more than their sizes: the clique
    # bound is above the aligned one, and greedy stays above it. The search finds a plan at
    # that bound, so proves it optimal, within a small budget.
    from planner.generate import random_kernel
    from planner.solvers.bounds import clique_bound
    from planner.solvers.exact import round_up

    request = random_kernel(seed)
    g = build_graph(request)
    step = granularity(g)
    aligned = round_up(g.aligned_bound.bytes, step)
    clique = round_up(clique_bound(g, aligned).bytes, step)
    greedy = portfolio(g, None, aligned)
    assert aligned < clique < greedy.plan_arena
    result = _solve(
        g, lower_bound=clique, hint=greedy.offsets, upper=greedy.arena_bytes, time_limit=0.5
    )
    assert result.proved_optimal
    assert result.arena_bytes == clique
    assert arena_of(g, result.offsets) == clique
    assert_valid_offsets(request, g, result.offsets)


def test_portfolio_solves_what_its_first_order_misses() -> None:
    """A tiling whose first branching order runs out of nodes where a later order decides
    in a few hundred: only a portfolio of several orders finds the plan at the optimum."""
    from planner.families import CAPACITY, family_instance
    from planner.solvers._search_kernel import OUT_OF_NODES
    from planner.solvers.search import ORDERS, _decide, _instance

    assert len(set(ORDERS)) >= 4
    assert {"WAT", "TAW", "TWA"} <= set(ORDERS)  # MiniMalloc's published defaults
    request = family_instance("mixed", 41, 0).request
    g = build_graph(request)
    status, _, used = _decide(_instance(g, ORDERS[0]), CAPACITY, 3_000)
    assert status == OUT_OF_NODES
    assert used >= 3_000  # padding checks are charged as nodes too
    result = solve_search(
        g, capacity=CAPACITY, lower_bound=CAPACITY, hint=None, time_limit=10.0, nodes=12_000
    )
    assert result.proved_optimal
    assert result.arena_bytes == CAPACITY
    assert_valid_offsets(request, g, result.offsets)


# Alignment keeps every plan above the peak of 5 bytes: the optimum is 6 (a at 0, b at 4).
ABOVE_THE_PEAK = [
    {"id": "a", "size": 3, "start": 0, "end": 2, "alignment": 4},
    {"id": "b", "size": 2, "start": 0, "end": 2, "alignment": 4},
]


def test_bound_only_decides_the_bound_alone() -> None:
    # Deciding only the bound proves it too low and stops there, where the full search goes
    # on to the optimum above it.
    request = _request(ABOVE_THE_PEAK)
    g = build_graph(request)
    assert g.lower_bound.bytes == 5
    assert brute_force(g) == 6
    result = _solve(g, bound_only=True)
    assert result.offsets is None
    assert result.bound == 6
    full = _solve(g)
    assert full.proved_optimal
    assert full.arena_bytes == 6
    assert_valid_offsets(request, g, full.offsets)


def test_above_bound_never_decides_the_bound() -> None:
    # Above the bound the search finds the optimum but, never deciding the bound itself,
    # cannot prove it; the full search does.
    request = _request(ABOVE_THE_PEAK)
    g = build_graph(request)
    result = _solve(g, above_bound=True)
    assert result.arena_bytes == 6
    assert result.bound == 5
    assert not result.proved_optimal
    assert_valid_offsets(request, g, result.offsets)
    assert _solve(g).bound == 6


def test_kernels_load_before_the_clock_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first call of a kernel in a process loads or compiles it with the request's clock
    # paused, and every other caller waits for it. Made here to take longer than the whole
    # time limit: the plan must still be the one a process that had it loaded finds.
    import threading
    import time

    from planner.core.clock import deadline, paused
    from planner.families import family_instance
    from planner.solvers import search

    request = family_instance("guillotine", 120, 1000).request
    g = build_graph(request, "none")
    args: dict[str, Any] = {"capacity": request.effective_capacity, "time_limit": 1.0}
    with deadline(1.0):
        loaded = _solve(g, **args)
    assert loaded.proved_optimal

    def slow_first_call(kernel: Any) -> Any:
        lock = threading.Lock()
        first = [True]

        def call(*a: Any) -> Any:
            with lock:
                if first[0]:
                    first[0] = False
                    with paused():
                        time.sleep(1.2)
            return kernel(*a)

        return call

    for name in ("decide", "decide_skyline"):
        monkeypatch.setattr(search, name, slow_first_call(getattr(search, name)))
    monkeypatch.setattr(search, "_LOADED", set())  # as in a process that never called them
    with deadline(1.0):
        cold = _solve(g, **args)
    assert cold.proved_optimal
    assert np.array_equal(cold.offsets, loaded.offsets)
    assert_valid_offsets(request, g, cold.offsets)


def test_a_small_search_loads_the_skyline_kernel_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # The warm-up plans small requests only; the kernel that only large ones race must still
    # be loaded by it, or the first large request after an install compiles it on its clock.
    from planner.solvers import search
    from planner.solvers._search_kernel import EXHAUSTED

    calls: list[int] = []

    def record(*args: Any) -> Any:
        calls.append(len(args))
        return EXHAUSTED, np.zeros(0, dtype=np.int64), 0

    monkeypatch.setattr(search, "_LOADED", set())
    monkeypatch.setattr(search, "decide_skyline", record)
    g = build_graph(random_kernel(7), "none")
    assert g.n <= search.SKYLINE_MIN
    assert not any(isinstance(m, search._Skyline) for m in search._members(g))
    search._load(search._members(g))
    assert len(calls) == 1
    search._load(search._members(g))  # once per process
    assert len(calls) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread: Linux")
def test_a_race_gives_each_member_the_cpu_share_of_its_node_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The skyline members may spend half the nodes of a canonical order: their threads run
    # three nice levels lower (half the CPU weight), the canonical ones at the caller's.
    from planner.families import family_instance
    from planner.solvers import search
    from planner.solvers._search_kernel import FOUND
    from planner.solvers.search import NICE_PER_HALVING, _decide_all, _members, _Skyline

    request = family_instance("guillotine", 120, 1000).request
    g = build_graph(request, "none")
    members = _members(g)
    seen: dict[int, int] = {}
    decide = search._decide

    def recording(inst: Any, *args: Any, **kwargs: Any) -> Any:
        seen[id(inst)] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return decide(inst, *args, **kwargs)

    monkeypatch.setattr(search, "_decide", recording)
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    status, offsets, _ = _decide_all(members, g.lower_bound.bytes, 2_000, parallel=True)
    if status == FOUND:
        assert_valid_offsets(request, g, offsets)
    # Members that repeat an earlier one do not run (``_repeats``); every other one ran.
    running = [m for m, r in zip(members, search._repeats(members), strict=True) if r < 0]
    weights = search._weights(running)
    assert any(w > 0 for w in weights)
    assert 0 in weights
    expected = [min(19, base + NICE_PER_HALVING * w) for w in weights]
    assert [seen[id(m)] for m in running] == expected
    assert any(isinstance(m, _Skyline) for m in members)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # caller's own


def test_off_linux_a_race_leaves_every_thread_its_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Elsewhere ``setpriority`` takes a process id, and a thread's id could name another
    # process: the race must not call it there (this test runs on every platform).
    from planner.solvers import search

    def refuse(*args: Any) -> None:
        raise AssertionError(f"setpriority called off Linux: {args}")

    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(os, "setpriority", refuse, raising=False)
    search._take_share(1)
    search._take_share(2)
