"""The cluster rule (docs/design.md, Clusters) in both validators against a brute force on
small straight-line programs: two different buffers on common bytes, one cluster-scoped, one
after the other, need a cluster barrier after the earlier's last point and at or before the
later's first. Placements are random (never sharing bytes between buffers live together)
and block barriers stand at every point, so only the cluster rule can fail."""

from __future__ import annotations

import random
from typing import Any

import pytest

import planner
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators.cost import emulation_cost
from planner.validators.emulator import DEFAULT_MAX_BLOCKS, emulate
from tests.support.emulation_work import EmulationWork

CASES = 120
SIZE = 32  # bytes per buffer
SLOTS = (0, 16, 32, 48)  # offsets: buffers overlap by half or whole


def _program(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(2, 4)
    buffers = []
    for i in range(n):
        start = rng.randint(0, 6)
        buffer: dict[str, Any] = {
            "id": f"b{i}",
            "size": SIZE,
            "start": start,
            "end": start + rng.randint(1, 3),
        }
        if rng.random() < 0.5:
            buffer["scope"] = "cluster"
        buffers.append(buffer)
    horizon = max(b["end"] for b in buffers)
    points = sorted(rng.sample(range(horizon + 1), rng.randint(0, 3)))
    return {
        "target": "sm_90",
        "cluster": [2],
        "block": [2],
        "barriers": list(range(horizon + 1)),
        "syncs": [{"kind": "cluster_barrier", "at": p} for p in points],
        "buffers": buffers,
        "options": {"sync": "existing", "time_limit": 2.0},
    }


def _placed(rng: random.Random, request: PlanRequest, plan: Plan) -> tuple[Plan, list[int]]:
    offsets: list[int] = []
    bufs = request.buffers
    for i, b in enumerate(bufs):
        free = [
            o
            for o in SLOTS
            if all(
                not (bufs[j].start < b.end and b.start < bufs[j].end)
                or not (offsets[j] < o + SIZE and o < offsets[j] + SIZE)
                for j in range(i)
            )
        ]
        offsets.append(rng.choice(free or [SLOTS[-1] + SIZE * (i + 1)]))
    placements = [
        p.model_copy(update={"offset": o}) for p, o in zip(plan.placements, offsets, strict=True)
    ]
    arena = max(o + SIZE for o in offsets)
    launch = plan.launch.model_copy(update={"dynamic_smem_bytes": arena})
    return plan.model_copy(
        update={"placements": placements, "arena_bytes": arena, "launch": launch}
    ), offsets


def _brute(request: PlanRequest, offsets: list[int]) -> bool:
    """Whether some pair breaks the cluster rule."""
    points = [s.at for s in request.syncs if s.kind == "cluster_barrier"]
    bufs = request.buffers
    for i, x in enumerate(bufs):
        for j, y in enumerate(bufs):
            if i == j or "cluster" not in (x.scope, y.scope) or y.start < x.end:
                continue
            if not (offsets[i] < offsets[j] + SIZE and offsets[j] < offsets[i] + SIZE):
                continue
            if not any(x.end - 1 < p <= y.start for p in points):
                return True
    return False


def test_both_validators_agree_with_the_brute_force() -> None:
    rng = random.Random(20261128)
    broken = 0
    for _ in range(CASES):
        request = parse_request(_program(rng))
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        placed, offsets = _placed(rng, request, plan)
        want = _brute(request, offsets)
        broken += want
        static = planner.validate(request, placed).violations
        emulated = emulate(request, placed).violations
        assert not [v for v in static if v.code == "overlap"]
        assert any(v.code == "missing_cluster_barrier" for v in static) == want, (
            request.model_dump(),
            offsets,
        )
        assert any(v.code == "missing_cluster_barrier" for v in emulated) == want, (
            request.model_dump(),
            offsets,
        )
    assert 10 < broken < CASES - 10  # both verdicts are well exercised


def _looped(rng: random.Random) -> dict[str, Any]:
    data = _program(rng)
    horizon = max(b["end"] for b in data["buffers"])
    start = rng.randint(0, max(0, horizon - 2))
    end = rng.randint(start + 1, horizon)
    loop: dict[str, Any] = {"start": start, "end": end}
    if rng.random() < 0.5:
        loop["trips"] = rng.randint(1, 3)
    data["loops"] = [loop]
    for b in data["buffers"]:
        # A range that meets the loop lies inside its body or covers it whole.
        if b["start"] < end and start < b["end"]:
            if start <= b["start"] and b["end"] <= end:
                continue
            b["start"], b["end"] = min(b["start"], start), max(b["end"], end)
    return data


def test_both_validators_agree_on_programs_with_a_loop() -> None:
    """Each validator on its own reading of a loop (the static check's unrolled executions,
    the emulator's interpreter): the same verdict on the cluster rule."""
    rng = random.Random(7)
    checked = broken = 0
    for _ in range(CASES):
        request = parse_request(_looped(rng))
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        placed, _ = _placed(rng, request, plan)
        static = planner.validate(request, placed).violations
        if any(v.code == "overlap" for v in static):
            continue  # live together in some iteration: not the cluster rule's case
        checked += 1
        emulated = emulate(request, placed).violations
        want = any(v.code == "missing_cluster_barrier" for v in static)
        broken += want
        assert any(v.code == "missing_cluster_barrier" for v in emulated) == want, (
            request.model_dump(),
            placed.placements,
        )
    assert checked > CASES // 2
    assert 5 < broken < checked - 5


def test_the_emulation_cost_bounds_the_cluster_run_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulator runs a kernel with a cluster twice (as planned, and as the cluster rule
    sees it): the cost bound the service checks covers both."""
    work = EmulationWork(monkeypatch)
    rng = random.Random(11)
    for _ in range(20):
        request = parse_request(_looped(rng))
        plan = planner.plan(request)
        placed, _ = _placed(rng, request, plan)
        alone = emulation_cost(
            request.model_copy(update={"cluster": None}), placed, DEFAULT_MAX_BLOCKS
        )
        work.units = 0
        emulate(request, placed)
        cost = emulation_cost(request, placed, DEFAULT_MAX_BLOCKS)
        assert work.units <= cost.total
        assert cost.total > alone.total
