"""The window bound: never above the optimum, and above the clique bound where sections
interleave."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.generate import random_kernel
from planner.solvers.bounds import clique_bound
from planner.solvers.exact import Stop, granularity, round_up
from planner.solvers.windows import solve_windows, window_bound
from tests.support.bruteforce import brute_force
from tests.support.strategies import requests

# A 33-buffer kernel whose optimum is five granules above its clique bound: no single point
# shows it, the interleaving of a few sections does.
INTERLEAVED_KERNEL = 1648


@settings(max_examples=60, deadline=None)
@given(requests(max_buffers=6, pins=True, capacity=False, max_new=False), st.integers(1, 3))
def test_never_above_the_optimum(request: PlanRequest, sections: int) -> None:
    g = build_graph(request)
    optimum = brute_force(g)
    if optimum is None:
        return  # pins clash: nothing to compare with
    step = granularity(g)
    start = round_up(g.lower_bound.bytes, step)
    bound = window_bound(g, start, 100_000, sections)
    assert start <= bound <= max(optimum, start)
    assert bound % step == 0


def test_raises_the_clique_bound_to_the_optimum_of_an_interleaved_kernel() -> None:
    request = random_kernel(INTERLEAVED_KERNEL)
    plan = planner.plan(request)
    assert plan.solver.proved_optimal  # its arena is the optimum
    g = build_graph(request, "none")
    step = granularity(g)
    start = round_up(max(g.aligned_bound.bytes, clique_bound(g).bytes), step)
    assert plan.arena_bytes - start >= 4 * step
    assert window_bound(g, start, 40_000) == plan.arena_bytes


def test_a_bound_above_the_capacity_proves_nothing_fits() -> None:
    g = build_graph(random_kernel(INTERLEAVED_KERNEL), "none")
    step = granularity(g)
    start = round_up(max(g.aligned_bound.bytes, clique_bound(g).bytes), step)
    below = solve_windows(g, capacity=start, lower_bound=start, hint=None, time_limit=1.0)
    assert below.infeasible
    assert below.bound > start
    assert below.offsets is None
    above = solve_windows(g, capacity=None, lower_bound=start, hint=None, time_limit=1.0)
    assert not above.infeasible
    assert above.bound == below.bound


def test_a_stopped_scan_tries_no_window() -> None:
    # Told to stop (a plan at the bound is known), the scan returns the bound it was given,
    # where it would otherwise raise it.
    g = build_graph(random_kernel(INTERLEAVED_KERNEL), "none")
    step = granularity(g)
    start = round_up(max(g.aligned_bound.bytes, clique_bound(g).bytes), step)
    assert window_bound(g, start, 40_000) > start
    stop = Stop()
    stop.stop()
    assert window_bound(g, start, 40_000, stop=stop) == start
