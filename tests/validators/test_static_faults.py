"""The static validator accepts every plan the planner returns and catches planted faults.

On every example and on random requests with thread-access patterns, each plan is broken in
one way at a time: an inserted barrier dropped, a buffer slid over one live beside it, an
alias's thread mapping broken in the request, an offset misaligned. Each must be reported
with its code.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.faults import live_together
from tests.support.paths import ROOT
from tests.support.patterned import patterned_dicts

EXAMPLES = ROOT / "examples"
FILES = request_files(EXAMPLES)


def _codes(request: PlanRequest, plan: Plan) -> set[str]:
    return {v.code for v in validate_plan(request, plan).violations}


def _with_offset(plan: Plan, ident: str, offset: int) -> Plan:
    placements = [
        p.model_copy(update={"offset": offset}) if p.id == ident else p for p in plan.placements
    ]
    arena = max((p.offset + p.size for p in placements), default=0)
    return plan.model_copy(update={"placements": placements, "arena_bytes": arena})


def drop_barrier(plan: Plan, point: int) -> Plan:
    barriers = plan.barriers.model_copy(
        update={
            "inserted": [p for p in plan.barriers.inserted if p != point],
            "required": [p for p in plan.barriers.required if p != point],
        }
    )
    return plan.model_copy(update={"barriers": barriers})


def slide_over(request: PlanRequest, plan: Plan) -> tuple[str, Plan] | None:
    """The plan with one buffer moved onto bytes of a buffer live beside it; None if none."""
    placed = {p.id: p for p in plan.placements}
    for a in request.buffers:
        for b in request.buffers:
            if a.id == b.id or not live_together(request, a, b) or b.offset is not None:
                continue
            align = request.alignment_of(b)
            target = placed[a.id].offset // align * align  # at or below a's first byte
            if target + placed[b.id].size > placed[a.id].offset:
                return b.id, _with_offset(plan, b.id, target)
    return None


def misalign(request: PlanRequest, plan: Plan) -> tuple[str, Plan] | None:
    placed = {p.id: p for p in plan.placements}
    for b in request.buffers:
        if request.alignment_of(b) > 1:
            return b.id, _with_offset(plan, b.id, placed[b.id].offset + 1)
    return None


def reverse_threads(data: dict[str, Any], ident: str) -> dict[str, Any]:
    """The request with the buffer's thread mapping reversed: thread t takes thread
    (block - 1 - t)'s elements, so the same elements now belong to other threads."""
    out = copy.deepcopy(data)
    block = out["block"][0]
    for buf in out["buffers"]:
        if buf["id"] != ident:
            continue
        for acc in buf["accesses"]:
            index = acc.get("index") or {}
            coeff = index.get("threadIdx.x", 0)
            if coeff:
                index["threadIdx.x"] = -coeff
                acc["offset"] = acc.get("offset", 0) + coeff * (block - 1)
    return out


def check_faults(data: dict[str, Any]) -> int:
    """Plan ``data``, plant every fault that applies, and return how many were planted."""
    request = parse_request(data)
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    for option in [*plan.pareto]:
        assert validate_plan(request, option.plan).valid
    planted = 0
    for point in plan.barriers.inserted:
        codes = _codes(request, drop_barrier(plan, point))
        # A barrier that orders an mbarrier's inval before the buffer taking its bytes leaves
        # that inval unordered: missing_inval.
        assert "missing_barrier" in codes or (plan.invals and "missing_inval" in codes), point
        planted += 1
    slid = slide_over(request, plan)
    if slid is not None:
        assert "overlap" in _codes(request, slid[1]), slid[0]
        planted += 1
    for earlier, later in plan.aliases:
        for ident in (earlier, later):
            broken = parse_request(reverse_threads(data, ident))
            assert "bad_alias" in _codes(broken, plan), (earlier, later, ident)
            planted += 1
    moved = misalign(request, plan)
    if moved is not None:
        assert "misaligned" in _codes(request, moved[1]), moved[0]
        planted += 1
    return planted


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_faults_on_examples(path: Path) -> None:
    data = json.loads(path.read_text())
    assert check_faults(data) >= 1
    if data.get("options", {}).get("sync") != "insert":
        data = {**data, "options": {**data.get("options", {}), "sync": "insert"}}
        check_faults(data)


def test_every_kind_of_fault_is_planted_somewhere() -> None:
    alias = json.loads((EXAMPLES / "nvfuser_inner_alias.json").read_text())
    request = parse_request(alias)
    plan = planner.plan(request)
    assert plan.aliases
    matmul = json.loads((EXAMPLES / "nvfuser_matmul_epilogue.json").read_text())
    assert planner.plan(matmul).barriers.inserted
    # Each helper above must change the verdict on these plans.
    assert check_faults(alias) >= 3
    assert check_faults(matmul) >= 3


@settings(max_examples=40, deadline=None)
@given(patterned_dicts())
def test_faults_on_random_patterned_requests(data: dict[str, Any]) -> None:
    check_faults(data)
