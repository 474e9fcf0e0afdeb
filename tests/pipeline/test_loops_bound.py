"""Under sync "existing" the lower bound of a request with loops, branches or ranges is the
peak on barrier-extended pieces: checked against the smallest arena found by brute force on
small random programs (every execution, every placement order)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from tests.support.loops_brute import check, random_request


def _conflicts(req: PlanRequest, plan: Plan) -> set[tuple[str, str]]:
    """Pairs of buffers that may not share a byte under the request's barriers: every buffer
    at offset 0, and each overlap or unprotected reuse on some execution."""
    stacked = plan.model_copy(
        update={
            "placements": [p.model_copy(update={"offset": 0}) for p in plan.placements],
        }
    )
    problems, _ = check(req, stacked)
    pairs: set[tuple[str, str]] = set()
    for line in problems:
        words = line.split()
        a, b = (words[1], words[2]) if words[0] == "overlap" else (words[1], words[3])
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    return pairs


def _smallest_arena(req: PlanRequest, pairs: set[tuple[str, str]]) -> int:
    """The smallest arena over every order of placing the buffers, each at its lowest
    offset clear of its placed neighbours (some order reaches an optimal placement)."""
    sizes = {b.id: b.size for b in req.buffers}
    align = req.alignment
    best = sum(sizes.values())
    for order in itertools.permutations(sizes):
        placed: dict[str, int] = {}
        for x in order:
            taken = sorted(
                (placed[y], placed[y] + sizes[y]) for y in placed if (min(x, y), max(x, y)) in pairs
            )
            at = 0
            for lo, hi in taken:
                if at + sizes[x] <= lo:
                    break
                at = max(at, -(-hi // align) * align)
            placed[x] = at
        best = min(best, max(placed[x] + sizes[x] for x in placed))
    return best


def _drawn(
    rng: random.Random, shape: Callable[[dict[str, Any]], dict[str, Any]], most: int
) -> Iterator[tuple[dict[str, Any], PlanRequest]]:
    """Small random programs with loops, branches or ranges (at most ``most`` buffers),
    reshaped by ``shape``."""
    while True:
        data = shape(random_request(rng))
        if len(data["buffers"]) > most:
            continue
        req = parse_request(data)
        if req.has_control_flow:
            yield data, req


def _existing(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "options": {**data["options"], "sync": "existing"}}


def test_the_barrier_extended_bound_never_passes_the_best_arena() -> None:
    rng = random.Random(515)
    checked = raised = 0
    for data, req in _drawn(rng, _existing, 6):
        if checked == 60:
            break
        try:
            plan = planner.plan(req)
        except RequestError:
            continue
        assert planner.validate(req, plan).valid
        problems, plain = check(req, plan)
        assert not problems
        best = _smallest_arena(req, _conflicts(req, plan))
        assert plain <= plan.lower_bound <= best <= plan.arena_bytes, data
        raised += plan.lower_bound > plain
        checked += 1
    assert raised >= 5  # the extension makes a difference on some of them


def test_a_reuse_with_no_barrier_holds_the_bytes_until_the_next_one() -> None:
    # x is dead after point 2 but the next barrier runs at 6: y cannot reuse its bytes; z
    # (last access at 7) holds its bytes into the next trip, until the barrier at 6 there,
    # so x and y of the next trip cannot reuse them either: three buffers' bytes.
    data = {
        "name": "held_until_the_barrier",
        "barriers": [6],
        "loops": [{"start": 0, "end": 8, "trips": 2}],
        "buffers": [
            {"id": "x", "size": 64, "start": 0, "end": 2},
            {"id": "y", "size": 64, "start": 3, "end": 5},
            {"id": "z", "size": 64, "start": 6, "end": 8},
        ],
        "options": {"sync": "existing", "time_limit": 2.0},
    }
    req = parse_request(data)
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.lower_bound == plan.arena_bytes == 192
    assert plan.status == "optimal"
    _, plain = check(req, plan)
    assert plain == 64


def _capped(data: dict[str, Any], cap: int) -> dict[str, Any]:
    """Under "insert" with at most ``cap`` new barriers, any point a candidate."""
    horizon = max(
        e for b in data["buffers"] for e in ([b["end"]] if "end" in b else [b["ranges"][-1][1]])
    )
    opts = {
        "sync": "insert",
        "max_new_barriers": cap,
        "barrier_candidates": list(range(horizon + 1)),
    }
    return {**data, "options": {**data["options"], **opts}}


def _best_under_cap(data: dict[str, Any], cap: int) -> int | None:
    """The smallest arena over every set of at most ``cap`` new barrier points (brute force
    on each set's conflicts); None when no set protects every buffer's own reuses."""
    existing = set(data["barriers"])
    points = sorted(set(data["options"]["barrier_candidates"]) - existing)
    best: int | None = None
    for k in range(cap + 1):
        for chosen in itertools.combinations(points, k):
            fixed = {**_existing(data), "barriers": sorted(existing | set(chosen))}
            req = parse_request(fixed)
            try:
                plan = planner.plan(req)
            except RequestError:
                continue  # a buffer's own reuse left open by these barriers
            arena = _smallest_arena(req, _conflicts(req, plan))
            best = arena if best is None else min(best, arena)
    return best


@pytest.mark.slow
def test_the_capped_bound_never_passes_the_best_arena_under_the_cap() -> None:
    rng = random.Random(1207)
    checked = raised = at_best = 0
    for data, req in _drawn(rng, lambda d: _capped(d, 1), 5):
        if checked == 25:
            break
        try:
            plan = planner.plan(req)
        except RequestError:
            assert _best_under_cap(data, 1) is None, data  # refused: no set of one point does
            continue
        assert planner.validate(req, plan).valid
        assert len(plan.barriers.inserted) <= 1
        best = _best_under_cap(data, 1)
        assert best is not None, data
        assert plan.lower_bound <= best <= plan.arena_bytes, data
        uncapped = planner.plan({**data, "options": {**data["options"], "max_new_barriers": None}})
        raised += plan.lower_bound > uncapped.lower_bound
        at_best += plan.arena_bytes == best
        checked += 1
    assert raised >= 3  # the cap makes the bound higher on some of them
    # The plan under the cap tries the points that hold the fewest bytes: at the best arena
    # on nearly all of them (21 of 25 with only the fewest new points as the fallback).
    assert at_best >= 24
