"""New block barriers for partitions with loops: the points come from the synchronisation
choice on explicit sets, at the fewest executions, then the fewest points."""

from __future__ import annotations

from itertools import combinations

from planner.pipeline.partitioned_path_barriers import stab


def _cheapest(sets: list[frozenset[int]], runs: dict[int, int]) -> tuple[int, int]:
    """(executions, points) of the cheapest points meeting every set, by brute force."""
    points = sorted(frozenset().union(*sets))
    best = (sum(runs.values()) + 1, len(points) + 1)
    for k in range(1, len(points) + 1):
        for chosen in combinations(points, k):
            if all(s & set(chosen) for s in sets):
                best = min(best, (sum(runs[p] for p in chosen), k))
    return best


def test_a_point_in_the_loop_serving_both_pairs_loses_to_two_run_once() -> None:
    # Point 5 lies in a loop body (4 runs) and serves both pairs; points 1 and 2 run once.
    runs = {5: 4, 1: 1, 2: 1}
    chosen = stab([frozenset({5, 1}), frozenset({5, 2})], runs.__getitem__)
    assert chosen == [1, 2]


def test_the_choice_is_the_cheapest_on_small_cases() -> None:
    cases = [
        ([frozenset({1, 2}), frozenset({2, 3}), frozenset({3, 4})], {1: 1, 2: 3, 3: 1, 4: 2}),
        ([frozenset({0, 6}), frozenset({6}), frozenset({0, 7})], {0: 2, 6: 1, 7: 1}),
        ([frozenset({1, 2, 3}), frozenset({3, 4}), frozenset({4, 5})], dict.fromkeys(range(6), 1)),
    ]
    for sets, runs in cases:
        chosen = stab(sets, runs.__getitem__)
        assert all(s & set(chosen) for s in sets)
        assert (sum(runs[p] for p in chosen), len(chosen)) == _cheapest(sets, runs)


def test_empty_sets_need_no_point() -> None:
    assert stab([frozenset()], lambda p: 1) == []
    assert stab([], lambda p: 1) == []
