"""Reuses and barrier stabbing, against brute force."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.barriers import choose_barriers, reuses
from planner.core.sync_choice import stabbing_points

intervals_st = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=8,
)


def hits_all(points: list[int], intervals: list[tuple[int, int]]) -> bool:
    return all(any(a <= p <= b for p in points) for a, b in intervals)


@settings(max_examples=200, deadline=None)
@given(intervals_st, st.one_of(st.none(), st.lists(st.integers(0, 18), max_size=6)))
def test_stab_is_minimum(intervals: list[tuple[int, int]], cands: list[int] | None) -> None:
    candidates = None if cands is None else sorted(set(cands))
    chosen, missed = stabbing_points(intervals, candidates)
    pool = list(range(19)) if candidates is None else candidates
    coverable = [iv for iv in intervals if any(iv[0] <= p <= iv[1] for p in pool)]
    assert sorted(set(missed)) == sorted(set(intervals) - set(coverable))
    assert set(chosen) <= set(pool)
    assert hits_all(chosen, coverable)
    smallest = next(
        k
        for k in range(len(coverable) + 1)
        if any(hits_all(list(c), coverable) for c in itertools.combinations(pool, k))
    )
    assert len(chosen) == smallest


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 10), st.integers(1, 4), st.integers(0, 3), st.integers(1, 3)),
        max_size=9,
    )
)
def test_reuses_bind_every_sequential_sharing(rows: list[tuple[int, int, int, int]]) -> None:
    # Keep only buffers that overlap no live buffer in address: a valid placement.
    kept: list[tuple[int, int, int, int]] = []
    for s, length, off, size in rows:
        e = s + length
        if all(
            not (s < e2 and s2 < e and off < o2 + z2 and o2 < off + size) for s2, e2, o2, z2 in kept
        ):
            kept.append((s, e, off, size))
    starts, ends, offsets, sizes = (
        np.array([k[column] for k in kept], dtype=np.int64) for column in range(4)
    )
    found = reuses(starts, ends, offsets, sizes)
    pairs = [(r.after, r.before) for r in found]
    sharing = [
        (kept[a][1], kept[b][0])
        for a, b in itertools.permutations(range(len(kept)), 2)
        if kept[a][1] <= kept[b][0]
        and kept[a][2] < kept[b][2] + kept[b][3]
        and kept[b][2] < kept[a][2] + kept[a][3]
    ]
    # A set of barriers protects every sharing iff it protects the binding reuses.
    for barriers in itertools.chain.from_iterable(
        itertools.combinations(range(15), k) for k in range(3)
    ):
        assert hits_all(list(barriers), sharing) == hits_all(list(barriers), pairs)


def test_choose_prefers_existing_barriers() -> None:
    start = np.array([0, 4, 0, 6], dtype=np.int64)
    end = np.array([3, 6, 5, 8], dtype=np.int64)
    offset = np.array([0, 0, 8, 8], dtype=np.int64)
    size = np.array([8, 8, 8, 8], dtype=np.int64)
    found = reuses(start, end, offset, size)  # [3, 4] and [5, 6]
    choice = choose_barriers(found, [4], "insert", None)
    assert choice.inserted == [6]
    assert choice.required == [4, 6]
    none = choose_barriers(found, [4], "none", None)
    assert none.inserted == []
    assert none.required == [4, 6]
    limited = choose_barriers(found, [4], "insert", [1])
    assert [(r.after, r.before) for r in limited.missed] == [(5, 6)]
    # Candidates are where "insert" may add barriers: under "none" the caller synchronizes
    # wherever the plan asks, so they limit nothing.
    caller = choose_barriers(found, [4], "none", [1])
    assert (caller.inserted, caller.required, caller.missed) == ([], [4, 6], [])
