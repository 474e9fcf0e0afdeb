"""Under sync "insert" the barriers of a program with loops or branches are the fewest
executions, then the fewest points, for the placement chosen: checked against every set of
points on small random programs (tests/loops_brute.py enumerates the executions and the
windows each reuse needs a barrier in)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from tests.loops_brute import check, random_request, reuse_windows, runs
from tests.loops_nested import random_nested

MAX_POINTS = 12  # candidate points of one program: every subset is tried


def _cheapest(req: PlanRequest, need: list[frozenset[int]]) -> tuple[int, int]:
    """(executions, points) of the cheapest set of points meeting every window."""
    points = sorted(set().union(*need))
    best = (sum(runs(req, p) for p in points), len(points))
    for k in range(len(points)):
        for subset in itertools.combinations(points, k):
            chosen = set(subset)
            if all(w & chosen for w in need):
                best = min(best, (sum(runs(req, p) for p in subset), k))
    return best


def _insert(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "options": {**data["options"], "sync": "insert"}}


def _cases(draw: Callable[[random.Random], dict[str, Any]], seed: int, count: int) -> list[Any]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        data = _insert(draw(rng))
        req = parse_request(data)
        if not req.has_control_flow:
            continue
        try:
            plan = planner.plan(req)
        except RequestError as exc:
            if {e["type"] for e in exc.errors} != {"unprotected_reuse"}:
                raise
            continue
        out.append((data, req, plan))
    return out


def _judge(req: PlanRequest, plan: Plan) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(the plan's cost, the cheapest) of the new barriers, or None when too many points."""
    existing = set(plan.barriers.existing)
    need = [w for w in reuse_windows(req, plan) if not w & existing]
    inserted = set(plan.barriers.inserted)
    assert all(w & inserted for w in need)  # safe
    if len(set().union(*need)) > MAX_POINTS:
        return None
    mine = (sum(runs(req, p) for p in inserted), len(inserted))
    return mine, _cheapest(req, need)


@pytest.mark.parametrize(
    ("draw", "seed"), [(random_request, 31), (random_request, 32), (random_nested, 33)]
)
def test_inserted_barriers_are_the_cheapest(
    draw: Callable[[random.Random], dict[str, Any]], seed: int
) -> None:
    judged = 0
    for data, req, plan in _cases(draw, seed, 80):
        assert planner.validate(req, plan).valid
        assert not check(req, plan)[0]
        verdict = _judge(req, plan)
        if verdict is None:
            continue
        judged += 1
        mine, best = verdict
        if any(d.code == "barriers_not_proven" for d in plan.diagnostics):
            assert mine >= best, data
        else:
            assert mine == best, (data, plan.barriers)
    assert judged >= 40
