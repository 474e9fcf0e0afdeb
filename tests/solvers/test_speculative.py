"""A run started ahead of its turn: taken only on the arguments it started with, stopped on
request, and the plan the same as running in turn."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import planner.solvers.auto as auto
from planner.core.graph import build_graph
from planner.families import family_instance
from planner.generate import random_kernel
from planner.solvers import registry
from planner.solvers.exact import Stop
from planner.solvers.solution import Solution
from planner.solvers.speculative import SpeculativeRun
from tests.support.bruteforce import assert_valid_offsets

# Random kernels whose first search decides nothing at the bound, so the windows run and
# CP-SAT's first run at the bound goes on beside them: seed 1262's windows leave the bound
# and CP-SAT finds a plan there; seed 1333's windows raise the bound, so the run started
# ahead is thrown away and CP-SAT runs again at the raised bound.
BESIDE_WINDOWS = (1262, 1333)


def _arguments(bound: int, hint: np.ndarray) -> dict[str, Any]:
    return {"capacity": None, "lower_bound": bound, "hint": hint, "time_limit": 1.0}


def _recording(calls: list[dict[str, Any]]) -> Any:
    def method(g: Any, **arguments: Any) -> Solution:
        calls.append(arguments)
        return Solution("fake", None, None, arguments["lower_bound"] + 1, False)

    return method


def test_taken_only_on_the_arguments_it_started_with() -> None:
    g = build_graph(random_kernel(3), "none")
    hint = np.arange(g.n, dtype=np.int64)
    calls: list[dict[str, Any]] = []
    speculative = SpeculativeRun(_recording(calls), g, _arguments(100, hint))
    assert speculative.matches(_arguments(100, hint.copy()))
    assert speculative.matches({**_arguments(100, hint), "on_progress": None})
    assert not speculative.matches(_arguments(101, hint))
    assert not speculative.matches(_arguments(100, hint + 1))
    assert not speculative.matches({**_arguments(100, hint), "upper": 100})
    assert speculative.result().bound == 101
    assert isinstance(calls[0]["stop"], Stop)


def test_an_error_on_its_thread_is_raised_on_the_callers() -> None:
    def failing(g: Any, **arguments: Any) -> Solution:
        raise ValueError("no plan")

    g = build_graph(random_kernel(3), "none")
    with pytest.raises(ValueError, match="no plan"):
        SpeculativeRun(failing, g, _arguments(1, np.zeros(g.n, dtype=np.int64))).result()


def test_cancel_stops_a_long_cpsat_run() -> None:
    # Minimizing a 200-buffer pinwheel tiling from below its optimum, CP-SAT runs to its
    # deterministic limit: about ten seconds for a 60 s time limit on a 2-core machine, and
    # far longer for 300 s. Stopped, it ends at once.
    pytest.importorskip("ortools")
    from planner.solvers.cpsat import solve_cpsat

    # The tiling's capacity left out: CP-SAT minimizes above it.
    request = family_instance("pinwheel", 200, 7).request.model_copy(update={"capacity": None})
    g = build_graph(request, "none")
    low = g.aligned_bound.bytes
    speculative = SpeculativeRun(
        solve_cpsat, g, {**_arguments(low, np.zeros(g.n, dtype=np.int64)), "time_limit": 300.0}
    )
    time.sleep(0.2)
    began = time.perf_counter()
    speculative.cancel()
    assert time.perf_counter() - began < 5.0
    # Stopped before it began, it searches nothing: unstopped, two seconds find a plan.
    stopped = Stop()
    stopped.stop()
    result = solve_cpsat(g, capacity=None, lower_bound=low, hint=None, time_limit=2.0, stop=stopped)
    assert result.offsets is None
    found = solve_cpsat(g, capacity=None, lower_bound=low, hint=None, time_limit=2.0)
    assert found.offsets is not None
    assert_valid_offsets(request, g, found.offsets)


@pytest.mark.slow
@pytest.mark.parametrize("seed", BESIDE_WINDOWS)
def test_the_plan_is_the_one_running_in_turn_gives(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ortools")  # CP-SAT is what runs beside the windows
    request = random_kernel(seed)
    g = build_graph(request, "none")
    beside = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=10.0
    )
    schedule = auto._schedule
    monkeypatch.setattr(
        auto,
        "_schedule",
        lambda methods, n: [replace(s, next_speculative=False) for s in schedule(methods, n)],
    )
    in_turn = auto.solve(
        g, solver=registry.lookup("auto"), heuristics=None, capacity=None, time_limit=10.0
    )
    assert np.array_equal(beside.plan_offsets, in_turn.plan_offsets)
    assert (beside.bound, beside.tried, beside.name) == (in_turn.bound, in_turn.tried, in_turn.name)
    assert [n for n, _ in beside.tried if n.startswith("exact:")][:3] == [
        "exact:search",
        "exact:search",
        "exact:cpsat",
    ]
    assert_valid_offsets(request, g, beside.offsets)
