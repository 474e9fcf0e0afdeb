"""Interference graph: checked against brute force over all pairs and against networkx."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
from hypothesis import given, settings

from planner.core.graph import build_graph, count_overlaps, extend_to_barriers, sync_barriers
from planner.core.models import PlanRequest
from tests.support.strategies import requests


def brute_conflicts(g_start: list[int], g_end: list[int]) -> set[tuple[int, int]]:
    n = len(g_start)
    return {
        (i, j)
        for i, j in itertools.combinations(range(n), 2)
        if g_start[i] < g_end[j] and g_start[j] < g_end[i]
    }


def test_extension_per_policy() -> None:
    request = PlanRequest.model_validate(
        {
            "barriers": [4, 9],
            "buffers": [
                {"id": "A", "size": 8, "start": 0, "end": 4},  # ends at a barrier: no extension
                {"id": "B", "size": 8, "start": 0, "end": 6},  # occupied until 9
                {"id": "C", "size": 8, "start": 6, "end": 10},  # no barrier after: horizon
            ],
            "options": {"sync": "existing"},
        }
    )
    assert build_graph(request).occupied_end.tolist() == [4, 9, 10]
    assert build_graph(request, "none").occupied_end.tolist() == [4, 6, 10]
    assert build_graph(request, "insert").occupied_end.tolist() == [4, 6, 10]
    restricted = request.model_copy(
        update={
            "options": request.options.model_copy(
                update={"sync": "insert", "barrier_candidates": [7]}
            )
        }
    )
    assert sync_barriers(restricted) == [4, 7, 9]
    assert build_graph(restricted).occupied_end.tolist() == [4, 7, 10]


def test_extension_starts_after_the_last_access() -> None:
    # B is live until 8 but last touched at 2: the barrier at 4 frees it once B ends, not 9.
    read = {"op": "read", "at": 2, "bytes": 4, "threads": "all"}
    request = PlanRequest.model_validate(
        {
            "block": [32],
            "barriers": [4, 9],
            "buffers": [
                {"id": "A", "size": 8, "start": 0, "end": 6},
                {"id": "B", "size": 8, "start": 0, "end": 8, "accesses": [read]},
                {"id": "C", "size": 8, "start": 8, "end": 10},
            ],
            "options": {"sync": "existing"},
        }
    )
    assert build_graph(request).occupied_end.tolist() == [9, 8, 10]
    assert build_graph(request, barriers=[1, 3]).occupied_end.tolist() == [10, 8, 10]
    assert build_graph(request, sizes=[16, 4, 2]).size.tolist() == [16, 4, 2]


def test_extend_keeps_ends_on_barriers() -> None:
    end = np.array([3, 5, 8], dtype=np.int64)
    assert extend_to_barriers(end, [5], 8).tolist() == [5, 5, 8]
    assert extend_to_barriers(end, None, 8).tolist() == [3, 5, 8]


@settings(max_examples=150, deadline=None)
@given(requests(max_buffers=14, pins=False))
def test_graph_matches_brute_force(request: PlanRequest) -> None:
    g = build_graph(request)
    start, occ, end = g.start.tolist(), g.occupied_end.tolist(), g.end.tolist()
    conflicts = brute_conflicts(start, occ)
    live = brute_conflicts(start, end)
    assert set(g.edges()) == conflicts
    assert g.conflict_edges == len(conflicts)
    assert g.live_edges == len(live)
    assert g.hazard_edges == len(conflicts - live)
    assert g.degree.tolist() == [sum(1 for e in conflicts if i in e) for i in range(g.n)]
    # Components and edge kinds agree with networkx on the explicit graph.
    nxg = g.to_networkx()
    assert g.components == nx.number_connected_components(nxg)
    for a, b, kind in nxg.edges(data="kind"):
        i, j = sorted((g.ids.index(a), g.ids.index(b)))
        assert kind == ("live" if (i, j) in live else "hazard")
    labels = g.component.tolist()
    for comp in nx.connected_components(nxg):
        assert len({labels[g.ids.index(v)] for v in comp}) == 1
    # Lower bound: the heaviest point, and its certificate lists exactly who is there.
    points = range(max(occ, default=0) + 1)
    peak = max(
        (
            sum(s for s, a, b in zip(g.size.tolist(), start, occ, strict=True) if a <= p < b)
            for p in points
        ),
        default=0,
    )
    bound = g.lower_bound
    assert bound.bytes == peak
    if g.n:
        assert bound.point is not None
        assert sum(g.size[i] for i in bound.buffers) == peak
        assert all(start[i] <= bound.point < occ[i] for i in bound.buffers)


def test_count_overlaps_touching_intervals_do_not_overlap() -> None:
    start = np.array([0, 2, 2], dtype=np.int64)
    end = np.array([2, 4, 3], dtype=np.int64)
    assert count_overlaps(start, end) == 1


def test_aligned_bound_counts_padding() -> None:
    request = PlanRequest.model_validate(
        {
            "buffers": [
                {"id": "a", "size": 1, "start": 0, "end": 2, "alignment": 4},
                {"id": "b", "size": 1, "start": 0, "end": 2, "alignment": 4},
                {"id": "c", "size": 6, "start": 0, "end": 1, "alignment": 2},
            ]
        }
    )
    g = build_graph(request)
    assert g.lower_bound.bytes == 8
    # Smallest alignment at point 0 is 2: sizes round to 2 + 2 + 6, less one padding of 1.
    assert g.aligned_bound.bytes == 9
    assert g.aligned_bound.point == 0
    # At point 1 only a and b (alignment 4): 4 + 4 - 3 = 5 < 9.


@settings(max_examples=100, deadline=None)
@given(requests(max_buffers=6, pins=False, capacity=False, max_new=False))
def test_aligned_bound_never_exceeds_the_optimum(request: PlanRequest) -> None:
    from planner.solvers.search import solve_search

    g = build_graph(request)
    result = solve_search(
        g, capacity=None, lower_bound=g.lower_bound.bytes, hint=None, time_limit=5.0
    )
    assert result.proved_optimal
    assert result.arena_bytes is not None
    assert g.lower_bound.bytes <= g.aligned_bound.bytes <= result.arena_bytes
