"""The clique bound: exact on one live set, never above the optimum."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.graph import build_graph
from planner.models import PlanRequest
from solvers.bounds import clique_bound, stack_height

from .bruteforce import brute_force
from .strategies import requests


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
