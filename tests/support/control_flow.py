"""Requests with loops, branches and several live ranges, and plans placed by hand around them.

``plan_at`` wraps offsets chosen by a test into a plan (sync "existing": the request's
barriers are the plan's); ``PROGRAM`` is a pipelined loop, a branch and a buffer of two
ranges, placed validly at ``OFFSETS``; ``random_program`` draws a small program with random control
flow, ranges, barriers and offsets for the agreement tests of the two CPU validators.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Barriers, Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from tests.support.plans import hand_plan

__all__ = [
    "OFFSETS",
    "PROGRAM",
    "crosses_loop",
    "plan_at",
    "planned_by_hand",
    "planned_programs",
    "random_program",
    "request",
    "tiled_loop",
]

# A pipelined loop: x and y alternate in the body [1, 5) (barrier at 3 between them, at 1 on
# the back edge); z is live across a branch [6, 10) whose arms hold u and v; w has two
# ranges, and t is live during w's second one.
PROGRAM: dict[str, Any] = {
    "loops": [{"start": 1, "end": 5, "trips": 8}],
    "branches": [{"arms": [[6, 8], [8, 10]]}],
    "barriers": [1, 3, 5, 11],
    "buffers": [
        {"id": "x", "size": 256, "start": 1, "end": 3},
        {"id": "y", "size": 256, "start": 3, "end": 5},
        {"id": "z", "size": 128, "start": 5, "end": 11},
        {"id": "u", "size": 256, "start": 6, "end": 8},
        {"id": "v", "size": 256, "start": 8, "end": 10},
        {"id": "w", "size": 128, "ranges": [[0, 1], [11, 13]]},
        {"id": "t", "size": 64, "start": 10, "end": 13},
    ],
}
OFFSETS = {"x": 0, "y": 0, "z": 256, "u": 0, "v": 0, "w": 256, "t": 384}


def request(data: dict[str, Any]) -> PlanRequest:
    """A request of 32 threads under sync "existing", with ``data`` on top."""
    base: dict[str, Any] = {"block": [32], "options": {"sync": "existing"}}
    return PlanRequest.model_validate({**base, **data})


def tiled_loop(barriers: list[int], **options: Any) -> PlanRequest:
    """Two 64-byte tiles live in a loop of 16 trips over [1, 5), then a 128-byte buffer
    over [5, 7); ``options`` as the request's."""
    return PlanRequest.model_validate(
        {
            "target": "sm_80",
            "barriers": barriers,
            "loops": [{"start": 1, "end": 5, "trips": 16}],
            "buffers": [
                {"id": "a", "size": 64, "start": 1, "end": 4},
                {"id": "b", "size": 64, "start": 1, "end": 4},
                {"id": "c", "size": 128, "start": 5, "end": 7},
            ],
            "options": options,
        }
    )


def plan_at(req: PlanRequest, offsets: dict[str, int]) -> Plan:
    """A plan placing each buffer at ``offsets[id]``, relying on the request's barriers."""
    barriers = Barriers(existing=sorted(set(req.barriers)))
    return hand_plan(req, offsets, barriers, capacity=req.effective_capacity)


def planned_by_hand(data: dict[str, Any], offsets: dict[str, int]) -> tuple[PlanRequest, Plan]:
    """The program placed at ``offsets``, relying on every barrier of the request; checked
    valid by the static validator and the emulator."""
    req = request(data)
    plan = plan_at(req, offsets)
    barriers = plan.barriers.model_copy(update={"required": sorted(set(req.barriers))})
    plan = plan.model_copy(update={"barriers": barriers})
    assert validate_plan(req, plan).valid
    assert emulate(req, plan).valid
    return req, plan


def planned_programs(
    draw: Callable[[random.Random], dict[str, Any]],
    seed: int,
    count: int,
    *,
    refused: frozenset[str] = frozenset({"unprotected_reuse"}),
    control_flow_only: bool = False,
) -> list[tuple[dict[str, Any], PlanRequest, Plan]]:
    """``count`` programs drawn from ``seed``, each with its request and plan. A program the
    planner refuses is left out when every reason it gives is in ``refused`` (any other
    error fails the test); with ``control_flow_only``, so is one without loops or branches."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        data = draw(rng)
        req = parse_request(data)
        if control_flow_only and not req.has_control_flow:
            continue
        try:
            plan = planner.plan(req)
        except RequestError as exc:
            if not {e["type"] for e in exc.errors} <= refused:
                raise
            continue
        out.append((data, req, plan))
    return out


def crosses_loop(req: PlanRequest, *, trips: int | None = None) -> bool:
    """Whether a buffer range enters or leaves a loop body (then it is live over all of it);
    only loops of ``trips`` iterations when given."""
    return any(
        (trips is None or loop.trips == trips)
        and loop.start < e
        and s < loop.end
        and not (loop.start <= s and e <= loop.end)
        and not (s <= loop.start and loop.end <= e)
        for b in req.buffers
        for s, e in b.lifetimes
        for loop in req.loops
    )


def _loops(rng: random.Random, horizon: int) -> list[dict[str, Any]]:
    shape = rng.choice(["one", "nested", "two", "none"])
    trips = [None, 1, 2, 5]
    if shape == "one":
        s = rng.randint(0, 2)
        return [{"start": s, "end": rng.randint(s + 2, horizon), "trips": rng.choice(trips)}]
    if shape == "nested":
        s = rng.randint(0, 1)
        e = rng.randint(s + 4, horizon)
        s2 = rng.randint(s + 1, e - 2)
        e2 = rng.randint(s2 + 1, e - 1)
        return [
            {"start": s, "end": e, "trips": rng.choice(trips)},
            {"start": s2, "end": e2, "trips": rng.choice(trips)},
        ]
    if shape == "two":
        m = horizon // 2
        return [
            {"start": 0, "end": m, "trips": rng.choice(trips)},
            {"start": m + 1, "end": horizon, "trips": rng.choice(trips)},
        ]
    return []


def _range(rng: random.Random, lo: int, hi: int, least: int) -> list[int]:
    s = rng.randint(lo, hi - least)
    return [s, rng.randint(s + least, hi)]


def random_program(
    rng: random.Random, *, least: int = 1, tries: int = 50
) -> tuple[PlanRequest, Plan] | None:
    """A valid request with loops, a branch or several ranges, 2 to 4 buffers without
    access patterns, random barriers, and a plan with offsets drawn from a few slots (so
    buffers often share bytes). Ranges span at least ``least`` points. None when ``tries``
    draws all give requests the models reject."""
    for _ in range(tries):
        horizon = rng.randint(6, 10)
        data: dict[str, Any] = {"alignment": 64, "loops": _loops(rng, horizon)}
        if rng.random() < 0.5:
            s = rng.randint(0, horizon - 4)
            m = rng.randint(s + 2, horizon - 2)
            data["branches"] = [{"arms": [[s, m], [m, rng.randint(m + 2, horizon)]]}]
        buffers: list[dict[str, Any]] = []
        for k in range(rng.randint(2, 4)):
            size = rng.choice([64, 128, 192])
            if rng.random() < 0.3 and horizon >= 2 * least + 1:
                first = _range(rng, 0, horizon // 2, least)
                second = (
                    _range(rng, first[1] + 1, horizon, least)
                    if first[1] + 1 + least <= horizon
                    else None
                )
                if second is not None:
                    buffers.append({"id": f"b{k}", "size": size, "ranges": [first, second]})
                    continue
            s, e = _range(rng, 0, horizon, least)
            buffers.append({"id": f"b{k}", "size": size, "start": s, "end": e})
        data["buffers"] = buffers
        data["barriers"] = sorted(rng.sample(range(horizon), rng.randint(0, 4)))
        try:
            req = request(data)
        except ValidationError:
            continue
        if not req.has_control_flow:
            continue
        offsets = {b["id"]: rng.choice([0, 128, 256]) for b in buffers}
        return req, plan_at(req, offsets)
    return None
