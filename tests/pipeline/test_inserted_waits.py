"""Waits for asynchronous accesses that no sync of the request completes (docs/design.md,
Asynchronous accesses, Sync policies): inserted under sync "insert", required under "none",
refused under "existing"; both validators take them as part of the kernel and reject a plan
without them (``missing_wait``); both emitters list them."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

from planner.core.models import Plan
from planner.emit.cuda import emit_cuda
from planner.emit.mlir import emit_mlir
from planner.validators.faults import plant, plant_fault
from tests.support.async_requests import codes, planned, refusals
from tests.support.paths import ROOT
from tests.support.uncovered_async import AGENTS, uncovered


def _waits(plan: Plan) -> list[tuple[str, int, str]]:
    return [(w.kind, w.at, w.origin) for w in plan.waits]


@pytest.mark.parametrize("kind", list(AGENTS))
@pytest.mark.parametrize(("sync", "origin"), [("insert", "inserted"), ("none", "required")])
def test_an_uncovered_access_gets_a_wait_at_the_next_point(
    kind: str, sync: str, origin: str
) -> None:
    _, plan = planned(uncovered(kind, sync))
    assert _waits(plan) == [(kind, 2, origin)]
    assert plan.arena_bytes == 4096  # B takes A's bytes: the wait at 2 completes the access
    dumped = json.loads(plan.model_dump_json())
    expected: dict[str, Any] = {"kind": kind, "at": 2, "origin": origin}
    assert dumped["waits"] == [expected]


@pytest.mark.parametrize("kind", list(AGENTS))
def test_an_uncovered_access_is_refused_under_existing(kind: str) -> None:
    errors = refusals(uncovered(kind, "existing"))
    assert [e["loc"] for e in errors] == [["buffers", 0, "accesses", 1, "agent"]]
    assert errors[0]["type"] == "uncovered_async_access"


def test_a_plan_without_uncovered_accesses_has_no_waits_field() -> None:
    data = uncovered("cp.async", "insert")
    data["syncs"] = [{"kind": "wait_group", "at": 3, "group": "cp.async"}]
    _, plan = planned(data)
    assert plan.waits == []
    assert "waits" not in json.loads(plan.model_dump_json())


def test_accesses_issued_at_one_point_share_one_wait() -> None:
    data = uncovered("cp.async", "insert")
    data["buffers"][1]["start"] = 0
    data["buffers"][1]["accesses"].insert(
        0, {"op": "write", "at": 1, "bytes": 16, "threads": "all", "agent": "cp.async"}
    )
    data["buffers"][1]["accesses"][1]["at"] = 5
    _, plan = planned(data)
    assert _waits(plan) == [("cp.async", 2, "inserted")]


def test_a_partial_wait_of_the_request_gets_a_full_one_where_it_leaves_the_group() -> None:
    data = uncovered("cp.async", "insert")
    # pending 1 with no later group: the request's wait at 3 completes nothing.
    data["buffers"][0]["accesses"][1]["at"] = 2
    data["syncs"] = [{"kind": "wait_group", "at": 3, "group": "cp.async", "pending": 1}]
    _, plan = planned(data)
    assert _waits(plan) == [("cp.async", 3, "inserted")]


def _looped(issue: int) -> dict[str, Any]:
    """A loop [1, 5) whose body issues a cp.async write at ``issue``, and a nested loop
    [2, 4) in it."""
    data = uncovered("cp.async", "insert", issue=issue)
    data["buffers"][0]["accesses"] = [data["buffers"][0]["accesses"][1]]
    data["buffers"][0].update(start=1, end=5)
    data["buffers"][1].update(start=5, end=8)
    data["buffers"][1]["accesses"][0]["at"] = 5
    data["loops"] = [{"start": 1, "end": 5, "trips": 4}, {"start": 2, "end": 4, "trips": 2}]
    return data


def test_in_a_loop_the_wait_is_in_the_issues_scope() -> None:
    # Issued at 1, before the nested loop: the first point of its scope after it is the
    # nested loop's end.
    _, plan = planned(_looped(1))
    assert _waits(plan) == [("cp.async", 4, "inserted")]
    _, plan = planned(_looped(2))  # inside the nested loop: its next point
    assert _waits(plan) == [("cp.async", 3, "inserted")]


def test_an_issue_at_the_last_point_of_its_loop_body_is_refused() -> None:
    errors = refusals(_looped(4))
    assert errors[0]["type"] == "uncovered_async_access"
    assert "no point after the issue in its scope" in errors[0]["msg"]


def test_a_tma_write_gets_no_wait() -> None:
    data = uncovered("cp.async", "insert")
    access = data["buffers"][0]["accesses"][1]
    access.update(agent="tma", mbarrier="full")
    errors = refusals(data)
    assert errors[0]["type"] == "uncovered_async_access"
    assert "expect_tx" in errors[0]["msg"]


def test_partitions_keep_the_refusal_under_existing_only() -> None:
    """With partitions the wait is the issuing partition's (tests/pipeline/
    test_partitions_waits.py); under "existing" the request gives it or is refused."""
    data = uncovered("cp.async", "existing")
    data["partitions"] = [
        {"id": "producer", "threads": [0, 128]},
        {"id": "consumer", "threads": [128, 256]},
    ]
    data["block"] = [256]
    for b in data["buffers"]:
        for a in b["accesses"]:
            a["partition"] = "producer"
    errors = refusals(data)
    assert "uncovered_async_access" in [e["type"] for e in errors]
    # A wait of another partition covers none of the producer's groups.
    data["syncs"] = [{"kind": "wait_group", "at": 2, "group": "cp.async", "partition": "consumer"}]
    errors = refusals(data)
    assert "uncovered_async_access" in [e["type"] for e in errors]
    data["options"]["sync"] = "insert"
    _, plan = planned(data)
    assert [(w.at, w.partition) for w in plan.waits] == [(2, "producer")]


@pytest.mark.parametrize("kind", list(AGENTS))
@pytest.mark.parametrize("sync", ["insert", "none"])
def test_both_validators_reject_the_plan_without_its_wait(kind: str, sync: str) -> None:
    request, plan = planned(uncovered(kind, sync))
    bad = plant(request, plan, "drop_wait", np.random.default_rng(0))
    assert bad is not None
    assert bad.waits == []
    static, emulated = codes(request, bad)
    assert "missing_wait" in static
    assert "missing_wait" in emulated


def test_dropping_the_requests_wait_is_caught_by_both() -> None:
    data = uncovered("bulk", "insert")
    data["syncs"] = [{"kind": "wait_group", "at": 3, "group": "bulk", "read": True}]
    request, plan = planned(data)
    assert plan.waits == []
    fault = plant_fault(request, plan, "drop_wait", np.random.default_rng(0))
    assert fault is not None
    assert fault.request.syncs == []
    static, emulated = codes(fault.request, fault.plan)
    assert "missing_wait" in static
    assert "missing_wait" in emulated


@pytest.mark.parametrize(
    ("kind", "cuda", "mlir"),
    [
        ("cp.async", "planner_wait_group<0>();", "nvvm.cp.async.wait.group 0"),
        ("bulk", "planner_bulk_wait_group_read<0>();", "nvvm.cp.async.bulk.wait_group 0 read"),
        ("wgmma", "planner_wgmma_wait_group<0>();", "nvvm.wgmma.wait.group.sync.aligned 0"),
    ],
)
@pytest.mark.parametrize(("sync", "word"), [("insert", "inserted"), ("none", "required")])
def test_the_emitters_give_the_wait(kind: str, cuda: str, mlir: str, sync: str, word: str) -> None:
    request, plan = planned(uncovered(kind, sync))
    code = emit_cuda(request, plan)
    assert f"point 2: {cuda}  // {word}" in code
    ir = emit_mlir(request, plan)
    assert mlir in ir
    assert f"// {word}" in ir.split(mlir)[1]


@pytest.mark.parametrize("kind", list(AGENTS))
def test_the_mlir_with_the_waits_parses_and_verifies(kind: str) -> None:
    ir = pytest.importorskip("iree.compiler.ir")
    request, plan = planned(uncovered(kind, "insert"))
    with ir.Context():
        module = ir.Module.parse(emit_mlir(request, plan))
        assert module.operation.verify()


def test_the_hopper_matmul_without_its_store_wait_plans_with_one() -> None:
    data = json.loads((ROOT / "examples" / "hopper_tma_matmul.json").read_text())
    given = next(s for s in data["syncs"] if s.get("group") == "bulk")
    hostile = copy.deepcopy(data)
    hostile["syncs"] = [s for s in data["syncs"] if s.get("group") != "bulk"]
    hostile["options"] = {**data.get("options", {}), "sync": "insert"}
    request, plan = planned(hostile)
    store = next(
        a for b in request.buffers for a in b.accesses if a.agent == "tma" and a.op == "read"
    )
    assert _waits(plan) == [("bulk", store.at + 1, "inserted")]
    assert store.at + 1 <= given["at"]  # no later than the example's own
