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
    since a barrier anywhere else releases nothing earlier than one of those.
    """
    chosen = sorted(set(existing))
    pool = set(after.tolist()) if candidates is None else set(candidates)
    free = sorted(p for p in pool - set(chosen) if 0 < p < horizon)

    def score(points: list[int]) -> tuple[int, int]:
        """(peak, bytes x points above the target): lower is better."""
        live = _live(start, _occupied_end(after, end, points, horizon), size, horizon)
        return int(live.max(initial=0)), int(np.maximum(live - target, 0).sum())

    current = score(chosen)
    while current[0] > target and free:
        best_score, best = min((score(sorted([*chosen, p])), p) for p in free)
        if best_score >= current:
            break  # no single point helps: more would only add barriers
        chosen = sorted([*chosen, best])
        free.remove(best)
        current = best_score
    return chosen
