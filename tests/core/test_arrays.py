"""``planner.core.arrays.distinct``: ``np.unique`` of integer arrays, without numpy.ma."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.arrays import distinct

_VALUES = st.lists(st.integers(-(1 << 62), 1 << 62), max_size=60)


@given(_VALUES, st.sampled_from([np.int64, np.int32]))
@settings(max_examples=200, deadline=None)
def test_distinct_is_unique(values: list[int], dtype: type[np.integer]) -> None:
    if dtype is np.int32:
        values = [v % (1 << 31) for v in values]
    array = np.asarray(values, dtype=np.int64).astype(dtype)
    got, want = distinct(array), np.unique(array)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_distinct_flattens() -> None:
    grid = np.array([[3, 1], [3, 2]], dtype=np.int64)
    assert distinct(grid).tolist() == [1, 2, 3]


def test_distinct_loads_no_masked_arrays() -> None:
    code = (
        "import sys, numpy as np\n"
        "from planner.core.arrays import distinct\n"
        "distinct(np.array([2, 1, 2]))\n"
        "print('numpy.ma' in sys.modules)\n"
        "np.unique(np.array([2, 1, 2]))\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"]
