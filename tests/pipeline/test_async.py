"""Asynchronous accesses and their completion (docs/design.md, Asynchronous accesses): the
request model, the planner's lowering, and both validators on straight-line and loop requests.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from planner.core.io import parse_request, request_sha256
from planner.core.models.sync import completions
from planner.selftest import run_selftest, subjects, validators
from planner.validators.emulator import emulate
from planner.validators.faults import FaultKind, plant, plant_fault
from tests.support.async_requests import FENCE, REQ, codes, planned, refusals
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


# --- which sync covers an access ------------------------------------------------------------


def test_each_agent_completes_at_its_covering_sync() -> None:
    request = parse_request(REQ)
    covered, missing = completions(request.buffers, request.syncs, [], [])
    assert missing == []
    done = {(c.buffer, c.access): c.done for c in covered}
    # TMA load: the mbarrier wait at 2; wgmma read: wgmma wait_group at 4; TMA store: the
    # bulk wait_group.read at 8.
    assert done == {(0, 0): 2, (0, 1): 4, (1, 1): 8}


def _cp_async(pending: int) -> dict[str, Any]:
    tile = {"op": "write", "bytes": 16, "threads": "all", "agent": "cp.async"}
    return {
        "block": [32],
        "syncs": [{"kind": "wait_group", "at": 3, "group": "cp.async", "pending": pending}],
        "buffers": [
            {"id": "s0", "size": 512, "start": 0, "end": 5, "accesses": [{**tile, "at": 0}]},
            {"id": "s1", "size": 512, "start": 1, "end": 5, "accesses": [{**tile, "at": 1}]},
        ],
    }


def test_wait_group_leaves_the_most_recent_groups_in_flight() -> None:
    # s0's group completes at 3, s1's never does (sync "existing": no wait is the plan's)
    errors = refusals({**_cp_async(1), "options": {"sync": "existing"}})
    assert [e["loc"] for e in errors] == [["buffers", 1, "accesses", 0, "agent"]]
    assert errors[0]["type"] == "uncovered_async_access"
    assert "point 1" in errors[0]["msg"]
    request = parse_request(_cp_async(0))
    covered, _ = completions(request.buffers, request.syncs, [], [])
    assert [c.done for c in covered] == [3, 3]


@pytest.mark.parametrize(
    ("edit", "loc", "kind"),
    [
        (("syncs", 0), ["buffers", 0, "accesses", 0, "agent"], "uncovered_async_access"),
        (("syncs", 1), ["buffers", 0, "accesses", 0, "agent"], "uncovered_async_access"),
        (("syncs", 2), ["buffers", 0, "accesses", 1, "agent"], "uncovered_async_access"),
        (("syncs", 4), ["buffers", 1, "accesses", 1, "agent"], "uncovered_async_access"),
    ],
)
def test_an_access_without_its_covering_sync_is_refused(
    edit: tuple[str, int], loc: list[Any], kind: str
) -> None:
    data = copy.deepcopy(REQ)
    del data[edit[0]][edit[1]]
    data["options"] = {"sync": "existing"}
    errors = refusals(data)
    assert [e["loc"] for e in errors] == [loc]
    assert errors[0]["type"] == kind


def test_a_wait_outside_the_live_range_covers_nothing() -> None:
    data = copy.deepcopy(REQ)
    data["buffers"][0]["end"] = 4
    data["syncs"][2]["at"] = 5  # the wgmma wait at 5 comes after the range [0, 4)
    data["options"] = {"sync": "existing"}
    errors = refusals(data)
    assert errors[0]["loc"] == ["buffers", 0, "accesses", 1, "agent"]
    assert "by the end 4" in errors[0]["msg"]


@pytest.mark.parametrize(
    ("access", "field", "kind"),
    [
        ({"op": "read", "agent": "cp.async"}, "op", "agent_op"),
        ({"op": "write", "agent": "mma"}, "op", "agent_op"),
        ({"op": "write", "agent": "tma"}, "mbarrier", "missing_mbarrier"),
        ({"op": "read", "agent": "tma", "mbarrier": "full"}, "mbarrier", "mbarrier_not_allowed"),
    ],
)
def test_agents_and_ops_that_do_not_go_together(
    access: dict[str, Any], field: str, kind: str
) -> None:
    data = copy.deepcopy(REQ)
    data["buffers"][2]["accesses"][0] = {"at": 9, "bytes": 16, "threads": "all", **access}
    errors = refusals(data)
    assert [e["loc"] for e in errors] == [["buffers", 2, "accesses", 0, field]]
    assert errors[0]["type"] == kind


@pytest.mark.parametrize(
    ("sync", "field", "kind"),
    [
        ({"kind": "wait_group", "at": 1}, "group", "missing_group"),
        ({"kind": "mbarrier_wait", "at": 1}, "mbarrier", "missing_mbarrier"),
        ({"kind": "fence_proxy_async", "at": 1, "group": "bulk"}, "group", "group_not_allowed"),
        (
            {"kind": "wait_group", "at": 1, "group": "wgmma", "read": True},
            "read",
            "read_not_allowed",
        ),
        ({"kind": "barrier", "at": 1}, "kind", "literal_error"),
        ({"kind": "fence_proxy_async", "at": 99}, "at", "sync_out_of_range"),
    ],
)
def test_bad_syncs_name_the_field(sync: dict[str, Any], field: str, kind: str) -> None:
    data = copy.deepcopy(REQ)
    data["syncs"].append(sync)
    errors = refusals(data)
    assert errors[0]["loc"][:2] == ["syncs", 5]
    assert errors[0]["loc"][-1] == field
    assert errors[0]["type"] == kind


@pytest.mark.parametrize(
    ("option", "kind"),
    [({"shrink": True}, "shrink_with_async"), ({"overflow": "spill"}, "spill_with_async")],
)
def test_shrink_and_spill_are_refused_with_async_accesses(
    option: dict[str, Any], kind: str
) -> None:
    data = copy.deepcopy(REQ)
    data["options"] = {**data["options"], **option}
    assert [e["type"] for e in refusals(data)] == [kind]


def test_a_version_1_request_reads_back_as_before() -> None:
    plain = {"buffers": [{"id": "a", "size": 8, "start": 0, "end": 2}]}
    request = parse_request(plain)
    assert "agent" not in request.model_dump_json()
    assert "syncs" not in request.model_dump_json()
    assert not request.has_control_flow


# --- planning -------------------------------------------------------------------------------


def test_reuse_waits_for_the_covering_sync_and_a_barrier_after_it() -> None:
    request, plan = planned(REQ)
    assert {p.id: p.offset for p in plan.placements} == {"A": 0, "C": 0, "D": 0}
    # C over A after the barrier at 4 (wgmma's wait_group runs at 4); D over C only after
    # the store's bulk wait_group.read at 8, so a barrier at 9 is inserted.
    assert plan.barriers.inserted == [9]
    assert plan.barriers.required == [4, 9]
    assert plan.request_sha256 == request_sha256(request)


def test_under_existing_barriers_a_reuse_before_the_covering_sync_is_kept_apart() -> None:
    data = copy.deepcopy(REQ)
    data["options"] = {"sync": "existing", "time_limit": 2.0}
    _, plan = planned(data)
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["A"] == offsets["C"]  # the barrier at 4 follows the wgmma wait
    assert offsets["D"] not in (offsets["C"],)  # no barrier after the store's wait at 8


def test_a_thread_written_tile_reused_by_tma_needs_the_proxy_fence() -> None:
    _, fenced = planned(FENCE)
    assert fenced.arena_bytes == 4096
    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]  # no fence_proxy_async
    _, unfenced = planned(data)
    assert unfenced.arena_bytes == 8192


def test_loops_cp_async_double_buffer() -> None:
    tile = {"bytes": 16, "threads": "all"}
    data = {
        "name": "cp_async_loop",
        "block": [64],
        "barriers": [0, 3],
        "loops": [{"start": 0, "end": 5, "trips": 8}],
        "syncs": [{"kind": "wait_group", "at": 2, "group": "cp.async"}],
        "buffers": [
            {
                "id": "stage",
                "size": 1024,
                "start": 0,
                "end": 5,
                "accesses": [
                    {"op": "write", "at": 1, "agent": "cp.async", **tile},
                    {"op": "read", "at": 4, **tile},
                ],
            },
            {"id": "acc", "size": 1024, "start": 5, "end": 7},
        ],
        "options": {"sync": "insert", "time_limit": 2.0},
    }
    request, plan = planned(data)
    assert request.has_control_flow
    assert plan.status == "optimal"


# --- both validators: planted faults --------------------------------------------------------


def test_both_catch_a_reuse_before_the_covering_wait() -> None:
    _, plan = planned(REQ)
    # The store's wait moves to 10: D (first access at 9) takes C's bytes while the TMA store
    # may still read them, whatever the barrier at 9.
    late = copy.deepcopy(REQ)
    late["syncs"][4]["at"] = 10
    late["buffers"][1]["end"] = 11
    late["buffers"][2]["start"] = 11
    late["buffers"][2]["end"] = 13
    for access in late["buffers"][2]["accesses"]:
        access["at"] += 2
    moved = parse_request(late)
    static, emulated = codes(moved, plan)
    assert "missing_barrier" in static or "overlap" in static
    assert emulated & {"race", "clobbered"}


def test_both_catch_a_dropped_barrier_after_the_wait() -> None:
    request, plan = planned(REQ)
    barriers = plan.barriers.model_copy(update={"inserted": [], "required": [4]})
    bad = plan.model_copy(update={"barriers": barriers})
    static, emulated = codes(request, bad)
    assert "missing_barrier" in static
    assert "race" in emulated


def test_both_catch_a_barrier_before_the_wait_instead_of_after() -> None:
    request, plan = planned(REQ)
    # A barrier at 8 runs after the bulk wait_group.read at 8 (waits come first at a point),
    # so it protects; one at 7 does not: the store still reads C.
    ok = plan.model_copy(
        update={"barriers": plan.barriers.model_copy(update={"inserted": [8], "required": [4, 8]})}
    )
    assert codes(request, ok) == (set(), set())
    early = plan.model_copy(
        update={"barriers": plan.barriers.model_copy(update={"inserted": [7], "required": [4, 7]})}
    )
    static, emulated = codes(request, early)
    assert "missing_barrier" in static
    assert "race" in emulated


def test_both_catch_a_missing_proxy_fence() -> None:
    _, plan = planned(FENCE)
    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]
    request = parse_request(data)
    static, emulated = codes(request, plan)
    assert static == {"missing_fence"}
    assert emulated == {"missing_fence"}


def test_a_fence_without_a_barrier_after_it_is_not_enough() -> None:
    _, plan = planned(FENCE)
    data = copy.deepcopy(FENCE)
    data["barriers"] = [1]  # before the fence at 2
    data["buffers"][0]["accesses"][1]["at"] = 0
    request = parse_request(data)
    static, emulated = codes(request, plan)
    assert "missing_fence" in static
    assert "missing_fence" in emulated


def test_the_emulation_cost_bounds_what_an_async_run_enumerates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from planner.validators.cost import emulation_cost
    from tests.support.emulation_work import EmulationWork

    for data in (REQ, FENCE):
        request, plan = planned(data)
        work = EmulationWork(monkeypatch)
        emulate(request, plan)
        assert 0 < work.units <= emulation_cost(request, plan, 4).total


# --- planted faults in the self-test --------------------------------------------------------


@pytest.mark.parametrize("kind", ["early_barrier", "drop_fence", "misalign_tile"])
def test_every_planted_async_fault_is_caught_by_both(kind: FaultKind) -> None:
    request, plan = planned(json.loads((EXAMPLES / "tma_wgmma_epilogue.json").read_text()))
    rng = np.random.default_rng(11)
    planted = 0
    for _ in range(20):
        fault = plant_fault(request, plan, kind, rng)
        assert fault is not None
        planted += 1
        static, emulated = codes(fault.request, fault.plan)
        assert static, fault.description
        assert emulated, fault.description
    assert planted == 20


def test_early_barrier_is_planted_in_the_plan_alone_where_it_can_be() -> None:
    request, plan = planned(json.loads((EXAMPLES / "tma_wgmma_epilogue.json").read_text()))
    bad = plant(request, plan, "early_barrier", np.random.default_rng(0))
    assert bad is not None  # the inserted barrier at 9 moves to 7
    static, emulated = codes(request, bad)
    assert "missing_barrier" in static
    assert "race" in emulated
    assert plant(request, plan, "drop_fence", np.random.default_rng(0)) is None


def test_selftest_catches_all_async_faults_in_the_examples() -> None:
    cases = [s for s in subjects(0, seed=0) if s.name == "tma_wgmma_epilogue.json"]
    kinds = ["early_barrier", "drop_fence", "misalign_tile"]
    tally = run_selftest(cases * 4, validators(), seed=2, kinds=kinds)
    for kind in kinds:
        assert tally.planted[kind] == 4
        assert tally.caught[kind, "static"] == 4
        assert tally.caught[kind, "emulator"] == 4
    assert not tally.failed


# --- sync policies: the fences a plan adds or requires --------------------------------------


@pytest.mark.parametrize(("sync", "origin"), [("insert", "inserted"), ("none", "required")])
def test_a_missing_fence_goes_at_an_existing_barrier(sync: str, origin: str) -> None:
    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]  # no fence_proxy_async; the barrier at 2 stands
    data["options"]["sync"] = sync
    request, plan = planned(data)
    assert plan.arena_bytes == 4096  # Y over X, as with the request's own fence
    assert [(f.at, f.origin) for f in plan.fences] == [(2, origin)]
    bad = plan.model_copy(update={"fences": []})
    assert codes(request, bad) == ({"missing_fence"}, {"missing_fence"})
    fault = plant(request, plan, "drop_fence", np.random.default_rng(0))
    assert fault is not None
    assert codes(request, fault) == ({"missing_fence"}, {"missing_fence"})


def test_no_fence_is_added_where_no_barrier_of_the_request_can_follow_it() -> None:
    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]
    data["barriers"] = []
    data["options"]["sync"] = "insert"
    _, plan = planned(data)
    assert plan.arena_bytes == 8192
    assert plan.fences == []
    assert "fences" not in plan.model_dump_json()


def test_existing_adds_no_fence() -> None:
    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]
    _, plan = planned(data)  # sync "existing"
    assert (plan.arena_bytes, plan.fences) == (8192, [])


def test_emitters_carry_the_syncs_and_the_plan_fences() -> None:
    from planner.emit.cuda import emit_cuda
    from planner.emit.mlir import emit_mlir

    data = copy.deepcopy(FENCE)
    data["syncs"] = data["syncs"][1:]
    data["options"]["sync"] = "insert"
    request, plan = planned(data)
    for text in (emit_cuda(request, plan), emit_mlir(request, plan)):
        assert "point 2: fence.proxy.async.shared::cta  // inserted by the plan: add it" in text
        assert 'point 4: mbarrier.try_wait (until the phase completes) "bar"' in text
    request, plan = planned(REQ)
    cuda = emit_cuda(request, plan)
    assert "point 4: wgmma.wait_group.sync.aligned 0" in cuda
    assert "point 8: cp.async.bulk.wait_group.read 0" in cuda
