"""mbarriers as planned objects (docs/design.md, mbarriers): 8 bytes, 8-aligned, initialised
at their start; their bytes go to a later buffer only after an mbarrier_inval that follows
their last operation, which the plan lists (the request's, inserted, or required)."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Inval
from planner.selftest import run_selftest, subjects, validators
from planner.validators.faults import plant, plant_fault
from tests.support.async_requests import codes, planned, refusals
from tests.support.paths import ROOT

EXAMPLE = ROOT / "examples" / "mbarrier_reuse.json"
MB: dict[str, Any] = json.loads(EXAMPLE.read_text())


def _with(sync: str, inval: int | None) -> dict[str, Any]:
    data = copy.deepcopy(MB)
    data["options"]["sync"] = sync
    if inval is not None:
        data["syncs"].append({"kind": "mbarrier_inval", "at": inval, "mbarrier": "full"})
    return data


@pytest.mark.parametrize(
    ("edit", "loc", "kind"),
    [
        ({"size": 16}, ["buffers", 1, "size"], "mbarrier_size"),
        ({"swizzle": "none"}, ["buffers", 1, "swizzle"], "mbarrier_field"),
        (
            {"accesses": [{"op": "read", "at": 1, "bytes": 8, "threads": "all"}]},
            ["buffers", 1, "accesses"],
            "mbarrier_accesses",
        ),
        ({"kind": "barrier"}, ["buffers", 1, "kind"], "literal_error"),
    ],
)
def test_bad_mbarriers_name_the_field(edit: dict[str, Any], loc: list[Any], kind: str) -> None:
    data = copy.deepcopy(MB)
    data["buffers"][1].update(edit)
    errors = refusals(data)
    assert [e["loc"] for e in errors][:1] == [loc]
    assert errors[0]["type"] == kind


def test_a_sync_outside_the_mbarrier_lifetime_is_refused() -> None:
    data = _with("insert", 4)  # the mbarrier lives on [0, 3)
    errors = refusals(data)
    assert errors[0]["loc"] == ["syncs", 2, "at"]
    assert errors[0]["type"] == "sync_outside_mbarrier"


def test_an_mbarrier_is_8_aligned() -> None:
    data = copy.deepcopy(MB)
    del data["buffers"][1]["offset"], data["buffers"][2]["offset"]
    request = parse_request(data)
    assert request.alignment_of(request.buffers[1]) == 8
    data["buffers"][1]["offset"] = 4
    assert refusals(data)[0]["type"] == "misaligned_offset"


def test_the_request_inval_is_relied_on() -> None:
    for sync in ("existing", "insert", "none"):
        _, plan = planned(_with(sync, 2))
        assert plan.invals == [Inval(mbarrier="full", at=2, origin="existing")]


def test_insert_adds_the_inval_and_none_requires_it() -> None:
    _, inserted = planned(_with("insert", None))
    assert inserted.invals == [Inval(mbarrier="full", at=2, origin="inserted")]
    _, required = planned(_with("none", None))
    assert required.invals == [Inval(mbarrier="full", at=2, origin="required")]


def test_existing_without_an_inval_keeps_the_bytes() -> None:
    with pytest.raises(RequestError) as info:
        planner.plan(_with("existing", None))
    assert info.value.errors[0]["type"] == "pinned_conflict"
    data = _with("existing", None)
    del data["buffers"][1]["offset"], data["buffers"][2]["offset"]
    _, plan = planned(data)
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["full"] + 8 <= offsets["flags"] or offsets["flags"] + 8 <= offsets["full"]
    assert plan.invals == []
    assert "invals" not in plan.model_dump_json()


def test_an_inval_before_the_last_wait_frees_nothing() -> None:
    data = _with("insert", 1)
    data["syncs"][1]["at"] = 2  # the wait now follows the inval; no room for one after it
    with pytest.raises(RequestError) as info:
        planner.plan(data)
    error = info.value.errors[0]
    assert error["type"] == "pinned_conflict"
    assert "no mbarrier_inval on 'full' after its last operation at 2" in error["msg"]


def test_both_catch_a_dropped_inval() -> None:
    request, plan = planned(_with("insert", None))
    bad = plan.model_copy(update={"invals": []})
    assert codes(request, bad) == ({"missing_inval"}, {"missing_inval"})


def test_both_catch_a_reuse_without_a_barrier_after_the_inval() -> None:
    data = _with("insert", None)
    _, plan = planned(data)
    unbarred = copy.deepcopy(data)
    unbarred["barriers"] = []
    unbarred["options"]["sync"] = "existing"
    changed = parse_request(unbarred)
    barriers = plan.barriers.model_copy(update={"existing": [], "required": []})
    static, emulated = codes(changed, plan.model_copy(update={"barriers": barriers}))
    assert "missing_barrier" in static
    assert emulated & {"race", "clobbered"}


def test_drop_inval_is_planted_and_caught_by_both() -> None:
    request, plan = planned(_with("insert", None))
    assert plant(request, plan, "drop_inval", np.random.default_rng(0)) is not None
    request, plan = planned(_with("insert", 2))
    assert plant(request, plan, "drop_inval", np.random.default_rng(0)) is None  # the request's
    fault = plant_fault(request, plan, "drop_inval", np.random.default_rng(0))
    assert fault is not None
    assert codes(fault.request, fault.plan) == ({"missing_inval"}, {"missing_inval"})


def test_selftest_plants_drop_inval_in_the_example() -> None:
    cases = [s for s in subjects(0, seed=0) if s.name == EXAMPLE.name]
    tally = run_selftest(cases * 4, validators(), seed=3, kinds=["drop_inval"])
    assert tally.planted["drop_inval"] == 4
    assert tally.caught["drop_inval", "static"] == 4
    assert tally.caught["drop_inval", "emulator"] == 4


def test_emitters_carry_the_syncs_and_the_inserted_inval() -> None:
    from planner.emit.cuda import emit_cuda
    from planner.emit.mlir import emit_mlir

    request, plan = planned(_with("insert", None))
    for text in (emit_cuda(request, plan), emit_mlir(request, plan)):
        assert "//   point 0: mbarrier.init full" in text
        assert "//   point 1: mbarrier.try_wait (until the phase completes) full" in text
        assert "//   point 2: mbarrier.inval full  // inserted by the plan: add it" in text
