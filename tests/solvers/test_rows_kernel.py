"""The search's neighbour lists: ``rows_by_rank`` lists each row's columns by rank, as a
sort of every pair by (row, column rank) does, compiled and as Python alike."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import pytest

from planner.core._jit import Kernel
from planner.solvers._rows_kernel import rows_by_rank

I64 = npt.NDArray[np.int64]


def _sorted_rows(src: I64, dst: I64, rank: I64) -> list[list[int]]:
    """Each row's columns by rank, from a plain sort of the pairs."""
    n = rank.size
    rows: list[list[int]] = [[] for _ in range(n)]
    for k in np.lexsort((rank[dst], src)).tolist():
        rows[int(src[k])].append(int(dst[k]))
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["compiled", "interpreted"])
def test_rows_list_their_columns_by_rank(seed: int, mode: str) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    m = int(rng.integers(0, 200))
    src = rng.integers(0, n, m).astype(np.int64)
    dst = rng.integers(0, n, m).astype(np.int64)
    rank = rng.permutation(n).astype(np.int64)
    run = rows_by_rank if mode == "compiled" else cast(Kernel, rows_by_rank).py_func
    ptr, cols = run(src, dst, rank)
    assert ptr.tolist()[0] == 0
    assert ptr.tolist()[-1] == m
    got = [cols[ptr[i] : ptr[i + 1]].tolist() for i in range(n)]
    assert got == _sorted_rows(src, dst, rank)
