"""Few new barriers: greedy points by the peak they leave, and the plans built on them."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
import planner.pipeline.strategies as strategies
from planner.core.models import PlanRequest
from planner.pipeline.few_barriers import few_barrier_points, peak_bytes
from planner.validators import validate_plan
from tests.support.strategies import request_dicts

I64 = npt.NDArray[np.int64]


def _arrays(data: list[tuple[int, int, int]]) -> tuple[I64, I64, I64, I64]:
    start = np.asarray([s for s, _, _ in data], dtype=np.int64)
    end = np.asarray([e for _, e, _ in data], dtype=np.int64)
    size = np.asarray([z for _, _, z in data], dtype=np.int64)
    return start, end, end.copy(), size  # without patterns: last access + 1 = end


def _occupied(after: I64, end: I64, points: list[int], horizon: int) -> I64:
    """Brute force: each buffer to the first point at or after its last access + 1."""
    out = []
    for a, e in zip(after.tolist(), end.tolist(), strict=True):
        later = [p for p in points if p >= a]
        out.append(max(e, min(later) if later else horizon))
    return np.asarray(out, dtype=np.int64)


lifetimes = st.lists(
    st.tuples(st.integers(0, 10), st.integers(1, 4), st.integers(1, 64)), min_size=1, max_size=10
).map(lambda xs: [(s, s + d, z) for s, d, z in xs])


@settings(max_examples=200, deadline=None)
@given(lifetimes, st.lists(st.integers(1, 13), max_size=3))
def test_reaches_the_peak_every_candidate_allows(
    data: list[tuple[int, int, int]], existing: list[int]
) -> None:
    start, end, after, size = _arrays(data)
    horizon = int(end.max())
    existing = sorted({p for p in existing if p < horizon})
    every = sorted(set(existing) | set(range(1, horizon)))
    target = peak_bytes(start, _occupied(after, end, every, horizon), size, horizon)
    points = few_barrier_points(
        start, end, after, size, existing=existing, candidates=None, horizon=horizon, target=target
    )
    assert set(existing) <= set(points)
    assert points == sorted(set(points))
    assert peak_bytes(start, _occupied(after, end, points, horizon), size, horizon) <= target
    # New points only when the existing ones leave the peak above the target.
    if len(points) > len(existing):
        assert peak_bytes(start, _occupied(after, end, existing, horizon), size, horizon) > target


def test_candidates_limit_the_points() -> None:
    start, end, after, size = _arrays([(0, 2, 10), (2, 4, 10), (4, 6, 10)])
    points = few_barrier_points(
        start, end, after, size, existing=[], candidates=[4], horizon=6, target=10
    )
    assert points == [4]  # 2 is not allowed; the peak stays above the target


def test_one_barrier_where_stabbing_the_full_plan_takes_four() -> None:
    # Small tiles, one after another, then a big buffer: the full plan stacks every tile at
    # offset 0 and needs a barrier between each; one barrier before the big buffer releases
    # all the tiles at once and the arena is the same.
    buffers: list[dict[str, Any]] = [
        {"id": f"t{i}", "size": 16, "start": i, "end": i + 1} for i in range(5)
    ]
    buffers.append({"id": "big", "size": 1024, "start": 5, "end": 10})
    request = {"name": "tiles_then_big", "buffers": buffers}
    plan = planner.plan(request)
    assert validate_plan(PlanRequest.model_validate(request), plan).valid
    assert plan.arena_bytes == 1024
    assert plan.barriers.inserted == [5]
    assert plan.status == "optimal"


def _reference_points(
    start: I64,
    end: I64,
    after: I64,
    size: I64,
    existing: list[int],
    pool: list[int],
    horizon: int,
    target: int,
) -> list[int]:
    """The greedy rule by brute force: add the point that leaves the lowest peak, then the
    least excess over the target summed over points, then the earliest; stop at the target
    or when no point lowers (peak, excess)."""

    def score(points: list[int]) -> tuple[int, int]:
        occupied = _occupied(after, end, sorted(points), horizon)
        live = [int(size[(start <= t) & (occupied > t)].sum()) for t in range(horizon)]
        return max(live, default=0), sum(max(v - target, 0) for v in live)

    chosen = sorted(set(existing))
    free = sorted(p for p in set(pool) - set(chosen) if 0 < p < horizon)
    current = score(chosen)
    while current[0] > target and free:
        trials = [(score([*chosen, p]), p) for p in free]
        (peak, excess), point = min(trials)
        if (peak, excess) >= current:
            break
        chosen = sorted([*chosen, point])
        free.remove(point)
        current = (peak, excess)
    return chosen


@settings(max_examples=300, deadline=None)
@given(
    lifetimes,
    st.lists(st.integers(1, 13), max_size=3),
    st.none() | st.lists(st.integers(0, 15), max_size=8),
    st.integers(0, 400),
)
def test_compiled_choice_is_the_greedy_rule(
    data: list[tuple[int, int, int]], existing: list[int], candidates: list[int] | None, target: int
) -> None:
    start, end, after, size = _arrays(data)
    horizon = int(end.max())
    existing = sorted({p for p in existing if p < horizon})
    pool = after.tolist() if candidates is None else candidates
    expected = _reference_points(start, end, after, size, existing, pool, horizon, target)
    points = few_barrier_points(
        start,
        end,
        after,
        size,
        existing=existing,
        candidates=candidates,
        horizon=horizon,
        target=target,
    )
    assert points == expected


@settings(max_examples=150, deadline=None)
@given(request_dicts(max_buffers=14, sync="insert", max_new=False))
def test_lean_plan_first_keeps_the_arena_and_the_barriers(
    data: dict[str, Any],
) -> None:
    request = PlanRequest.model_validate(data)
    first = planner.plan(request)
    assert validate_plan(request, first).valid
    # The full plan first, then the lean one, as without the shortcut.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(strategies, "_few_barriers_floor", lambda ctx: None)
        usual = planner.plan(request)
    assert validate_plan(request, usual).valid
    assert first.arena_bytes == usual.arena_bytes
    assert first.status == usual.status
    assert len(first.barriers.inserted) <= len(usual.barriers.inserted)


def test_lean_plan_at_the_bound_is_proved_and_lean() -> None:
    # Six tiles one after another, then a big buffer: the bound is the big buffer, reached
    # with a single barrier; the plan says optimal.
    buffers: list[dict[str, Any]] = [
        {"id": f"t{i}", "size": 16 * (i + 1), "start": i, "end": i + 1} for i in range(6)
    ]
    buffers.append({"id": "big", "size": 1024, "start": 6, "end": 12})
    request = PlanRequest.model_validate({"buffers": buffers})
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    assert plan.status == "optimal"
    assert plan.solver.proved_optimal
    assert plan.arena_bytes == 1024
    assert len(plan.barriers.inserted) == 1
