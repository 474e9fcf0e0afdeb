"""Small random programs with nested branches (a branch in an arm of another, up to three
deep), inside or around a loop, for the brute force of tests/loops_brute.py."""

from __future__ import annotations

import random
from typing import Any

from planner.core.models import Plan, PlanRequest
from tests.support.loops_brute import first_accepted


def _split(rng: random.Random, s: int, e: int) -> list[list[int]]:
    m = rng.randint(s + 1, e - 1)
    return [[s, m], [m, e]]


def _draw(rng: random.Random) -> dict[str, Any]:
    horizon = rng.randint(12, 16)
    bs = rng.randint(0, 4)
    be = rng.randint(bs + 6, min(horizon, bs + 10))
    branches = [{"arms": _split(rng, bs, be)}]
    arms = list(branches[0]["arms"])
    for _ in range(rng.randint(1, 2)):  # a branch inside an arm (of any level)
        s, e = rng.choice([a for a in arms if a[1] - a[0] >= 2])
        lo = s if rng.random() < 0.5 else rng.randint(s, e - 2)
        hi = rng.randint(lo + 2, e)
        inner = _split(rng, lo, hi)
        branches.append({"arms": inner})
        arms += inner
    loops: list[dict[str, Any]] = []
    if rng.random() < 0.7:  # around the branch, or inside one of its arms
        trips = rng.choice([None, 1, 3, 8])
        if rng.random() < 0.6:
            s, e = rng.randint(0, bs), rng.randint(be, horizon)
        else:
            s, e = rng.choice(arms)
        loops.append({"start": s, "end": e, "trips": trips})
    buffers: list[dict[str, Any]] = []
    for i in range(rng.randint(2, 6)):
        if rng.random() < 0.6:
            s, e = rng.choice(arms)
            a = rng.randint(s, e - 1)
            b = rng.randint(a + 1, e)
        else:
            a = rng.randint(0, horizon - 1)
            b = rng.randint(a + 1, min(horizon, a + 8))
        buffers.append({"id": f"b{i}", "size": rng.choice([16, 32, 64]), "start": a, "end": b})
    starts = sorted({a[0] for a in arms})
    pool = sorted(set(starts) | set(range(horizon)))
    barriers = sorted(
        set(rng.sample(starts, rng.randint(0, len(starts))))
        | set(rng.sample(pool, rng.randint(0, 2)))
    )
    return {
        "name": "random_nested",
        "alignment": 8,
        "barriers": barriers,
        "loops": loops,
        "branches": branches,
        "buffers": buffers,
        "options": {
            "sync": rng.choice(["insert", "insert", "none", "existing"]),
            "time_limit": 2.0,
            "solver": "greedy",
        },
    }


def random_nested(rng: random.Random) -> dict[str, Any]:
    """A program the model accepts, with at least one branch inside an arm of another."""
    return first_accepted(rng, _draw, 500)


def stacked(req: PlanRequest, plan: Plan) -> Plan:
    """The plan with every buffer in bytes of its own: only a buffer's reuse of its own
    bytes remains for the brute force to judge."""
    at, placements = 0, []
    for p in plan.placements:
        placements.append(p.model_copy(update={"offset": at}))
        at += p.size
    return plan.model_copy(update={"placements": placements, "arena_bytes": at})
