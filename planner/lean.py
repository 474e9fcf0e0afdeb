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

__all__ = ["lean_points", "peak_bytes"]

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


def lean_points(
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
    grid = np.unique(np.concatenate([start, end, occupied, free, [horizon]]))
    s_at = np.searchsorted(grid, start)
    live = _segments(s_at, np.searchsorted(grid, occupied), size, grid.size)
    widths = _widths(grid)
    score = (int(live.max(initial=0)), int(np.maximum(live - target, 0) @ widths))
    while score[0] > target and free.size:
        # Occupied end of every buffer with each candidate added (rows: candidates).
        cut = np.maximum(end[None, :], free[:, None])
        moved = (after[None, :] <= free[:, None]) & (cut < occupied[None, :])
        new_end = np.where(moved, cut, occupied[None, :])
        rows, cols = np.nonzero(moved)
        delta = np.zeros((free.size, grid.size + 1), dtype=np.int64)
        np.add.at(delta, (rows, np.searchsorted(grid, new_end[rows, cols])), -size[cols])
        np.add.at(delta, (rows, np.searchsorted(grid, occupied[cols])), size[cols])
        trial = live[None, :] + np.cumsum(delta, axis=1)[:, :-1]
        peaks = trial.max(axis=1, initial=0)
        excess = np.maximum(trial - target, 0) @ widths
        best = int(np.lexsort((free, excess, peaks))[0])  # lowest peak, excess, point
        if (int(peaks[best]), int(excess[best])) >= score:
            break  # no single point helps: more would only add barriers
        chosen = sorted([*chosen, int(free[best])])
        occupied = new_end[best]
        live = trial[best]
        score = (int(peaks[best]), int(excess[best]))
        free = np.delete(free, best)
    return chosen


def _segments(s_at: I64, o_at: I64, size: I64, count: int) -> I64:
    """Bytes live on each grid segment ``[grid[k], grid[k + 1])``."""
    delta = np.zeros(count + 1, dtype=np.int64)
    np.add.at(delta, s_at, size)
    np.add.at(delta, o_at, -size)
    return np.cumsum(delta)[:-1]


def _widths(grid: I64) -> I64:
    """Points in each grid segment (the last one, at the horizon, counts none)."""
    return np.diff(grid, append=grid[-1])
