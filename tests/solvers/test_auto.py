"""Solver "auto": greedy first, exact methods per component, proofs and certificates."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
import planner.solvers.auto as auto
from planner.core.errors import RequestError
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.families import CAPACITY, TRAINING_SEED, family_instance
from planner.generate import random_kernel, random_request
from planner.solvers import registry
from planner.solvers.greedy import portfolio
from planner.validators import validate_plan
from tests.support.bruteforce import assert_valid_offsets
from tests.support.strategies import request_dicts

pytest.importorskip("ortools")

# A pin at byte 1 splits the space: f (2 bytes) cannot go under it, so the optimum is 4 bytes
# for a peak of 3. Greedy finds 4 but cannot prove it; an exact method can.
FRAGMENTED: dict[str, Any] = {
    "options": {"sync": "none", "time_limit": 2.0},
    "buffers": [
        {"id": "p", "size": 1, "start": 0, "end": 2, "offset": 1},
        {"id": "f", "size": 2, "start": 0, "end": 2},
        {"id": "g", "size": 3, "start": 2, "end": 3},
    ],
}

# a and b (1 byte, aligned to 4) and c (1 byte) live together: the peak and the aligned bound
# say 3 bytes (c's alignment of 1 makes padding uncountable), the optimum is 5: the clique
# bound (the live set stacked as tightly as alignment allows) proves it.
HARD: dict[str, Any] = {
    "options": {"sync": "none", "time_limit": 2.0},
    "buffers": [
        {"id": "a", "size": 1, "start": 0, "end": 2, "alignment": 4},
        {"id": "b", "size": 1, "start": 0, "end": 3, "alignment": 4},
        {"id": "c", "size": 1, "start": 0, "end": 2},
    ],
}


@settings(max_examples=80, deadline=None)
@given(request_dicts(max_buffers=9, pins=True))
def test_never_worse_than_greedy(data: dict[str, Any]) -> None:
    request = PlanRequest.model_validate(data)
    plan = planner.plan(data)
    assert validate_plan(request, plan).valid
    greedy = portfolio(build_graph(request, request.options.sync))
    if request.options.sync != "insert":  # insert may trade bytes for fewer barriers
        assert plan.arena_bytes <= greedy.plan_arena


def test_exact_proves_what_greedy_cannot() -> None:
    plan = planner.plan(FRAGMENTED)
    assert plan.status == "optimal"
    assert plan.solver.proved_optimal
    assert plan.lower_bound == 3
    assert plan.arena_bytes == plan.solver.bound == 4
    assert any(t.name.startswith("exact:") for t in plan.solver.tried)
    assert validate_plan(PlanRequest.model_validate(FRAGMENTED), plan).valid


def test_clique_bound_proves_what_the_peak_cannot() -> None:
    plan = planner.plan(HARD)
    assert plan.status == "optimal"
    assert plan.lower_bound == 3
    assert plan.arena_bytes == plan.solver.bound == 5
    assert not any(t.name.startswith("exact:") for t in plan.solver.tried)
    assert validate_plan(PlanRequest.model_validate(HARD), plan).valid


def test_fragmentation_below_the_optimum_is_proved_infeasible() -> None:
    # The bounds (3) fit a capacity of 3, but p and f need 4 bytes; g is innocent.
    tight = {**FRAGMENTED, "capacity": 3}
    plan = planner.plan(tight)
    assert plan.status == "infeasible"
    assert plan.certificate is not None
    assert plan.certificate.reason == "infeasible_subset"
    assert plan.certificate.buffers == ["p", "f"]
    assert validate_plan(PlanRequest.model_validate(tight), plan).valid


def test_components_are_solved_apart() -> None:
    # Two copies of HARD, disjoint in time, plus a buffer apart from both: three components;
    # the arena is the largest component's optimum.
    later = [
        {**b, "id": b["id"] + "2", "start": b["start"] + 10, "end": b["end"] + 10}
        for b in HARD["buffers"]
    ]
    request = {
        **HARD,
        "buffers": [*HARD["buffers"], *later, {"id": "z", "size": 3, "start": 20, "end": 30}],
    }
    g = build_graph(PlanRequest.model_validate(request))
    assert g.components == 3
    plan = planner.plan(request)
    assert plan.status == "optimal"
    assert plan.arena_bytes == 5
    assert validate_plan(PlanRequest.model_validate(request), plan).valid


def test_capacity_below_the_optimum_is_proved_infeasible() -> None:
    below_bound = planner.plan({**HARD, "capacity": 1})
    assert below_bound.certificate is not None
    assert below_bound.certificate.reason == "lower_bound"
    # The bounds (3) fit a capacity of 4, but a and b need 5 bytes; c is innocent.
    tight = {**HARD, "capacity": 4}
    plan = planner.plan(tight)
    assert plan.status == "infeasible"
    assert plan.certificate is not None
    assert plan.certificate.reason == "infeasible_subset"
    assert plan.certificate.buffers == ["a", "b"]
    assert validate_plan(PlanRequest.model_validate(tight), plan).valid


def test_missing_exact_methods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "exact_method", lambda name: None)
    plan = planner.plan(FRAGMENTED)
    assert plan.status == "feasible"
    assert plan.arena_bytes == 4
    assert any(d.code == "solver_unavailable" for d in plan.diagnostics)
    with pytest.raises(RequestError) as info:
        planner.plan({**FRAGMENTED, "options": {"solver": "cpsat"}})
    assert info.value.errors[0]["type"] == "solver_unavailable"


def test_same_request_same_plan_with_exact() -> None:
    assert planner.plan(HARD).model_dump_json() == planner.plan(HARD).model_dump_json()


@settings(max_examples=8, deadline=None)
@given(
    st.integers(20, 60),
    st.integers(0, 10_000),
    st.sampled_from([16, 128]),
    st.sampled_from([None, 0.9, 1.0]),
)
def test_never_worse_than_greedy_when_exact_runs(
    n: int, seed: int, alignment: int, squeeze: float | None
) -> None:
    # Kernel-sized requests where the exact methods do run, on short budgets, sometimes
    # with a capacity at or under the greedy arena: the plan is never larger than greedy's.
    request = random_request(n, overlap=0.3, seed=seed, alignment=alignment)
    g = build_graph(request)
    greedy = portfolio(g)
    capacity = None if squeeze is None else int(greedy.plan_arena * squeeze)
    result = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=capacity, time_limit=0.2
    )
    assert result.plan_arena <= greedy.plan_arena
    assert result.bound <= result.plan_arena  # the bound is a true bound
    assert_valid_offsets(request, g, result.offsets)


def test_enough_stops_the_search_and_keeps_the_graphs_own_bound() -> None:
    # FRAGMENTED: greedy gives 4 bytes over a peak of 3, and the exact methods prove 4.
    request = PlanRequest.model_validate(FRAGMENTED)
    g = build_graph(request)
    full = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=2.0
    )
    assert any(name.startswith("exact:") for name, _ in full.tried)
    assert full.proved_optimal
    assert full.bound == 4
    # A caller that gains nothing below 4 bytes: greedy's plan ends the search.
    stopped = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=2.0, stop_at=4
    )
    assert not any(name.startswith("exact:") for name, _ in stopped.tried)
    assert stopped.arena_bytes == 4
    assert stopped.bound == 3
    assert not stopped.proved_optimal
    assert_valid_offsets(request, g, stopped.offsets)


@settings(max_examples=8, deadline=None)
@given(st.integers(20, 48), st.integers(0, 10_000))
def test_enough_below_greedy_still_searches_and_proves_no_false_bound(n: int, seed: int) -> None:
    request = random_request(n, overlap=0.3, seed=seed, alignment=16)
    g = build_graph(request)
    greedy = portfolio(g)
    plain = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=0.2
    )
    enough = greedy.plan_arena - 16  # one granule under greedy: the exact methods run on
    result = auto.solve(
        g,
        solver=registry.lookup("auto"),
        heuristics=None,
        capacity=None,
        time_limit=0.2,
        stop_at=enough,
    )
    assert result.plan_arena <= greedy.plan_arena
    assert result.bound <= plain.bound  # what ``enough`` aims at is never taken as a bound
    assert result.bound <= result.plan_arena
    assert_valid_offsets(request, g, result.offsets)


@pytest.mark.parametrize("n", [1, auto.TINY_PART - 1, auto.TINY_PART, auto.SMALL_PART, 200])
def test_schedule_stays_within_the_part_time(n: int) -> None:
    methods = [(name, registry.exact_method(name)) for name in ("search", "cpsat")]
    steps = auto._schedule([(m, f) for m, f in methods if f is not None], n)
    assert sum(s.fraction * s.tries for s in steps) <= 1.0 + 1e-9
    assert all(s.fraction > 0 for s in steps)


@pytest.mark.parametrize("n", [auto.TINY_PART, auto.SMALL_PART, 200])
def test_a_run_started_ahead_and_the_one_beside_it_can_both_be_stopped(n: int) -> None:
    methods = [(name, registry.exact_method(name)) for name in ("search", "cpsat")]
    steps = auto._schedule([(m, f) for m, f in methods if f is not None], n)
    pairs = [(s, steps[k + 1]) for k, s in enumerate(steps) if s.next_speculative]
    assert len(pairs) == (1 if n <= auto.SMALL_PART else 0)
    for step, after in pairs:
        assert after.at_bound  # CP-SAT asked for a plan at the bound, beside the windows
        for method in (step.method, after.method):
            assert "stop" in inspect.signature(method).parameters


def test_kernel_sized_part_gets_its_plan_at_the_bound_from_cpsat() -> None:
    # 57 buffers where greedy misses the (tight) clique bound and the first search finds no
    # plan at it within its nodes, nor do its windows raise the bound; CP-SAT, asked only
    # for a plan at the bound, finds one, so nothing runs after it.
    request = random_kernel(1111)
    g = build_graph(request, "none")
    result = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=10.0
    )
    exact = [name for name, _ in result.tried if name.startswith("exact:")]
    assert exact == ["exact:search", "exact:search", "exact:cpsat"]
    assert result.proved_optimal
    assert result.name == "exact:cpsat"
    assert_valid_offsets(request, g, result.offsets)


def test_kernel_sized_requests_leave_the_random_runs_until_the_search_has_failed() -> None:
    # Kernel 5: every heuristic misses the bound and the search decides it, so the random
    # skyline runs never start. Below the bound's capacity no exact method runs: the random
    # runs still do, and the plan is no larger than the whole portfolio's.
    request = random_kernel(5)
    g = build_graph(request, "none")
    result = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=10.0
    )
    assert result.proved_optimal
    assert "greedy:random/skyline" not in [name for name, _ in result.tried]
    assert_valid_offsets(request, g, result.offsets)
    capacity = result.bound - 16
    short = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=capacity, time_limit=10.0
    )
    assert short.infeasible
    assert [name for name, _ in short.tried][-1] == "greedy:random/skyline"
    assert short.plan_arena <= portfolio(g).plan_arena
    assert_valid_offsets(request, g, short.offsets)


def test_within_a_capacity_the_random_runs_wait_for_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A challenging-shape instance at its capacity (the peak of live bytes): the search
    # decides it, so the random skyline runs never start; without a capacity (and without the
    # search's first try, which meets the bound here) they run in the portfolio, before the
    # exact methods.
    inst = family_instance("random-wide", 200, TRAINING_SEED)
    g = build_graph(inst.request, "none")
    decided = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=CAPACITY, time_limit=10.0
    )
    assert decided.plan_arena <= CAPACITY
    assert decided.proved_optimal
    assert "greedy:random/skyline" not in [name for name, _ in decided.tried]
    assert_valid_offsets(inst.request, g, decided.offsets)
    monkeypatch.setattr(auto, "FIRST_TRY_SHARE", 0.0)
    free = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=10.0
    )
    assert "greedy:random/skyline" in [name for name, _ in free.tried]
    assert_valid_offsets(inst.request, g, free.offsets)
