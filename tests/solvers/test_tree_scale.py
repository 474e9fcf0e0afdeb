"""The tree's union query (the lists' runs merged, runs below the covered bytes skipped)
against a plain scan of the union on random lists, and its skip on long runs of one list."""

from __future__ import annotations

import numpy as np
import pytest

from planner.solvers._tree import _insert, _merge_fit, _past

I64 = np.ndarray


def _lists(
    rng: np.random.Generator, k: int, runs: int, span: int
) -> tuple[tuple[I64, I64, I64], I64, I64, list[list[tuple[int, int]]]]:
    """``k`` lists (some empty) of random runs, inserted as the tree inserts them; also the
    raw ranges each list was given."""
    head = np.zeros(k, dtype=np.int64)
    count = np.zeros(k, dtype=np.int64)
    cap = np.zeros(k, dtype=np.int64)
    pool = (np.empty(8, dtype=np.int64), np.empty(8, dtype=np.int64), np.zeros(1, dtype=np.int64))
    given: list[list[tuple[int, int]]] = [[] for _ in range(k)]
    for s in range(k):
        for _ in range(int(rng.integers(0, runs + 1))):
            lo = int(rng.integers(0, span))
            hi = lo + int(rng.integers(1, max(2, span // 8)))
            pool = _insert(s, lo, hi, head, count, cap, pool)
            given[s].append((lo, hi))
    return pool, head, count, given


def _scan(given: list[list[tuple[int, int]]], s_b: int, a: int, best_fit: bool) -> int:
    """Walk the union's merged gaps from 0: the first gap where ``s_b`` bytes fit at a
    multiple of ``a`` (the smallest such gap with ``best_fit``, first of equals), else just
    above every range."""
    ranges = sorted(r for ranges in given for r in ranges)
    top = 0
    best, best_gap = -1, -1
    for lo, hi in ranges:
        cand = -(-top // a) * a
        if lo > top and cand + s_b <= lo:
            if not best_fit:
                return cand
            if best < 0 or lo - top < best_gap:
                best, best_gap = cand, lo - top
        top = max(top, hi)
    return best if best >= 0 else -(-top // a) * a


def _free(given: list[list[tuple[int, int]]], at: int, s_b: int) -> bool:
    return all(hi <= at or at + s_b <= lo for ranges in given for lo, hi in ranges)


@pytest.mark.parametrize("best_fit", [False, True])
def test_merged_query_matches_a_plain_scan_of_the_union(best_fit: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(1000):
        k = int(rng.integers(1, 9))
        span = int(rng.integers(8, 120))
        pool, head, count, given = _lists(rng, k, int(rng.integers(0, 30)), span)
        lists = np.arange(k, dtype=np.int64)
        for _ in range(4):
            s_b = int(rng.integers(1, span // 4 + 2))
            a = int(rng.choice([1, 2, 4, 8, 16]))
            got = _merge_fit(lists, k, s_b, a, best_fit, pool, head, count)
            assert got == _scan(given, s_b, a, best_fit), (k, s_b, a)
            assert got % a == 0
            assert _free(given, got, s_b)
            if not best_fit:  # the lowest: no aligned offset below it is free
                assert not any(_free(given, c, s_b) for c in range(0, got, a))


def test_lists_skip_runs_below_the_covered_bytes() -> None:
    ends = np.array([0, 3, 5, 9, 10, 14, 20, 21, 40], dtype=np.int64)
    for q in range(ends.shape[0] + 1):
        for top in range(-1, 45):
            want = next((t for t in range(q, ends.shape[0]) if ends[t] > top), ends.shape[0])
            assert _past(ends, 0, ends.shape[0], q, top) == want, (q, top)
    # A list at an offset in the pool: only its own slots are read.
    pool = np.concatenate([np.full(3, 99, dtype=np.int64), ends])
    assert _past(pool, 3, ends.shape[0], 0, 9) == 4
