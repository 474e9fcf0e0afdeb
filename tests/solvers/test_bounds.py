"""The clique bound: exact on one live set, never above the optimum."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.solvers.bounds import CLIQUE_MAX, clique_bound, stack_height
from tests.support.bruteforce import brute_force
from tests.support.hazards import brute_optimum, hazard_requests
from tests.support.plans import plan_from_offsets
from tests.support.strategies import requests


def _request(buffers: list[dict[str, Any]]) -> PlanRequest:
    return PlanRequest.model_validate({"buffers": buffers, "options": {"sync": "none"}})


def test_stack_height_pads_for_alignment() -> None:
    # y and z start at multiples of 128: one at 0, x (16 B) above it, the other at 128.
    size = np.asarray([16, 16, 16], dtype=np.int64)
    alignment = np.asarray([16, 128, 128], dtype=np.int64)
    assert stack_height(size, alignment) == 144
    assert stack_height(size[:1], alignment[:1]) == 16


def test_clique_bound_names_its_point_and_buffers() -> None:
    g = build_graph(
        _request(
            [
                {"id": "x", "size": 16, "start": 0, "end": 4, "alignment": 16},
                {"id": "y", "size": 16, "start": 1, "end": 3, "alignment": 128},
                {"id": "z", "size": 16, "start": 2, "end": 5, "alignment": 128},
                {"id": "w", "size": 64, "start": 5, "end": 6, "alignment": 16},
            ]
        )
    )
    assert g.aligned_bound.bytes == 64  # w alone; at point 2 the smallest alignment is 16
    bound = clique_bound(g)
    assert bound.bytes == 144 == brute_force(g)
    assert bound.point == 2
    assert bound.buffers == [0, 1, 2]
    assert clique_bound(g, floor=200).bytes == 200  # nothing beats the floor


def _lowest_top(size: list[int], alignment: list[int]) -> int:
    """Brute force: the lowest top over every order, each buffer at the lowest aligned
    offset above the one before."""
    best = None
    for order in itertools.permutations(range(len(size))):
        top = 0
        for i in order:
            top = -(-top // alignment[i]) * alignment[i] + size[i]
        best = top if best is None else min(best, top)
    return 0 if best is None else best


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 300), st.sampled_from([1, 2, 8, 16, 32, 128])),
        min_size=0,
        max_size=7,
    )
)
def test_stack_height_is_the_lowest_top_of_every_order(pairs: list[tuple[int, int]]) -> None:
    # Sizes past the largest alignment and repeated classes: the program takes buffers of a
    # class (alignment, size modulo the largest alignment) as interchangeable.
    size = np.asarray([s for s, _ in pairs], dtype=np.int64)
    alignment = np.asarray([a for _, a in pairs], dtype=np.int64)
    assert stack_height(size, alignment) == _lowest_top(size.tolist(), alignment.tolist())


def test_clique_bound_stacks_many_buffers_of_few_classes() -> None:
    # 20 buffers of 16 bytes aligned to 128 and one aligned to 16, all live at once: each of
    # the 20 needs its own multiple of 128, so the highest ends at 19 * 128 + 16 at least,
    # and the 21st fits in a gap. Over CLIQUE_MAX buffers, but of two classes only.
    buffers = [
        {"id": f"a{i}", "size": 16, "start": 0, "end": 2, "alignment": 128} for i in range(20)
    ]
    buffers.append({"id": "b", "size": 16, "start": 1, "end": 2, "alignment": 16})
    g = build_graph(_request(buffers))
    assert g.n > CLIQUE_MAX
    assert clique_bound(g).bytes == 19 * 128 + 16


@st.composite
def one_point(draw: st.DrawFn) -> PlanRequest:
    """Up to 6 buffers all live at point 1, random sizes and alignments."""
    n = draw(st.integers(1, 6))
    return _request(
        [
            {
                "id": f"b{i}",
                "size": draw(st.integers(1, 40)),
                "start": draw(st.integers(0, 1)),
                "end": draw(st.integers(2, 3)),
                "alignment": draw(st.sampled_from([1, 4, 16, 32])),
            }
            for i in range(n)
        ]
    )


@settings(max_examples=40, deadline=None)
@given(one_point())
def test_exact_when_everything_is_live_together(request: PlanRequest) -> None:
    g = build_graph(request)
    # Where alignment can pad, the bound is the optimum itself; else the peak is.
    assert max(clique_bound(g).bytes, g.lower_bound.bytes) == brute_force(g)


@settings(max_examples=60, deadline=None)
@given(requests(max_buffers=6, pins=True, capacity=False, max_new=False))
def test_never_above_the_optimum(request: PlanRequest) -> None:
    g = build_graph(request)
    optimum = brute_force(g)
    if optimum is None:
        return  # pins clash: nothing to compare with
    bound = clique_bound(g)
    assert bound.bytes <= optimum
    if bound.buffers:
        members = np.asarray(bound.buffers, dtype=np.int64)
        assert stack_height(g.size[members], g.alignment[members]) == bound.bytes


@settings(max_examples=60, deadline=None)
@given(hazard_requests())
def test_request_bound_never_above_the_optimum(req: PlanRequest) -> None:
    """The bound a plan reports (barriers, caps and aliases counted) is at most the optimum
    found by brute force, and a plan the bound proves optimal is."""
    import planner

    optimum, offsets, barriers, aliased = brute_optimum(req)
    g = build_graph(req)
    found = plan_from_offsets(req, g, np.asarray(offsets, dtype=np.int64))
    inserted = sorted(set(barriers) - set(req.barriers))
    found = found.model_copy(
        update={
            "barriers": found.barriers.model_copy(update={"inserted": inserted}),
            "aliases": aliased,
        }
    )
    assert planner.validate(req, found).valid  # the brute force's optimum is a plan
    plan = planner.plan(req)
    assert plan.lower_bound <= optimum
    assert plan.solver.bound <= optimum
    assert plan.arena_bytes >= optimum
    assert planner.validate(req, plan).valid
    if plan.status == "optimal":
        assert plan.arena_bytes == optimum


def test_barrier_hazards_reach_the_optimum_of_the_epilogue() -> None:
    """All three buffers conflict on the existing barriers (none between the main loop's
    last reads and the epilogue's first write): 32768 bytes is optimal and reported so;
    a cap of no new barriers is the same request."""
    import json
    from pathlib import Path

    import planner

    data = json.loads(Path("examples/nvfuser_matmul_epilogue.json").read_text())
    for options in ({"sync": "existing"}, {"sync": "insert", "max_new_barriers": 0}):
        req = PlanRequest.model_validate({**data, "options": options})
        plan = planner.plan(req)
        assert planner.validate(req, plan).valid
        assert plan.status == "optimal"
        assert plan.arena_bytes == plan.lower_bound == 32768
        assert plan.solver.gap == 0.0
    insert = PlanRequest.model_validate({**data, "options": {"sync": "insert"}})
    plan = planner.plan(insert)
    assert planner.validate(insert, plan).valid
    assert plan.arena_bytes == plan.lower_bound == 16384  # a new barrier lets them share


def _chain(cap: int | None) -> PlanRequest:
    """Eight buffers one after another (100, 200, 300, 100, ... bytes), no barrier yet: the
    buffers between two barriers all conflict, so a cap of k new barriers splits the chain
    into k + 1 runs and the largest run's sum is the optimum."""
    buffers = [
        {"id": f"b{i}", "size": 100 * (1 + i % 3), "start": 2 * i, "end": 2 * i + 2}
        for i in range(8)
    ]
    options = {"sync": "insert", "max_new_barriers": cap, "time_limit": 2.0}
    return PlanRequest.model_validate({"alignment": 4, "buffers": buffers, "options": options})


@pytest.mark.parametrize(("cap", "optimum"), [(0, 1500), (1, 800), (2, 600), (None, 300)])
def test_a_cap_of_new_barriers_bounds_the_plan(cap: int | None, optimum: int) -> None:
    """The bound is the least over the barrier sets within the cap: the best split of the
    chain, found here by hand (prefix sums 1 3 6 7 9 12 13 15, in hundreds of bytes)."""
    import planner

    req = _chain(cap)
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.lower_bound == optimum
    assert plan.arena_bytes >= optimum
    if cap in (0, 1, None):  # one split or none: the greedy barrier choice finds the best
        assert plan.status == "optimal"
        assert plan.arena_bytes == optimum
