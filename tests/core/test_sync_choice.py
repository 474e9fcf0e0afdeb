"""The synchronisation choice (``planner.core.sync_choice``) against brute force: interval
stabbing is fewest, the choice on sets is cheapest where it says proved and serves every
need it can either way, and on intervals both shapes choose the same points."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.asyncs import chosen_fences
from planner.core.sync_choice import (
    ExplicitSets,
    Intervals,
    choose_on_sets,
    stab,
    stabbing_points,
)

POINTS = 10  # points 0 .. 9


def _cheapest(
    needs: list[frozenset[int]], pool: list[int], weight: dict[int, int]
) -> tuple[int, int]:
    """Brute force: the fewest executions, then points, serving every servable need."""
    servable = [s for s in needs if s & set(pool)]
    return min(
        (sum(weight[p] for p in c), len(c))
        for k in range(len(pool) + 1)
        for c in itertools.combinations(pool, k)
        if all(s & set(c) for s in servable)
    )


sets_st = st.lists(
    st.frozensets(st.integers(0, POINTS - 1), min_size=1, max_size=4), min_size=1, max_size=7
)
weights_st = st.lists(st.integers(1, 4), min_size=POINTS, max_size=POINTS)
allowed_st = st.lists(st.integers(0, POINTS - 1), min_size=1, max_size=7, unique=True)


@settings(max_examples=150, deadline=None)
@given(sets_st, weights_st, allowed_st, st.sampled_from([0, 2, 500]))
def test_the_choice_on_sets_is_cheapest_where_proved(
    serves: list[frozenset[int]], weights: list[int], allowed: list[int], nodes: int
) -> None:
    allowed = sorted(allowed)
    weight = dict(enumerate(weights))
    needs = ExplicitSets(serves, weight, allowed)
    want = np.ones(len(serves), dtype=np.bool_)
    choice = choose_on_sets(needs, want, allowed, [], max_nodes=nodes, work=10_000)
    assert set(choice.points) <= set(allowed)
    assert all(s & set(choice.points) for s in serves if s & set(allowed))
    best = _cheapest(serves, allowed, weight)
    cost = (sum(weight[p] for p in choice.points), len(choice.points))
    assert choice.bound <= best <= cost
    if choice.proved:
        assert cost == best
    if nodes == 500:  # enough for any of these: the search ends, so the choice is proved
        assert choice.proved


intervals_st = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None)
@given(intervals_st, st.lists(st.integers(0, 18), min_size=1, max_size=6))
def test_on_intervals_both_shapes_choose_the_same_points(
    intervals: list[tuple[int, int]], cands: list[int]
) -> None:
    candidates = sorted(set(cands))
    left = np.asarray([a for a, _ in intervals], dtype=np.int64)
    right = np.asarray([b for _, b in intervals], dtype=np.int64)
    points, missed = stab(Intervals(left, right), candidates)
    listed, listed_missed = stabbing_points(intervals, candidates)
    assert points == listed
    assert sorted(intervals[i] for i in np.flatnonzero(missed).tolist()) == sorted(listed_missed)
    serves = [frozenset(range(a, b + 1)) for a, b in intervals]
    needs = ExplicitSets(serves, dict.fromkeys(range(19), 1), candidates)
    want = np.ones(len(intervals), dtype=np.bool_)
    choice = choose_on_sets(needs, want, candidates, [], max_nodes=500, work=10_000)
    assert choice.points == sorted(points)
    assert choice.proved


@settings(max_examples=150, deadline=None)
@given(sets_st, weights_st)
def test_fence_points_are_the_cheapest(serves: list[frozenset[int]], weights: list[int]) -> None:
    """Proxy fences (``core.asyncs.chosen_fences``) go through the same choice: every pair's
    window gets a fence, at the fewest executions, then points, as brute force finds them."""
    weight = dict(enumerate(weights))
    windows = {(2 * k, 2 * k + 1): sorted(s) for k, s in enumerate(serves)}
    shared = set(windows)
    chosen = chosen_fences(windows, shared, weight.__getitem__)
    assert all(s & set(chosen) for s in serves)
    pool = sorted(frozenset().union(*serves))
    assert (sum(weight[p] for p in chosen), len(chosen)) == _cheapest(serves, pool, weight)
    # Pairs that do not share bytes need no fence.
    assert chosen_fences(windows, set(), weight.__getitem__) == []


def test_a_fence_point_shared_by_windows_that_are_not_runs() -> None:
    """Windows of barrier points in the access's scope skip the points of inner loops, so they
    need not be runs of consecutive points: one fence at 1 serves {1, 3} and {1, 2}."""
    windows = {(0, 1): [1, 3], (2, 3): [1, 2]}
    assert chosen_fences(windows, {(0, 1), (2, 3)}, lambda _p: 1) == [1]
