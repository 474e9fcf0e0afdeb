"""Every registered heuristic yields a valid plan; the portfolio keeps the best."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.solvers.greedy import HEURISTICS, applicable, arena_of, portfolio, run
from planner.validators import validate_plan
from tests.support.plans import plan_from_offsets
from tests.support.strategies import requests


@pytest.mark.parametrize("heuristic", HEURISTICS)
@settings(max_examples=40, deadline=None)
@given(request=requests(max_buffers=12, capacity=False, max_new=False))
def test_every_heuristic_gives_a_valid_plan(heuristic: str, request: PlanRequest) -> None:
    g = build_graph(request)
    if not applicable(g, heuristic):
        assert heuristic.endswith("/skyline")
        assert (g.pinned >= 0).any()
        return
    offsets = run(g, heuristic)
    assert (offsets % g.alignment == 0).all()
    pinned = g.pinned >= 0
    assert (offsets[pinned] == g.pinned[pinned]).all()
    assert arena_of(g, offsets) >= g.lower_bound.bytes
    plan = plan_from_offsets(request, g, offsets)
    report = validate_plan(request, plan)
    assert report.valid, report.violations


@settings(max_examples=60, deadline=None)
@given(requests(max_buffers=12, capacity=False))
def test_portfolio_keeps_the_smallest_arena(request: PlanRequest) -> None:
    g = build_graph(request)
    result = portfolio(g)
    arenas = dict(result.tried)
    assert result.arena_bytes == min(arenas.values())
    # Ties go to the first heuristic listed.
    first = next(name for name, arena in result.tried if arena == result.plan_arena)
    assert result.name == first
    assert arena_of(g, result.plan_offsets) == result.plan_arena
    again = portfolio(build_graph(request))
    assert again.tried == result.tried
    assert np.array_equal(again.plan_offsets, result.plan_offsets)


def test_portfolio_stops_at_the_lower_bound() -> None:
    request = PlanRequest.model_validate(
        {"buffers": [{"id": f"b{i}", "size": 16, "start": i, "end": i + 1} for i in range(6)]}
    )
    g = build_graph(request)
    result = portfolio(g, bound=g.lower_bound.bytes)
    assert result.arena_bytes == 16
    assert len(result.tried) == 1


def test_skyline_needs_no_pins() -> None:
    request = PlanRequest.model_validate(
        {"buffers": [{"id": "a", "size": 16, "start": 0, "end": 2, "offset": 32}]}
    )
    g = build_graph(request)
    assert not applicable(g, "size/skyline")
    assert applicable(g, "size/best-fit")
    assert [name for name, _ in portfolio(g).tried] == [
        h for h in HEURISTICS if not h.endswith("/skyline")
    ]


def test_best_fit_takes_the_tightest_gap() -> None:
    # Pinned walls leave a 32-byte gap at 0 and a 16-byte gap at 48; a 16-byte buffer
    # goes to 0 with first fit and to 48 with best fit.
    request = PlanRequest.model_validate(
        {
            "buffers": [
                {"id": "w1", "size": 16, "start": 0, "end": 4, "offset": 32},
                {"id": "w2", "size": 16, "start": 0, "end": 4, "offset": 64},
                {"id": "x", "size": 16, "start": 1, "end": 3},
            ]
        }
    )
    g = build_graph(request)
    assert run(g, "size/first-fit")[2] == 0
    assert run(g, "size/best-fit")[2] == 48


def test_random_skyline_does_not_depend_on_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.solvers.greedy as greedy

    rng = np.random.default_rng(7)
    request = PlanRequest.model_validate(
        {
            "buffers": [
                {
                    "id": f"b{i}",
                    "size": int(rng.integers(1, 500)),
                    "start": int(s),
                    "end": int(s + rng.integers(1, 30)),
                }
                for i, s in enumerate(rng.integers(0, 100, 150))
            ]
        }
    )
    g = build_graph(request)
    monkeypatch.setattr(greedy, "PARALLEL_MIN_SKYLINE", 1)
    threaded = run(g, "random/skyline")
    monkeypatch.setattr(greedy, "PARALLEL_MIN_SKYLINE", 10**9)
    alone = run(build_graph(request), "random/skyline")
    assert np.array_equal(threaded, alone)
    assert validate_plan(request, plan_from_offsets(request, g, alone)).valid


def test_stream_hands_a_free_thread_the_next_item() -> None:
    """While the first item runs, the other thread takes items 1, 2 and 3 in turn: the first
    waits for the third, which batches of two would only start after it (then it times
    out)."""
    import threading

    from planner.solvers.greedy import _stream

    third_done = threading.Event()

    def work(x: int) -> tuple[int, bool]:
        if x == 0:
            return x, third_done.wait(timeout=10)
        if x == 3:
            third_done.set()
        return x, True

    assert list(_stream(work, [0, 1, 2, 3, 4], workers=2)) == [(x, True) for x in range(5)]


def test_stream_closed_early_runs_no_more_items() -> None:
    import threading

    from planner.solvers.greedy import _stream

    started: list[int] = []
    release = threading.Event()

    def work(x: int) -> int:
        started.append(x)
        if x > 0:
            release.wait(timeout=10)
        return x

    results = _stream(work, list(range(20)), workers=2)
    assert next(results) == 0
    threading.Timer(0.2, release.set).start()  # the items running finish, once closed
    results.close()
    assert sorted(started) == list(range(len(started)))
    assert len(started) <= 3  # the first, and what the two threads had begun
