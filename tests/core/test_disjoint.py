"""The validator's compiled pre-sweep finds a shared byte exactly when one exists."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from planner.core._jit import compiled
from planner.validators._disjoint import NEVER, any_clash, loaded, releases
from planner.validators.sweep import PRESWEEP_READY_MIN_EXTENTS, _presweeps


def _brute(lo: np.ndarray, hi: np.ndarray, start: np.ndarray, release: np.ndarray) -> bool:
    """Any pair that shares a byte while the earlier one (by start, end, index) is held."""
    n = lo.size
    for a in range(n):
        for b in range(n):
            if a == b or hi[a] <= lo[a] or hi[b] <= lo[b]:
                continue
            held = start[a] <= start[b] < release[a]
            if held and lo[a] < hi[b] and lo[b] < hi[a]:
                return True
    return False


@pytest.mark.parametrize("seed", range(200))
def test_agrees_with_all_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    start = rng.integers(0, 20, n)
    end = start + rng.integers(1, 6, n)
    lo = rng.integers(0, 40, n) * 4
    hi = lo + rng.integers(0, 12, n) * 4  # some of no byte
    barriers = sorted(set(rng.integers(0, 26, int(rng.integers(0, 5))).tolist()))
    release = releases(end, end - 1, barriers)
    expected = _brute(lo, hi, start, np.where(release == NEVER, 1 << 62, release))
    assert any_clash(lo, hi, start, end, release) == expected


def test_disjoint_stack_and_one_overlap() -> None:
    start = np.zeros(4, dtype=np.int64)
    end = np.ones(4, dtype=np.int64)
    lo = np.array([0, 16, 32, 48], dtype=np.int64)
    release = end.copy()
    assert not any_clash(lo, lo + 16, start, end, release)
    assert any_clash(lo, lo + 17, start, end, release)


def test_loaded_once_run_compiled() -> None:
    """After a compiled call the pre-sweep counts as loaded, so the static check runs it first
    on plans of ``PRESWEEP_READY_MIN_EXTENTS`` extents and more."""
    lo = np.array([0, 16], dtype=np.int64)
    start, end = np.zeros(2, dtype=np.int64), np.ones(2, dtype=np.int64)
    with compiled():
        any_clash(lo, lo + 16, start, end, end.copy())
    assert loaded()
    assert _presweeps(PRESWEEP_READY_MIN_EXTENTS)
    assert not _presweeps(PRESWEEP_READY_MIN_EXTENTS - 1)


def test_loaded_once_any_kernel_runs_compiled() -> None:
    """In a process that runs no compiled code the pre-sweep does not count as loaded (a small
    plan is checked without numba); once another kernel has run compiled it does, so a plan
    of a few hundred extents gets the compiled pre-sweep without paying for numba."""
    code = (
        "import numpy as np\n"
        "from planner.core._jit import compiled\n"
        "from planner.core.graph import _backward_lists\n"
        "from planner.validators._disjoint import loaded\n"
        "print(loaded())\n"
        "with compiled():\n"
        "    _backward_lists(np.array([1, 2], dtype=np.int64))\n"
        "print(loaded())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.split() == ["False", "True"]
