"""Spilling to a global-memory workspace: choices against brute force, plans through the
static validator, and the validator's check of the second arena."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

import planner
from planner.cli import main
from planner.core.models import Barriers, Placement, Plan, PlanRequest
from planner.pipeline.spill import choose_spill, spill_costs
from planner.validators import validate_plan


def _peak(start: list[int], end: list[int], size: list[int], keep: set[int]) -> int:
    points = {start[i] for i in keep}
    return max(
        (sum(size[i] for i in keep if start[i] <= p < end[i]) for p in points),
        default=0,
    )


def _brute(
    start: list[int],
    end: list[int],
    size: list[int],
    cost: list[int],
    spillable: list[bool],
    capacity: int,
) -> int | None:
    """Least cost of a set of spillable buffers whose removal keeps the peak within capacity."""
    n = len(size)
    free = [i for i in range(n) if spillable[i]]
    best: int | None = None
    for r in range(len(free) + 1):
        for subset in itertools.combinations(free, r):
            keep = set(range(n)) - set(subset)
            if _peak(start, end, size, keep) <= capacity:
                c = sum(cost[i] for i in subset)
                best = c if best is None else min(best, c)
    return best


def _instance(rng: random.Random, n: int) -> tuple[list[int], list[int], list[int]]:
    start = [rng.randrange(0, 8) for _ in range(n)]
    end = [s + rng.randrange(1, 5) for s in start]
    size = [rng.choice([8, 16, 24, 32, 48, 64]) for _ in range(n)]
    return start, end, size


@pytest.mark.parametrize("seed", range(150))
def test_choice_is_the_cheapest_by_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(1, 9)
    start, end, size = _instance(rng, n)
    cost = [s * rng.randrange(1, 6) if rng.random() < 0.5 else s for s in size]
    spillable = [rng.random() < 0.85 for _ in range(n)]
    capacity = max(1, int(_peak(start, end, size, set(range(n))) * rng.uniform(0.3, 1.1)))
    choice = choose_spill(start, end, size, cost, spillable, capacity)
    expected = _brute(start, end, size, cost, spillable, capacity)
    if expected is None:
        assert choice is None
        return
    assert choice is not None
    assert choice.proved
    assert choice.cost == expected == sum(cost[i] for i in choice.spilled)
    assert all(spillable[i] for i in choice.spilled)
    keep = set(range(n)) - set(choice.spilled)
    assert _peak(start, end, size, keep) <= capacity


@pytest.mark.parametrize("seed", range(40))
def test_greedy_choice_without_search_is_still_enough(seed: int) -> None:
    rng = random.Random(1000 + seed)
    n = rng.randrange(2, 10)
    start, end, size = _instance(rng, n)
    capacity = max(1, _peak(start, end, size, set(range(n))) // 2)
    choice = choose_spill(start, end, size, size, [True] * n, capacity, node_limit=0)
    expected = _brute(start, end, size, size, [True] * n, capacity)
    assert choice is not None
    assert expected is not None
    assert not choice.proved
    assert choice.cost >= expected
    assert _peak(start, end, size, set(range(n)) - set(choice.spilled)) <= capacity


def test_costs_weigh_bytes_by_accesses() -> None:
    request = PlanRequest.model_validate(
        {
            "block": [32],
            "buffers": [
                {"id": "cold", "size": 80, "start": 0, "end": 2},
                {
                    "id": "hot",
                    "size": 64,
                    "start": 0,
                    "end": 2,
                    "accesses": [
                        {"op": "write", "at": 0, "bytes": 2, "index": {"threadIdx.x": 1}},
                        {
                            "op": "read",
                            "at": 1,
                            "bytes": 2,
                            "index": {"threadIdx.x": 1, "i": 0},
                            "loops": {"i": 8},
                        },
                    ],
                },
            ],
        }
    )
    # hot: 64 bytes, one write and eight reads per thread; cold: 80 bytes, no patterns.
    assert spill_costs(request) == [80, 64 * 9]


def _spill_request(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "spill",
        "capacity": 128,
        "alignment": 16,
        "block": [32],
        "barriers": [4],
        "buffers": [
            {"id": "a", "size": 64, "start": 0, "end": 4},
            {"id": "b", "size": 96, "start": 0, "end": 4},
            {"id": "c", "size": 48, "start": 1, "end": 6},
            {"id": "d", "size": 64, "start": 4, "end": 8},
        ],
        "options": {"sync": "existing", "overflow": "spill"},
    }
    data.update(changes)
    return data


def test_error_stays_infeasible_with_its_certificate() -> None:
    data = _spill_request()
    data["options"] = {"sync": "existing"}
    plan = planner.plan(data)
    assert plan.status == "infeasible"
    assert plan.certificate is not None
    assert plan.certificate.live_bytes == 208  # a, b and c live at point 1
    assert plan.spilled == []


def test_spill_moves_the_cheapest_buffers_to_global_memory() -> None:
    data = _spill_request()
    plan = planner.plan(data)
    # Live at 1: a 64 + b 96 + c 48 = 208 > 128; spilling b (96) is the cheapest fix.
    assert plan.status == "optimal"
    assert plan.spilled == ["b"]
    memory = {p.id: p.memory for p in plan.placements}
    assert memory == {"a": "shared", "b": "global", "c": "shared", "d": "shared"}
    assert plan.arena_bytes <= 128
    assert plan.global_bytes == 96
    assert plan.certificate is None
    assert plan.launch.dynamic_smem_bytes == plan.arena_bytes
    assert plan.diagnostics[0].code == "spilled"
    assert planner.validate(data, plan).valid


def test_hot_buffer_stays_in_shared_memory() -> None:
    data = _spill_request()
    # b read 16 times per thread: now spilling a and c (112 bytes) costs less than b.
    data["buffers"][1] = {
        **data["buffers"][1],
        "accesses": [
            {
                "op": "read",
                "at": 1,
                "bytes": 2,
                "index": {"threadIdx.x": 1, "i": 0},
                "loops": {"i": 16},
            }
        ],
    }
    plan = planner.plan(data)
    assert plan.spilled == ["a", "c"]
    assert plan.global_bytes >= 64
    assert planner.validate(data, plan).valid


def test_pinned_buffers_never_spill() -> None:
    data = _spill_request()
    data["buffers"][1] = {**data["buffers"][1], "offset": 0}
    plan = planner.plan(data)
    assert "b" not in plan.spilled
    assert plan.status == "optimal"
    assert planner.validate(data, plan).valid
    data["buffers"][0] = {**data["buffers"][0], "offset": 96, "size": 48}
    data["capacity"] = 120
    stuck = planner.plan(data)
    assert stuck.status == "infeasible"
    assert "spill_impossible" in [d.code for d in stuck.diagnostics]


@pytest.mark.parametrize("sync", ["existing", "insert", "none"])
@pytest.mark.parametrize("seed", range(12))
def test_spilled_plans_fit_and_validate(sync: str, seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(2, 9)
    start, end, size = _instance(rng, n)
    peak = _peak(start, end, size, set(range(n)))
    capacity = max(64, int(peak * rng.uniform(0.4, 0.9)))
    data = {
        "capacity": capacity,
        "alignment": rng.choice([1, 8, 16]),
        "barriers": sorted(rng.sample(range(max(end) + 1), min(3, max(end) + 1))),
        "buffers": [
            {"id": f"b{i}", "size": size[i], "start": start[i], "end": end[i]} for i in range(n)
        ],
        "options": {"sync": sync, "overflow": "spill", "time_limit": 2.0},
    }
    plan = planner.plan(data)
    if max(size) > capacity or plan.status not in ("optimal", "feasible"):
        return  # no buffer too big for shared memory alone is ever left there
    assert plan.arena_bytes <= capacity
    assert planner.validate(data, plan).valid
    spilled = {p.id for p in plan.placements if p.memory == "global"}
    assert set(plan.spilled) == spilled
    expected = _brute(start, end, size, size, [True] * n, capacity)
    assert expected is not None
    assert sum(size[int(i[1:])] for i in spilled) >= expected


def _plan_with(request: PlanRequest, placements: list[Placement], **fields: Any) -> Plan:
    base = planner.plan(request.model_copy(update={"capacity": None}))
    shared = [p.offset + p.size for p in placements if p.memory == "shared"]
    return base.model_copy(
        update={"placements": placements, "arena_bytes": max(shared, default=0), **fields}
    )


def test_validator_checks_the_workspace_as_an_arena() -> None:
    request = PlanRequest.model_validate(_spill_request())
    good = [
        Placement(id="a", offset=0, size=64),
        Placement(id="b", offset=0, size=96, memory="global"),
        Placement(id="c", offset=64, size=48),
        Placement(id="d", offset=0, size=64, memory="global"),
    ]
    ok = _plan_with(request, good, spilled=["b", "d"], global_bytes=96)
    # d reuses b's bytes after the barrier at 4: fine in global memory too.
    assert validate_plan(request, ok).valid
    wrong_size = _plan_with(request, good, spilled=["b", "d"], global_bytes=64)
    assert [v.code for v in validate_plan(request, wrong_size).violations] == ["wrong_arena"]
    wrong_list = _plan_with(request, good, spilled=["b"], global_bytes=96)
    assert [v.code for v in validate_plan(request, wrong_list).violations] == ["wrong_arena"]
    # Without the barrier at 4, d reusing b's global bytes is a hazard.
    unsynced = request.model_copy(update={"barriers": []})
    plan = _plan_with(unsynced, good, spilled=["b", "d"], global_bytes=96, barriers=Barriers())
    report = validate_plan(unsynced, plan)
    assert [v.code for v in report.violations] == ["missing_barrier"]
    assert report.violations[0].buffers == ["b", "d"]
    live_clash = [
        Placement(id="a", offset=0, size=64, memory="global"),
        Placement(id="b", offset=32, size=96, memory="global"),
        Placement(id="c", offset=0, size=48),
        Placement(id="d", offset=64, size=64),
    ]
    plan = _plan_with(request, live_clash, spilled=["a", "b"], global_bytes=128)
    assert [v.code for v in validate_plan(request, plan).violations] == ["overlap"]


def test_spill_is_deterministic_and_keeps_barrier_options() -> None:
    data = _spill_request()
    data["options"] = {
        "sync": "insert",
        "overflow": "spill",
        "barrier_candidates": [2, 5, 7],
        "max_new_barriers": 1,
    }
    data["barriers"] = [4]
    first = planner.plan(data)
    assert planner.plan(json.dumps(data)).model_dump_json() == first.model_dump_json()
    assert first.spilled
    assert set(first.barriers.inserted) <= {2, 5, 7}
    assert len(first.barriers.inserted) <= 1
    assert planner.validate(data, first).valid


def test_cli_validates_a_spilled_plan(tmp_path: Path) -> None:
    request = tmp_path / "r.json"
    request.write_text(json.dumps(_spill_request()))
    out = tmp_path / "p.json"
    assert main(["plan", str(request), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["spilled"] == ["b"]
    assert main(["validate", str(request), str(out)]) == 0
    broken = json.loads(out.read_text())
    broken["global_bytes"] = 1
    out.write_text(json.dumps(broken))
    assert main(["validate", str(request), str(out)]) == 1


def test_a_spilled_plan_lists_the_aliases_of_its_two_arenas() -> None:
    # One thread: 'a' may reuse the bytes 'c' held with no barrier, and the shared arena's
    # plan says so; the plan that spills 'b' must keep saying so (not the aliases of the
    # plan that did not fit).
    data: dict[str, Any] = {
        "block": [1],
        "capacity": 256,
        "buffers": [
            {
                "id": "a",
                "size": 4,
                "start": 4,
                "end": 13,
                "accesses": [{"op": "write", "at": 10, "bytes": 4, "index": {"threadIdx.x": 2}}],
            },
            {"id": "b", "size": 1024, "start": 6, "end": 8},
            {
                "id": "c",
                "size": 16,
                "start": 2,
                "end": 3,
                "accesses": [{"op": "read", "at": 2, "bytes": 1, "index": {"threadIdx.x": 0}}],
            },
        ],
        "options": {"overflow": "spill"},
    }
    request = PlanRequest.model_validate(data)
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    assert plan.spilled == ["b"]
    assert plan.arena_bytes <= 256
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["a"] == offsets["c"] == 0
    assert plan.barriers.required == []
    assert plan.aliases == [["c", "a"]]


@pytest.mark.parametrize("ranges", [False, True])
def test_an_alias_of_two_spilled_buffers_is_checked_in_the_workspace(ranges: bool) -> None:
    # Each element is touched by one and the same thread in both buffers: in the workspace,
    # 'y' may take the bytes of 'x' with no barrier when the plan lists the pair.
    own = [{"op": "read", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}]
    later = [{**own[0], "at": 10}]
    x: dict[str, Any] = {"id": "x", "size": 64, "start": 1, "end": 2, "accesses": own}
    if ranges:
        x = {"id": "x", "size": 64, "ranges": [[1, 2]], "accesses": own}
    data: dict[str, Any] = {
        "block": [16],
        "capacity": 16,
        "buffers": [x, {"id": "y", "size": 64, "start": 10, "end": 11, "accesses": later}],
        "options": {"sync": "existing", "overflow": "spill"},
    }
    request = PlanRequest.model_validate(data)
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    assert plan.spilled == ["x", "y"]
    assert plan.aliases == [["x", "y"]]
    assert {p.offset for p in plan.placements} == {0}
    # The claim is the workspace's: between a shared and a global buffer it is refused.
    mixed = plan.model_copy(
        update={
            "placements": [
                plan.placements[0].model_copy(update={"memory": "shared"}),
                *plan.placements[1:],
            ],
            "spilled": ["y"],
            "arena_bytes": 64,
        }
    )
    codes = [v.code for v in validate_plan(request, mixed).violations]
    assert "bad_alias" in codes
