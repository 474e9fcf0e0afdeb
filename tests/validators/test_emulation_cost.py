"""The emulation budget counts what the emulator really does: every path of the control flow,
every iteration it runs, every emulated block, each access's threads, iterations and bytes,
broadcasts over whole buffers and the synthetic pattern of buffers without accesses. A request
within the budget runs within it; one past it is refused before anything is emulated."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.api.limits import check_emulation_budget
from planner.api.settings import Settings
from planner.core.errors import RequestError
from planner.core.models import Plan, PlanRequest
from planner.validators.cost import emulation_cost
from planner.validators.emulator import DEFAULT_MAX_BLOCKS, emulate
from tests.support.emulation_work import EmulationWork

KB = 1 << 10


def _broadcast(op: str, at: int) -> dict[str, Any]:
    return {"op": op, "at": at, "bytes": 4, "threads": "all"}


def nested_broadcasts(kib: int, depth: int = 3) -> dict[str, Any]:
    """Four buffers of ``kib`` KiB, each written and read by every thread inside ``depth``
    nested loops: 2**depth runs of each access in one barrier epoch. At 1024 KiB its request
    is 1.7 KB of JSON, and emulating it took 8 s and 3.1 GB while the former budget counted
    8388608 accesses, half of its limit."""
    return {
        "capacity": 1 << 24,
        "loops": [{"start": 0, "end": 20 - i, "trips": 4} for i in range(depth)],
        "buffers": [
            {
                "id": f"b{k}",
                "size": kib * KB,
                "start": 0,
                "end": 30,
                "accesses": [_broadcast("write", 1), _broadcast("read", 2)],
            }
            for k in range(4)
        ],
    }


def branchy_broadcasts(kib: int) -> dict[str, Any]:
    """Two loops that may run zero times, each holding a branch of two arms: 25 paths."""
    return {
        "capacity": 1 << 24,
        "loops": [{"start": 0, "end": 8, "trips": None}, {"start": 8, "end": 16, "trips": None}],
        "branches": [{"arms": [[0, 4], [4, 8]]}, {"arms": [[8, 12], [12, 16]]}],
        "buffers": [
            {
                "id": name,
                "size": kib * KB,
                "start": at,
                "end": at + 2,
                "accesses": [_broadcast("write", at), _broadcast("read", at + 1)],
            }
            for name, at in (("a", 0), ("b", 4), ("c", 8), ("d", 12))
        ],
    }


def _planned(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = PlanRequest.model_validate(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def _accesses(rng: random.Random, lo: int, hi: int, size: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(lo, hi)
        op = rng.choice(["read", "write"])
        kind = rng.random()
        if kind < 0.3:
            out.append({"op": op, "at": at, "bytes": rng.choice([1, 4]), "threads": "all"})
        elif kind < 0.6:
            out.append({"op": op, "at": at, "bytes": 4, "index": {"i": 1}, "loops": {"i": 4}})
        else:
            out.append(
                {
                    "op": op,
                    "at": at,
                    "bytes": 2,
                    "index": {"threadIdx.x": 1, "blockIdx.x": 4, "j": 8},
                    "loops": {"j": size // 16},
                }
            )
    return out


def random_requests(count: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Programs with loops (some may run zero times), branches, several ranges, broadcasts,
    indexed and synthetic accesses, with and without ``block``."""
    rng = random.Random(seed)
    made = 0
    while made < count:
        horizon = rng.randint(8, 14)
        data: dict[str, Any] = {"capacity": 1 << 20}
        if rng.random() < 0.6:
            data["block"] = [4]
            data["grid"] = [rng.choice([1, 3, 40])]
        s = rng.randint(0, 2)
        e = rng.randint(s + 3, horizon - 1)
        data["loops"] = [{"start": s, "end": e, "trips": rng.choice([None, 1, 2, 5])}]
        if rng.random() < 0.5:
            data["loops"].append({"start": s + 1, "end": e, "trips": None})
        if rng.random() < 0.5 and e + 2 <= horizon:
            m = rng.randint(e + 1, horizon - 1)
            data["branches"] = [{"arms": [[e, m], [m, horizon]]}]
        buffers = []
        for k in range(rng.randint(2, 4)):
            size = rng.choice([64, 128, 256])
            lo = rng.randint(0, horizon - 2)
            hi = rng.randint(lo + 1, horizon)
            buffer: dict[str, Any] = {"id": f"b{k}", "size": size, "start": lo, "end": hi}
            if "block" in data and rng.random() < 0.7:
                buffer["accesses"] = _accesses(rng, lo, hi, size)
            elif "block" not in data and rng.random() < 0.5:
                buffer["accesses"] = [_broadcast("write", lo), _broadcast("read", hi - 1)]
            buffers.append(buffer)
        data["buffers"] = buffers
        data["barriers"] = sorted(rng.sample(range(horizon), rng.randint(0, 3)))
        try:
            PlanRequest.model_validate(data)
        except (RequestError, ValueError):
            continue
        made += 1
        yield data


def test_the_cost_bounds_what_the_emulator_enumerates_on_random_programs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = EmulationWork(monkeypatch)
    checked = 0
    for data in random_requests(60):
        try:
            request, plan = _planned(data)
        except RequestError:
            continue  # a program the planner refuses (an own-bytes race it cannot cut)
        work.units = 0
        report = emulate(request, plan)
        cost = emulation_cost(request, plan, DEFAULT_MAX_BLOCKS)
        assert work.units <= cost.total, json.dumps(data)
        assert report.byte_accesses <= cost.total or request.block is not None
        checked += 1
    assert checked >= 30


@pytest.mark.parametrize(
    "data", [nested_broadcasts(16), branchy_broadcasts(16)], ids=["nested", "branchy"]
)
def test_the_cost_counts_every_path_and_iteration(
    data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    request, plan = _planned(data)
    work = EmulationWork(monkeypatch)
    report = emulate(request, plan)
    cost = emulation_cost(request, plan, DEFAULT_MAX_BLOCKS)
    # Without block two threads run; each broadcast covers its buffer from both.
    assert report.byte_accesses == work.units
    assert work.units <= cost.total <= 3 * work.units  # an upper bound, and not a loose one
    assert cost.costliest in {b.id for b in request.buffers}


def test_a_small_request_that_emulates_for_seconds_is_refused() -> None:
    request, plan = _planned(nested_broadcasts(1024))
    assert len(request.model_dump_json(exclude_defaults=True)) < 2000
    with pytest.raises(RequestError) as caught:
        check_emulation_budget(request, plan, 1 << 24)
    (error,) = caught.value.errors
    assert error["loc"] == ["emulate"]
    assert error["type"] == "emulation_budget_exceeded"
    # Each of 8 runs of 8 broadcasts covers 1 MiB from two threads.
    total = emulation_cost(request, plan, DEFAULT_MAX_BLOCKS).total
    assert total >= 8 * 8 * 2 * (1 << 20)
    assert f"{total} (thread, byte) accesses" in error["msg"]
    assert "limit of 16777216" in error["msg"]
    assert "buffer 'b0'" in error["msg"]


def test_the_service_refuses_emulating_past_the_budget_the_former_count_allowed() -> None:
    request, plan = _planned(branchy_broadcasts(64))
    cost = emulation_cost(request, plan, DEFAULT_MAX_BLOCKS)
    # The former count (broadcasts of two threads over the buffer once, paths and loop
    # iterations left out): 4 buffers x 2 accesses x 2 threads x 64 KiB.
    former = 4 * 2 * 2 * 64 * KB
    budget = 2 * former
    assert cost.total > budget
    body = {"request": request.model_dump(mode="json"), "plan": plan.model_dump(mode="json")}
    settings = Settings(solver_pool="threads", max_access_instances=budget, access_log=False)
    with TestClient(create_app(settings)) as client:
        response = client.post("/validate", json={**body, "emulate": True})
        assert response.status_code == 422, response.text
        (error,) = response.json()["detail"]
        plain = client.post("/validate", json=body)
    assert error["loc"] == ["body", "emulate"]
    assert error["type"] == "emulation_budget_exceeded"
    assert str(cost.total) in error["msg"]
    assert f"limit of {budget}" in error["msg"]
    assert "25 paths" in error["msg"]
    assert plain.status_code == 200
    assert plain.json()["valid"] is True
