"""Under sync "existing" the lower bound of a request with loops, branches or ranges is the
peak on barrier-extended pieces: checked against the smallest arena found by brute force on
small random programs (every execution, every placement order)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from tests.loops_brute import check, random_request


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


def _existing(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "options": {**data["options"], "sync": "existing"}}


def test_the_barrier_extended_bound_never_passes_the_best_arena() -> None:
    rng = random.Random(515)
    checked = raised = 0
    while checked < 60:
        data = _existing(random_request(rng))
        if len(data["buffers"]) > 6:
            continue
        req = parse_request(data)
        if not req.has_control_flow:
            continue
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
