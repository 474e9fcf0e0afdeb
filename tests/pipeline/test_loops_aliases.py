"""The same-thread alias rule per iteration of a loop (nvFuser's inner aliasing inside a loop
nest): plans that use it, checked by both validators and by the thread-level brute force
over every unrolled execution (tests/loops_threads.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate
from tests.support.control_flow import planned_programs
from tests.support.loops_brute import check
from tests.support.loops_threads import races, random_patterned
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "loop_nvfuser_inner_alias.json"


def _data(sync: str, barriers: list[int] | None = None, transposed: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    data["options"]["sync"] = sync
    data["barriers"] = barriers or []
    if transposed:  # T3_s element 4 t + i: another thread than T2_s's owner
        for a in data["buffers"][1]["accesses"]:
            a["index"] = {"threadIdx.x": 4, "i": 1}
    return data


def _safe(req: PlanRequest, plan: Plan) -> None:
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    assert races(req, plan) == []


def _plan(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    req = parse_request(data)
    plan = planner.plan(req)
    _safe(req, plan)
    return req, plan


def _offsets(plan: Plan) -> dict[str, int]:
    return {p.id: p.offset for p in plan.placements}


@pytest.mark.parametrize("sync", ["existing", "insert", "none"])
def test_inner_alias_in_a_loop_needs_no_barrier(sync: str) -> None:
    # T2_s then T3_s in every iteration, each element written and read by one thread: T3_s
    # sits on T2_s, and the next iteration's T2_s on T3_s, with no barrier at all.
    _, plan = _plan(_data(sync))
    assert plan.arena_bytes == 4096
    assert _offsets(plan) == {"T2_s": 0, "T3_s": 0}
    assert plan.barriers.inserted == plan.barriers.required == []
    assert plan.aliases == [["T2_s", "T3_s"], ["T3_s", "T2_s"]]


def test_without_access_patterns_the_loop_needs_barriers() -> None:
    data = _data("existing")
    for b in data["buffers"]:
        del b["accesses"]
    with pytest.raises(RequestError) as caught:  # each buffer reuses its own bytes
        planner.plan(parse_request(data))
    assert caught.value.errors[0]["type"] == "unprotected_reuse"
    data["options"]["sync"] = "insert"
    _, plan = _plan(data)
    assert plan.arena_bytes == 4096
    assert plan.barriers.inserted == [0, 2]  # in the body and at the back edge, 8 trips each
    assert plan.barriers.executions == 16


def test_another_thread_in_the_later_tensor_gets_both_barriers() -> None:
    _, plan = _plan(_data("existing", transposed=True))
    assert plan.arena_bytes == 8192
    assert plan.aliases == []
    _, plan = _plan(_data("insert", transposed=True))
    assert plan.arena_bytes == 4096
    assert plan.barriers.inserted == [0, 2]
    assert plan.aliases == []


def test_the_back_edge_aliases_only_when_the_next_iteration_agrees() -> None:
    # A barrier at 2 protects the reuse inside the body; the back edge (T3_s of iteration
    # i, T2_s of iteration i + 1) has none: it may share only by the alias rule.
    _, plan = _plan(_data("existing", [2]))
    assert plan.arena_bytes == 4096
    assert plan.aliases == [["T3_s", "T2_s"]]
    _, plan = _plan(_data("existing", [2], transposed=True))
    assert plan.arena_bytes == 8192
    # Under "insert" the back edge gets its barrier, the body keeps the existing one.
    _, plan = _plan(_data("insert", [2], transposed=True))
    assert plan.arena_bytes == 4096
    assert plan.barriers.inserted == [0]


def test_planted_faults_are_caught() -> None:
    req, plan = _plan(_data("insert", transposed=True))
    for dropped in (0, 2):
        kept = [p for p in plan.barriers.inserted if p != dropped]
        broken = plan.model_copy(
            update={"barriers": plan.barriers.model_copy(update={"inserted": kept})}
        )
        assert not planner.validate(req, broken).valid
        assert not emulate(req, broken).valid
        assert races(req, broken)
    # The aliased plan of the same-thread kernel, applied to the transposed one.
    _, aliased = _plan(_data("insert"))
    assert not planner.validate(req, aliased).valid
    assert not emulate(req, aliased).valid
    assert races(req, aliased)
    assert check(req, aliased)[0]  # the lifetime brute force hands claimed aliases to races
    # The aliased plan without its claims: the static check wants them listed.
    req = parse_request(_data("insert"))
    unlisted = aliased.model_copy(update={"aliases": []})
    report = planner.validate(req, unlisted)
    assert {v.code for v in report.violations} == {"missing_barrier"}


def test_random_patterned_programs_are_race_free() -> None:
    refused = frozenset({"unprotected_reuse", "ranges_overlap"})
    cases = planned_programs(random_patterned, 20261, 150, refused=refused, control_flow_only=True)
    planned = aliased = 0
    for data, req, plan in cases:
        planned += 1
        aliased += bool(plan.aliases)
        assert planner.validate(req, plan).valid, data
        assert emulate(req, plan).valid, data
        assert races(req, plan) == [], (data, plan.barriers, plan.aliases)
    assert planned >= 100
    assert aliased >= 30


@pytest.mark.parametrize(("pin", "arena", "apart"), [(16, 8208, True), (1024, 5120, False)])
def test_a_shift_that_breaks_the_rule_places_the_pair_apart(
    pin: int, arena: int, apart: bool
) -> None:
    # T3_s pinned 16 bytes up: thread t's element k of T3_s lands on element k + 4 of T2_s,
    # another thread's, so the pair left free by the rule is placed again apart. 1024 bytes
    # up, element k meets element k + 256, the same thread's: the alias holds there.
    data = _data("existing")
    data["buffers"][1]["offset"] = pin
    _, plan = _plan(data)
    offsets = _offsets(plan)
    assert offsets["T3_s"] == pin
    assert plan.arena_bytes == arena
    shared = offsets["T2_s"] < pin + 4096 and pin < offsets["T2_s"] + 4096
    assert shared is not apart
    assert (plan.aliases == []) is apart


def test_an_alias_claim_covers_the_reuses_with_no_barrier_between() -> None:
    # 'b' reuses the bytes of 'a''s first range as the same thread, with no barrier; 'a''s
    # second range (no access) takes them back after a barrier. The claim ['a', 'b'] is
    # about the first reuse only: the second is the barrier's.
    data: dict[str, Any] = {
        "block": [1],
        "buffers": [
            {
                "id": "a",
                "size": 1,
                "ranges": [[6, 8], [19, 21]],
                "accesses": [{"op": "read", "at": 7, "bytes": 1, "index": {"threadIdx.x": 0}}],
            },
            {
                "id": "b",
                "size": 4,
                "start": 9,
                "end": 16,
                "accesses": [
                    {
                        "op": "read",
                        "at": 9,
                        "bytes": 2,
                        "index": {"threadIdx.x": 0, "i": 1},
                        "loops": {"i": 2},
                    }
                ],
            },
        ],
    }
    req, plan = _plan(data)
    assert _offsets(plan) == {"a": 0, "b": 0}
    assert plan.aliases == [["a", "b"]]
    assert len(plan.barriers.required) == 1
    assert 10 <= plan.barriers.required[0] <= 19
    # Without the barrier the second reuse has no claim to stand on.
    dropped = plan.model_copy(
        update={"barriers": plan.barriers.model_copy(update={"inserted": [], "required": []})}
    )
    assert "missing_barrier" in {v.code for v in planner.validate(req, dropped).violations}
