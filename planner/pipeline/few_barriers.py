"""Few new barriers for a given arena: points chosen greedily by the peak they leave.

Under sync ``"insert"`` the full plan may add a barrier after nearly every buffer's last
access, while far fewer keep the same arena: the arena only needs the peak of live bytes on
barrier-extended lifetimes to come down to it. Starting from the existing barriers, this
adds, one at a time, the candidate point that leaves the lowest peak (ties: the earliest)
until the peak is at most the target. The caller plans on the chosen points and keeps that
plan when it is as small as the full one; the exact barrier model does better at a price
(``solvers.barrier_model``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.core.arrays import distinct

__all__ = ["few_barrier_points", "peak_bytes"]

I64 = npt.NDArray[np.int64]


def peak_bytes(start: I64, occupied_end: I64, size: I64, horizon: int) -> int:
    """Peak over program points of the bytes occupied on ``[start, occupied_end)``."""
    return int(_live(start, occupied_end, size, horizon).max(initial=0))


def _live(start: I64, occupied_end: I64, size: I64, horizon: int) -> I64:
    delta = np.zeros(horizon + 2, dtype=np.int64)
    np.add.at(delta, start, size)
    np.add.at(delta, occupied_end, -size)
    return np.cumsum(delta)


def _occupied_end(after: I64, end: I64, points: list[int], horizon: int) -> I64:
    """Each buffer occupies its bytes until the first point at or after ``after`` (its last
    access + 1), and at least until its end."""
    if not points:
        return np.maximum(np.full_like(after, horizon), end)
    pts = np.asarray(points, dtype=np.int64)
    k = np.searchsorted(pts, after, side="left")
    released = np.where(k < pts.size, pts[np.minimum(k, pts.size - 1)], horizon)
    return np.maximum(released, end)


def few_barrier_points(
    start: I64,
    end: I64,
    after: I64,
    size: I64,
    *,
    existing: list[int],
    candidates: list[int] | None,
    horizon: int,
    target: int,
) -> list[int]:
    """Existing points plus greedily chosen new ones (sorted) that bring the peak of live
    bytes to ``target`` or below, or as low as the candidates allow.

    ``candidates`` None: any point; then only the points right after a last access count,
    since a barrier anywhere else releases nothing earlier than one of those. Every
    candidate is scored at once on the points where occupancy changes: O(candidates x
    buffers) a step.
    """
    chosen = sorted(set(existing))
    pool = set(after.tolist()) if candidates is None else set(candidates)
    free = np.asarray(sorted(p for p in pool - set(chosen) if 0 < p < horizon), dtype=np.int64)
    occupied = _occupied_end(after, end, chosen, horizon)
    # Occupancy only changes at these points; live bytes are kept per segment between them.
    grid = distinct(np.concatenate([start, end, occupied, free, [horizon]]))
    picked = _pick(
        np.searchsorted(grid, start),
        np.searchsorted(grid, end),
        np.searchsorted(grid, occupied),
        after,
        size,
        free,
        np.searchsorted(grid, free),
        _widths(grid),
        target,
    )
    return sorted([*chosen, *free[picked].tolist()])


@njit(small=True)
def _pick(
    s_at: I64,
    e_at: I64,
    o_at: I64,
    after: I64,
    size: I64,
    free: I64,
    free_at: I64,
    widths: I64,
    target: int,
) -> I64:
    """Indices into ``free`` of the points chosen, in the order chosen. Positions (``*_at``)
    index the grid of points where occupancy changes; ``widths`` counts each segment's
    points. A step adds the candidate that leaves the lowest peak, then the least excess
    over ``target`` (bytes x points), then the earliest point, and the search stops when
    the peak is at most ``target`` or no candidate lowers (peak, excess)."""
    n, m, count = s_at.size, free.size, widths.size
    o_at = o_at.copy()
    delta = np.zeros(count + 1, dtype=np.int64)
    for i in range(n):
        delta[s_at[i]] += size[i]
        delta[o_at[i]] -= size[i]
    live = np.cumsum(delta)[:count]
    peak, excess = 0, 0
    for g in range(count):
        peak = max(peak, live[g])
        excess += max(live[g] - target, 0) * widths[g]
    used = np.zeros(m, dtype=np.bool_)
    picked = np.empty(m, dtype=np.int64)
    k = 0
    while peak > target:
        best, best_peak, best_excess = -1, 0, 0
        for c in range(m):
            if used[c]:
                continue
            _released(e_at, o_at, after, size, free[c], free_at[c], delta, False)
            run, top, over = 0, 0, 0
            for g in range(count):
                run += delta[g]
                v = live[g] + run
                top = max(top, v)
                over += max(v - target, 0) * widths[g]
            if best < 0 or top < best_peak or (top == best_peak and over < best_excess):
                best, best_peak, best_excess = c, top, over
        if best < 0 or best_peak > peak or (best_peak == peak and best_excess >= excess):
            break  # no single point helps: more would only add barriers
        _released(e_at, o_at, after, size, free[best], free_at[best], delta, True)
        live += np.cumsum(delta)[:count]
        peak, excess = best_peak, best_excess
        used[best] = True
        picked[k] = best
        k += 1
    return picked[:k]


@njit(small=True)
def _released(
    e_at: I64,
    o_at: I64,
    after: I64,
    size: I64,
    point: int,
    point_at: int,
    delta: I64,
    commit: bool,
) -> None:
    """Into ``delta``: the change of live bytes per grid segment (as differences) when a
    barrier at ``point`` (grid position ``point_at``) releases buffers earlier; ``commit``
    also moves their occupied ends there."""
    delta[:] = 0
    for i in range(e_at.size):
        cut = max(e_at[i], point_at)
        if after[i] <= point and cut < o_at[i]:
            delta[cut] -= size[i]
            delta[o_at[i]] += size[i]
            if commit:
                o_at[i] = cut


def _widths(grid: I64) -> I64:
    """Points in each grid segment (the last one, at the horizon, counts none)."""
    return np.diff(grid, append=grid[-1])


_WARM: list[bool] = []
