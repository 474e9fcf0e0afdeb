"""Every exact method is called one way (``solvers.exact.ExactMethod``) and returns one result
type; each honours ``stop``."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.families import family_instance
from planner.solvers import registry
from planner.solvers.exact import ExactMethod, Stop
from planner.solvers.search import solve_search
from planner.solvers.solution import Solution
from planner.solvers.windows import solve_windows
from tests.support.bruteforce import assert_valid_offsets

METHODS: dict[str, ExactMethod] = {"search": solve_search, "windows": solve_windows}
if importlib.util.find_spec("ortools") is not None:
    from planner.solvers.cpsat import solve_cpsat

    METHODS["cpsat"] = solve_cpsat


def _graph() -> tuple[PlanRequest, InterferenceGraph]:
    request = family_instance("guillotine", 24, 7).request
    request = request.model_copy(
        update={
            "capacity": None,
            "target": None,
            "options": request.options.model_copy(update={"sync": "none"}),
        }
    )
    return request, build_graph(request, "none")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_exact_method_takes_the_same_call(name: str) -> None:
    request, g = _graph()
    method = METHODS[name]
    assert registry.exact_method(name) is method
    result = method(
        g,
        capacity=None,
        lower_bound=g.aligned_bound.bytes,
        hint=None,
        time_limit=2.0,
        upper=None,
        on_progress=None,
        stop=Stop(),
        tolerance=0,
    )
    assert isinstance(result, Solution)
    if result.offsets is not None:
        assert result.arena_bytes == int((result.offsets + g.size).max())
        assert_valid_offsets(request, g, result.offsets)


def test_a_stopped_search_proves_nothing() -> None:
    request, g = _graph()
    bound = g.aligned_bound.bytes
    free = solve_search(g, capacity=None, lower_bound=bound, hint=None, time_limit=2.0)
    assert free.proved_optimal  # a tiling: the search reaches its bound
    assert free.offsets is not None
    assert_valid_offsets(request, g, free.offsets)
    stopped = Stop()
    stopped.stop()
    result = solve_search(
        g, capacity=None, lower_bound=bound, hint=None, time_limit=2.0, stop=stopped
    )
    assert not result.proved_optimal
    assert result.offsets is None or np.array_equal(result.offsets, free.offsets)
