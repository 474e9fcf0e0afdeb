"""The clock caps exact methods at the request's deadline, not at their own share; where it
ends work the budgets would have let run on, the plan says so (``solver.cut_by_clock``)."""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

import pytest

import planner
import planner.core.clock as clock
import planner.pipeline.facade as facade
from planner.core.clock import deadline, expired, note_cut, wall_limit, watching
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.solvers.auto import WARM_UP_BUFFERS
from planner.solvers.exact import note_cpsat_cut
from planner.solvers.search import solve_search
from tests.support.bruteforce import assert_valid_offsets, brute_force

STAIRS = PlanRequest.model_validate(
    {
        "options": {"sync": "none"},
        "buffers": [
            {"id": "P", "size": 5, "start": 4, "end": 6},
            {"id": "Q", "size": 3, "start": 1, "end": 3},
            {"id": "d", "size": 3, "start": 2, "end": 4},
            {"id": "e", "size": 2, "start": 3, "end": 6},
            {"id": "g", "size": 10, "start": 5, "end": 7},
        ],
    }
)


def test_wall_limit_is_the_share_without_a_deadline_and_what_is_left_with_one() -> None:
    assert wall_limit(0.25) == 0.25
    with deadline(30.0):
        left = wall_limit(0.25)
        assert 29.0 < left <= 30.0
        with deadline(0.0):
            time.sleep(0.001)
            assert wall_limit(0.25) == 0.0  # never negative
        assert 29.0 < wall_limit(0.25) <= 30.0
    assert wall_limit(0.25) == 0.25


def test_a_tiny_share_runs_its_node_budget_within_the_deadline() -> None:
    g = build_graph(STAIRS, "none")
    search = partial(solve_search, g, capacity=None, lower_bound=g.lower_bound.bytes, hint=None)
    # By its own share of a nanosecond the clock stops the search before it starts...
    alone = search(time_limit=1e-9, nodes=1_000_000)
    assert alone.offsets is None
    assert not alone.proved_optimal
    # ...while under a request's deadline the node budget decides, the same every time.
    with deadline(30.0):
        first = search(time_limit=1e-9, nodes=1_000_000)
        again = search(time_limit=1e-9, nodes=1_000_000)
    assert first.proved_optimal
    assert first.arena_bytes == brute_force(g)
    assert first.offsets is not None
    assert again.offsets is not None
    assert first.offsets.tolist() == again.offsets.tolist()
    assert_valid_offsets(STAIRS, g, first.offsets)


def test_a_cut_is_noted_only_where_the_clock_ends_work() -> None:
    with watching() as cuts:
        assert not expired()  # no deadline: nothing is cut
        with deadline(30.0):
            assert not expired()
        assert not cuts.cut
        with deadline(0.0):
            time.sleep(0.001)
            assert expired()
        assert cuts.cut
    with watching() as outer, watching() as inner:
        note_cut()  # a part of the request (a spilled half) notes in the request's record
    assert inner is outer
    assert outer.cut
    note_cut()  # outside a request: noted nowhere, and no error


def test_cpsat_cut_means_its_clock_cap_came_before_its_deterministic_limit() -> None:
    # (finished, wall seconds, cap, deterministic time, deterministic limit)
    runs = {
        (False, 1.0, 1.0, 0.2, 1.0): True,
        (True, 1.0, 1.0, 0.2, 1.0): False,  # proved: nothing left to cut
        (False, 0.5, 1.0, 0.2, 1.0): False,  # stopped before its cap
        (False, 1.0, 1.0, 1.0, 1.0): False,  # the deterministic limit ended it
    }
    for args, cut in runs.items():
        with watching() as cuts:
            note_cpsat_cut(*args)
        assert cuts.cut is cut, args


def test_a_search_stopped_by_the_clock_notes_a_cut_and_one_stopped_by_nodes_does_not() -> None:
    g = build_graph(STAIRS, "none")
    search = partial(solve_search, g, capacity=None, lower_bound=g.lower_bound.bytes, hint=None)
    with watching() as cuts, deadline(30.0):
        search(time_limit=1e-9, nodes=3)  # too few nodes to decide: the budget ends it
    assert not cuts.cut
    with watching() as cuts, deadline(0.0):
        time.sleep(0.001)
        search(time_limit=1e-9, nodes=1_000_000)
    assert cuts.cut


def _plan_json(request: dict[str, Any]) -> str:
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return plan.model_dump_json()


def _late(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine that spent the whole time limit before the first optional step: the request
    starts on the real clock, and every reading after says an hour has passed."""
    monkeypatch.setattr(facade, "now", time.perf_counter)
    monkeypatch.setattr(clock, "now", lambda: time.perf_counter() + 3600.0)


# Ten buffers greedy cannot place at the bound: the skyline heuristics, the search and
# CP-SAT all run (``solvers.auto.WARM_UP_BUFFERS``).
HARD = {
    "barriers": [1],
    "buffers": [
        {"id": f"b{i}", "size": size, "start": start, "end": end, "alignment": align}
        for i, (size, start, end, align) in enumerate(WARM_UP_BUFFERS)
    ],
}
EASY = {  # greedy meets the bound: there is no optional work to cut
    "buffers": [
        {"id": "a", "size": 64, "start": 0, "end": 2},
        {"id": "b", "size": 32, "start": 1, "end": 3},
    ],
    "options": {"sync": "existing"},
}


def test_plans_the_clock_did_not_cut_are_the_same_and_unmarked() -> None:
    first = _plan_json(HARD)
    assert "cut_by_clock" not in first
    assert first == _plan_json(HARD)
    assert json.loads(first)["solver"]["name"].startswith("exact:")  # the exact methods ran


def test_a_plan_the_clock_cut_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = json.loads(_plan_json(HARD))
    _late(monkeypatch)
    cut = json.loads(_plan_json(HARD))
    assert cut["solver"]["cut_by_clock"] is True
    # The cut is real: the exact methods never ran, so the plan is greedy's and not proved.
    assert cut["solver"]["name"].startswith("greedy:")
    assert whole["solver"]["proved_optimal"]
    assert not cut["solver"]["proved_optimal"]
    assert planner.Plan.model_validate(cut).solver.cut_by_clock  # it reads back


def test_a_late_clock_with_nothing_to_cut_leaves_the_plan_unmarked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_time = _plan_json(EASY)
    _late(monkeypatch)
    assert _plan_json(EASY) == on_time
    assert "cut_by_clock" not in on_time
