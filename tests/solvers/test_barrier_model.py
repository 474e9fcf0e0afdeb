"""The exact barrier model: offsets and new barriers chosen together."""

from __future__ import annotations

import bisect
import itertools

import numpy as np
import pytest

import planner

pytest.importorskip("ortools")

from planner.solvers.barrier_model import BarrierProblem, BarrierSolution, solve_barriers


def _phases(
    count: int, *, allowed: list[int] | None = None, aliases: bool = False
) -> BarrierProblem:
    """``count`` sequential 64-byte buffers on [2k, 2k + 2), no barrier between them."""
    start = np.arange(count, dtype=np.int64) * 2
    pairs = frozenset(itertools.combinations(range(count), 2)) if aliases else frozenset()
    return BarrierProblem(
        start=start,
        end=start + 2,
        after=start + 2,
        before=start,
        size=np.full(count, 64, dtype=np.int64),
        alignment=np.full(count, 16, dtype=np.int64),
        pinned=np.full(count, -1, dtype=np.int64),
        existing=[],
        allowed=allowed,
        aliases=pairs,
    )


def _solve(p: BarrierProblem, max_new: int | None) -> BarrierSolution:
    found = solve_barriers(
        p, capacity=None, lower_bound=64, upper=64 * p.size.size, max_new=max_new, time_limit=5
    )
    assert found is not None
    _check(p, found)
    return found


def _check(p: BarrierProblem, s: BarrierSolution) -> None:
    """Independently: live buffers never share; sequential sharers have a chosen barrier in
    their window or sit at equal offsets as a marked alias."""
    barriers = sorted(set(p.existing) | set(s.inserted))
    n = int(p.size.size)
    for a, b in itertools.permutations(range(n), 2):
        lo, hi = (
            max(s.offsets[a], s.offsets[b]),
            min(s.offsets[a] + p.size[a], s.offsets[b] + p.size[b]),
        )
        if lo >= hi:
            continue
        assert p.end[a] <= p.start[b] or p.end[b] <= p.start[a]
        if p.end[a] <= p.start[b]:
            k = bisect.bisect_left(barriers, int(p.after[a]))
            covered = k < len(barriers) and barriers[k] <= p.before[b]
            alias = (a, b) in p.aliases and s.offsets[a] == s.offsets[b]
            assert covered or alias, (a, b)
    assert s.arena_bytes == int((s.offsets + p.size).max())


@pytest.mark.parametrize(("cap", "arena", "barriers"), [(None, 64, 2), (1, 128, 1), (0, 192, 0)])
def test_smallest_arena_then_fewest_barriers(cap: int | None, arena: int, barriers: int) -> None:
    found = _solve(_phases(3), cap)
    assert (found.arena_bytes, len(found.inserted)) == (arena, barriers)
    assert found.optimal


def test_only_candidate_points() -> None:
    found = _solve(_phases(4, allowed=[2, 6]), None)
    assert found.inserted == [2, 6]
    assert found.arena_bytes == 128


def test_aliases_replace_barriers() -> None:
    found = _solve(_phases(3, aliases=True), None)
    assert found.arena_bytes == 64
    assert found.inserted == []
    assert len(set(found.offsets.tolist())) == 1


def test_capacity_below_the_bound_finds_nothing() -> None:
    p = _phases(3)
    assert (
        solve_barriers(p, capacity=32, lower_bound=64, upper=192, max_new=None, time_limit=1)
        is None
    )


def test_pipeline_runs_the_model_for_small_requests() -> None:
    request = {
        "buffers": [
            {"id": f"p{k}", "size": 64, "start": 2 * k, "end": 2 * k + 2} for k in range(3)
        ],
        "options": {"solver": "cpsat", "max_new_barriers": 1, "pareto": True},
    }
    plan = planner.plan(request)
    assert (plan.arena_bytes, len(plan.barriers.inserted)) == (128, 1)
    assert plan.status == "optimal"
    assert "exact:barrier-model" in [t.name for t in plan.solver.tried] or plan.solver.name
