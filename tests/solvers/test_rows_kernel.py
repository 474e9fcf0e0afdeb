"""The search's neighbour lists: ``neighbour_rows`` lists each buffer's conflicting buffers
by rank, as a plain sort of every conflicting pair does, compiled and as Python alike."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import pytest

from planner.core._jit import Kernel
from planner.core.graph import build_graph
from planner.generate import random_request
from planner.solvers._rows_kernel import neighbour_rows

I64 = npt.NDArray[np.int64]


def _sorted_rows(start: I64, end: I64, rank: I64) -> list[list[int]]:
    """Each buffer's conflicting buffers by rank, from every pair of lifetimes that meet."""
    n = rank.size
    rows: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        met = [j for j in range(n) if j != i and start[i] < end[j] and start[j] < end[i]]
        rows[i] = sorted(met, key=lambda j: int(rank[j]))
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["compiled", "python"])
def test_rows_list_each_buffers_neighbours_by_rank(seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    g = build_graph(random_request(n, overlap=float(rng.uniform(0.05, 0.6)), seed=seed), "none")
    rank = rng.permutation(n).astype(np.int64)
    _, hi, _, _ = g.neighbours
    run = neighbour_rows if mode == "compiled" else cast(Kernel, neighbour_rows).py_func
    ptr, cols = run(g.by_start.astype(np.int64), hi.astype(np.int64), rank)
    got = [cols[ptr[i] : ptr[i + 1]].tolist() for i in range(n)]
    expected = _sorted_rows(g.start, g.occupied_end, rank)
    assert sum(len(r) for r in expected) > 0 or n < 3
    assert got == expected
