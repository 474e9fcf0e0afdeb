"""CP-SAT exact method: optimum against brute force, and every plan validated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

pytest.importorskip("ortools")

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.solvers.cpsat import solve_cpsat
from planner.solvers.greedy import arena_of, portfolio, run
from tests.support.bruteforce import assert_valid_offsets, brute_force
from tests.support.samples import CLASSIC
from tests.support.strategies import requests

TIME_LIMIT = 10.0  # seconds; tiny models prove optimality in milliseconds


def _request(buffers: list[dict[str, Any]], **extra: Any) -> PlanRequest:
    return PlanRequest.model_validate({"buffers": buffers, "options": {"sync": "none"}, **extra})


def _solve(g: InterferenceGraph, **kwargs: Any) -> Any:
    args: dict[str, Any] = {
        "capacity": None,
        "lower_bound": g.lower_bound.bytes,
        "hint": None,
        "time_limit": TIME_LIMIT,
    }
    return solve_cpsat(g, **{**args, **kwargs})


def test_beats_greedy_by_size_on_the_classic_example() -> None:
    request = _request(CLASSIC)
    g = build_graph(request)
    assert arena_of(g, run(g, "size/first-fit")) == 13
    assert brute_force(g) == 12
    result = _solve(g)
    assert result.name == "cpsat"
    assert result.proved_optimal
    assert not result.infeasible
    assert result.arena_bytes == result.bound == 12
    assert_valid_offsets(request, g, result.offsets)


# Alignment puts the optimum above the peak: a (6 B) and c (2 B) overlap in time, both
# 4-aligned: c at 0 and a at 4, or a at 0 and c at 8; either way 10 B for a peak of 8 B.
ABOVE_BOUND = [
    {"id": "a", "size": 6, "start": 2, "end": 3, "alignment": 4},
    {"id": "b", "size": 1, "start": 3, "end": 4, "alignment": 4},
    {"id": "c", "size": 2, "start": 2, "end": 4, "alignment": 4},
]


def test_optimum_above_the_lower_bound() -> None:
    request = _request(ABOVE_BOUND)
    g = build_graph(request)
    assert g.lower_bound.bytes == 8
    assert brute_force(g) == 10
    result = _solve(g)
    assert result.proved_optimal
    assert result.arena_bytes == result.bound == 10
    assert_valid_offsets(request, g, result.offsets)


def test_empty_graph() -> None:
    g = build_graph(_request([]))
    result = _solve(g)
    assert result.offsets is not None
    assert result.offsets.size == 0
    assert result.arena_bytes == 0
    assert result.proved_optimal


@settings(max_examples=80, deadline=None)
@given(requests(max_buffers=6, pins=False, capacity=False, max_new=False))
def test_optimum_matches_brute_force(request: PlanRequest) -> None:
    g = build_graph(request)
    result = _solve(g)
    assert result.proved_optimal
    assert result.arena_bytes == result.bound == brute_force(g)
    assert result.offsets is not None
    assert arena_of(g, result.offsets) == result.arena_bytes
    assert_valid_offsets(request, g, result.offsets)


@settings(max_examples=40, deadline=None)
@given(requests(max_buffers=6, pins=True, capacity=False, max_new=False))
def test_pins_keep_their_offsets(request: PlanRequest) -> None:
    g = build_graph(request)
    greedy = portfolio(g)
    result = _solve(g, hint=greedy.offsets, upper=greedy.arena_bytes)
    assert result.proved_optimal
    assert result.arena_bytes == brute_force(g)
    pinned = g.pinned >= 0
    assert (result.offsets[pinned] == g.pinned[pinned]).all()
    assert_valid_offsets(request, g, result.offsets)


def test_pinned_buffer_above_the_others() -> None:
    request = _request(
        [
            {"id": "x", "size": 10, "start": 0, "end": 2, "offset": 40},
            {"id": "y", "size": 50, "start": 1, "end": 3},
        ]
    )
    g = build_graph(request)
    result = _solve(g)
    assert result.offsets.tolist() == [40, 50]
    assert result.arena_bytes == 100
    assert result.proved_optimal
    assert_valid_offsets(request, g, result.offsets)


def test_alignment_is_honoured() -> None:
    request = _request(
        [
            {"id": "a", "size": 3, "start": 0, "end": 2, "alignment": 1},
            {"id": "b", "size": 16, "start": 0, "end": 2, "alignment": 16},
            {"id": "c", "size": 5, "start": 1, "end": 3, "alignment": 4},
        ]
    )
    g = build_graph(request)
    result = _solve(g)
    assert result.proved_optimal
    assert result.arena_bytes == brute_force(g)
    assert_valid_offsets(request, g, result.offsets)


def test_capacity_below_the_optimum_is_infeasible() -> None:
    request = _request(CLASSIC)
    g = build_graph(request)
    tight = _solve(g, capacity=12)
    assert tight.arena_bytes == 12
    assert not tight.infeasible
    assert tight.proved_optimal
    # 11 B is below the peak: refused without a search.
    below_bound = _solve(g, capacity=11, lower_bound=12)
    assert below_bound.infeasible
    assert below_bound.offsets is None


def test_capacity_below_an_optimum_above_the_bound_is_infeasible() -> None:
    g = build_graph(_request(ABOVE_BOUND))
    result = _solve(g, capacity=9)
    assert result.infeasible
    assert result.offsets is None
    assert result.arena_bytes is None
    assert not result.proved_optimal
    fits = _solve(g, capacity=10)
    assert not fits.infeasible
    assert fits.arena_bytes == 10
    # Without a capacity, a too-small ``upper`` is no proof of anything.
    assert not _solve(g, upper=9).infeasible


def test_same_input_same_output() -> None:
    rng = np.random.default_rng(7)
    buffers = []
    for i in range(24):
        start = int(rng.integers(0, 30))
        buffers.append(
            {
                "id": f"b{i}",
                "size": int(rng.integers(1, 200)),
                "start": start,
                "end": start + int(rng.integers(1, 10)),
                "alignment": int(rng.choice([1, 4, 16])),
            }
        )
    request = _request(buffers)
    g = build_graph(request)
    greedy = portfolio(g)
    first = _solve(g, hint=greedy.offsets, upper=greedy.arena_bytes, time_limit=2.0)
    second = _solve(g, hint=greedy.offsets, upper=greedy.arena_bytes, time_limit=2.0)
    assert first.offsets is not None
    assert np.array_equal(first.offsets, second.offsets)
    assert (first.arena_bytes, first.bound, first.proved_optimal) == (
        second.arena_bytes,
        second.bound,
        second.proved_optimal,
    )
    assert first.arena_bytes <= greedy.arena_bytes
    assert_valid_offsets(request, g, first.offsets)


def test_hint_is_accepted() -> None:
    request = _request(CLASSIC)
    g = build_graph(request)
    greedy = run(g, "size/first-fit")
    result = _solve(g, hint=greedy, upper=arena_of(g, greedy))
    assert result.proved_optimal
    assert result.arena_bytes == 12
    # A hint that is no plan (misaligned, overlapping, too high) is only a hint.
    junk = np.asarray([3, 1, 1000, 0], dtype=np.int64)
    assert _solve(g, hint=junk).arena_bytes == 12


def test_identical_buffers_stay_optimal() -> None:
    # Symmetry breaking orders identical buffers; the hint's order is the reverse.
    buffers = [{"id": f"t{i}", "size": 8, "start": 0, "end": 4, "alignment": 8} for i in range(4)]
    buffers.append({"id": "u", "size": 8, "start": 2, "end": 6, "alignment": 8})
    request = _request(buffers)
    g = build_graph(request)
    hint = np.asarray([24, 16, 8, 0, 32], dtype=np.int64)
    result = _solve(g, hint=hint, upper=40)
    assert result.proved_optimal
    assert result.arena_bytes == 40 == brute_force(g)
    assert_valid_offsets(request, g, result.offsets)


def test_no_plan_within_upper_raises_the_bound() -> None:
    # A pin splits the space so the peak of 3 bytes cannot be reached: asked only for a plan
    # at 3 bytes, CP-SAT proves there is none, and the bound rises past it.
    request = _request(
        [
            {"id": "p", "size": 1, "start": 0, "end": 2, "offset": 1},
            {"id": "f", "size": 2, "start": 0, "end": 2},
            {"id": "g", "size": 3, "start": 2, "end": 3},
        ]
    )
    g = build_graph(request)
    assert g.lower_bound.bytes == 3
    at_bound = _solve(g, upper=3)
    assert at_bound.offsets is None
    assert at_bound.bound == 4
    assert not at_bound.infeasible  # no capacity: the space was only a cap
    above = _solve(g, upper=4)
    assert above.proved_optimal
    assert above.arena_bytes == 4
    assert_valid_offsets(request, g, above.offsets)


def test_only_a_run_at_the_bound_orders_intervals_dynamically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ortools.sat.python import cp_model

    from planner.generate import random_kernel

    request = random_kernel(3, max_buffers=32)
    g = build_graph(request, "none")
    solve = cp_model.CpSolver.solve
    seen: list[bool] = []

    def recording(self: cp_model.CpSolver, *args: Any, **kwargs: Any) -> Any:
        seen.append(bool(self.parameters.use_dynamic_precedence_in_disjunctive))
        return solve(self, *args, **kwargs)

    monkeypatch.setattr(cp_model.CpSolver, "solve", recording)
    hint = portfolio(g).plan_offsets
    bound = g.lower_bound.bytes
    at_bound = _solve(g, lower_bound=bound, hint=hint, upper=bound, time_limit=1.0)
    minimized = _solve(g, lower_bound=bound, hint=hint, upper=arena_of(g, hint), time_limit=1.0)
    assert seen == [True, False]
    for result in (at_bound, minimized):
        if result.offsets is not None:
            assert_valid_offsets(request, g, result.offsets)
    assert minimized.offsets is not None
