"""Skyline placement kernel (compiled with numba).

Buffers are rectangles fixed in time; the skyline is the height of the arena over time. At
each step take the lowest stretch of the skyline and put on it the best buffer whose occupied
interval lies inside that stretch; if none fits, raise the stretch to its lower neighbour
(the bytes below are given up). Placing only on the skyline never fragments what lies below,
which is where the gap-filling greedy loses most on hard instances.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

RULES = {"length": 0, "size": 1, "area": 2, "flush": 3}  # what "best" buffer means on a stretch


@njit
def skyline(start: I64, end: I64, size: I64, alignment: I64, rule: int, weight: F64) -> I64:
    """Offsets (bytes) for every buffer; ``weight`` scales each buffer's priority."""
    n = start.shape[0]
    offset = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return offset
    points = np.unique(np.concatenate((start, end)))
    m = points.shape[0] - 1  # elementary time slots
    first = np.searchsorted(points, start)
    last = np.searchsorted(points, end)  # exclusive slot
    by_first = np.argsort(first, kind="mergesort")
    ptr = np.searchsorted(first[by_first], np.arange(m + 1))  # buffers starting at each slot
    height = np.zeros(m, dtype=np.int64)
    priority = np.empty(n, dtype=np.float64)
    for i in range(n):
        length = float(points[last[i]] - points[first[i]])
        if rule == 0:
            priority[i] = length * weight[i]
        elif rule == 3:
            priority[i] = length * weight[i] / float(points[m] - points[0] + 1)
        elif rule == 1:
            priority[i] = float(size[i]) * weight[i]
        else:
            priority[i] = float(size[i]) * length * weight[i]
    never = np.iinfo(np.int64).max
    remaining = n
    while remaining > 0:
        k = 0
        for t in range(1, m):
            if height[t] < height[k]:
                k = t
        h = height[k]
        t0 = k
        while t0 > 0 and height[t0 - 1] == h:
            t0 -= 1
        t1 = k + 1
        while t1 < m and height[t1] == h:
            t1 += 1
        best = -1
        best_key = -1.0
        for j in range(ptr[t0], ptr[t1]):
            i = by_first[j]
            if offset[i] >= 0 or last[i] > t1:
                continue  # placed, or runs past the stretch
            key = priority[i]
            if rule == 3:
                # Prefer buffers flush with an edge of the stretch: no new sliver of time.
                if first[i] == t0:
                    key += 1.0
                if last[i] == t1:
                    key += 1.0
            if key > best_key or (key == best_key and size[i] > size[best]):
                best = i
                best_key = key
        if best >= 0:
            a = alignment[best]
            placed = (h + a - 1) // a * a
            offset[best] = placed
            for t in range(first[best], last[best]):
                height[t] = placed + size[best]
            remaining -= 1
        else:
            below = height[t0 - 1] if t0 > 0 else never
            above = height[t1] if t1 < m else never
            raised = min(below, above)
            if raised == never:  # nothing left can land anywhere: cannot happen
                break
            for t in range(t0, t1):
                height[t] = raised
    return offset


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit
def _weights(seed: int, run: int, noise: float, n: int) -> F64:
    """``1 + noise * u`` with u uniform in [0, 1) from splitmix64 seeded by (seed, run)."""
    state = np.uint64(seed) ^ (np.uint64(run + 1) * _GOLDEN)
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        state = state + _GOLDEN
        z = state
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
        out[i] = 1.0 + noise * (float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0))
    return out


@njit
def best_of_random(
    start: I64,
    end: I64,
    size: I64,
    alignment: I64,
    first_run: int,
    last_run: int,
    seed: int,
    noise_levels: F64,
) -> tuple[I64, int, int]:
    """Best skyline over runs ``first_run .. last_run-1``: (offsets, arena bytes, run).

    Run k uses rule ``k % 4`` and noise ``noise_levels[(k // 4) % len]``; ties keep the
    lowest run, so splitting the runs across threads does not change the winner.
    """
    best = np.full(start.shape[0], -1, dtype=np.int64)
    best_arena = -1
    best_run = -1
    levels = noise_levels.shape[0]
    for k in range(first_run, last_run):
        weight = _weights(seed, k, noise_levels[(k // 4) % levels], start.shape[0])
        offsets = skyline(start, end, size, alignment, k % 4, weight)
        arena = 0
        for i in range(offsets.shape[0]):
            arena = max(arena, offsets[i] + size[i])
        if best_arena < 0 or arena < best_arena:
            best, best_arena, best_run = offsets, arena, k
    return best, best_arena, best_run
