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

from planner._jit import njit

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

RULES = {"length": 0, "size": 1, "area": 2}  # what "best" buffer means on a stretch


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
            if priority[i] > best_key or (priority[i] == best_key and size[i] > size[best]):
                best = i
                best_key = priority[i]
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
