"""mbarrier invals in a request with partitions (docs/design.md, mbarriers and
Warp-specialised partitions): the inval the planner relies on, both validators and the
self-test's fault against a brute force over every interleaving."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import planner
from planner.core.io import parse_request
from planner.core.models import Inval, Options, Plan, PlanRequest
from planner.core.partitions import mbarrier_invals, order_of
from planner.emit.cuda import emit_cuda
from planner.validators.emulator import emulate
from planner.validators.faults import plant, plant_fault
from planner.validators.partition_run import run_partitions
from planner.validators.partitions import check_partitions
from tests.support.interleavings import ordered_pairs
from tests.support.mbarrier_truth import as_buffers, inval_truth, touches
from tests.support.partition_programs import THREE, access, drawn_orders, edge, kernel_as_run
from tests.support.paths import ROOT

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]
MBARRIERS = ("full0", "empty0", "full1")


def _pipeline(
    sync: str, invals: Sequence[dict[str, Any]] = (), barriers: Sequence[int] = (8,)
) -> PlanRequest:
    """A two-stage producer/consumer hand-over on three mbarriers, a block barrier at the end
    of the main loop, then an epilogue buffer ``E`` that may take the mbarriers' bytes."""
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "block": [256],
            "barriers": list(barriers),
            "buffers": [
                {
                    "id": "A",
                    "size": 1024,
                    "start": 0,
                    "end": 4,
                    "accesses": [access("write", 1, "producer"), access("read", 3, "consumer")],
                },
                {
                    "id": "B",
                    "size": 1024,
                    "start": 4,
                    "end": 8,
                    "accesses": [access("write", 5, "producer"), access("read", 7, "consumer")],
                },
                *(
                    {"id": m, "kind": "mbarrier", "size": 8, "start": 0, "end": 9}
                    for m in MBARRIERS
                ),
                {
                    "id": "E",
                    "size": 1048,
                    "start": 9,
                    "end": 12,
                    "accesses": [access("write", 9, "consumer"), access("read", 11, "consumer")],
                },
            ],
            "syncs": [
                *edge("full0", 2, "producer", 3, "consumer"),
                *edge("empty0", 4, "consumer", 5, "producer"),
                *edge("full1", 6, "producer", 7, "consumer"),
                *invals,
            ],
            "options": {"sync": sync},
        }
    )


def _checked(req: PlanRequest) -> Plan:
    plan = planner.plan(req)  # the static check runs inside
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    return plan


def _missing_inval(req: PlanRequest, plan: Plan) -> tuple[bool, bool]:
    """Whether the static check, and the emulator, report ``missing_inval``."""
    static = {v.code for v in planner.validate(req, plan).violations}
    emulated = {v.code for v in emulate(req, plan).violations}
    return "missing_inval" in static, "missing_inval" in emulated


def test_without_an_inval_the_mbarriers_keep_their_bytes() -> None:
    plan = _checked(_pipeline("existing"))
    assert plan.arena_bytes == 1072  # E (1048) over A and B, the three mbarriers beside it
    assert plan.invals == []


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_an_inval_after_the_last_barrier_gives_the_mbarriers_bytes_to_the_epilogue(
    sync: str,
) -> None:
    plan = _checked(_pipeline(sync))
    assert plan.arena_bytes == 1048 == plan.lower_bound  # 24 bytes fewer than under existing
    origin = "inserted" if sync == "insert" else "required"
    # full0: the consumer's wait on full1 at 7 follows the producer's arrive on full0 (through
    # its arrive on full1) and the consumer's own wait at 3 (through the empty0 round trip).
    # empty0, full1: only the block barrier at 8 orders the last operations into a partition
    # (the earliest point, then the first partition). A barrier after them orders E's first
    # access.
    assert plan.invals == [
        Inval(mbarrier="full0", at=7, origin=origin, partition="consumer"),
        Inval(mbarrier="empty0", at=8, origin=origin, partition="producer"),
        Inval(mbarrier="full1", at=8, origin=origin, partition="producer"),
    ]
    assert plan.barriers.required == [9]
    assert plan.barriers.inserted == ([9] if sync == "insert" else [])
    assert plan.model_dump(mode="json")["invals"][0]["partition"] == "consumer"
    said = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    told = (
        f"E reuses bytes of full0, ordered by the mbarrier_inval by consumer at point 7 ({origin})"
    )
    assert any(m.startswith(told) for m in said)
    snippet = emit_cuda(_pipeline(sync), plan)
    assert "mbarrier.inval full0  // " in snippet
    assert 'partition "consumer"' in snippet.split("mbarrier.inval full0")[1].splitlines()[0]


def test_plans_without_partitions_leave_the_partition_out() -> None:
    assert "partition" not in Inval(mbarrier="m", at=3, origin="inserted").model_dump_json()


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_both_validators_reject_the_plan_with_an_inval_dropped(sync: str) -> None:
    req = _pipeline(sync)
    plan = _checked(req)
    for v in plan.invals:
        kept = plan.model_copy(update={"invals": [x for x in plan.invals if x != v]})
        assert _missing_inval(req, kept) == (True, True), v
        # An inval by no partition runs nowhere: the same.
        anyone = v.model_copy(update={"partition": None})
        unnamed = plan.model_copy(update={"invals": [anyone if x == v else x for x in plan.invals]})
        assert _missing_inval(req, unnamed) == (True, True), v
    faulty = plant(req, plan, "drop_inval", np.random.default_rng(0))
    assert faulty is not None
    assert len(faulty.invals) == len(plan.invals) - 1
    assert _missing_inval(req, faulty) == (True, True)


def test_an_inval_not_ordered_before_the_next_user_is_refused_by_both() -> None:
    req = _pipeline("insert")
    plan = _checked(req)
    # Without the barrier after the invals the consumer may write E while the producer's
    # threads still invalidate.
    bare = plan.model_copy(
        update={"barriers": plan.barriers.model_copy(update={"inserted": [], "required": []})}
    )
    assert _missing_inval(req, bare) == (True, True)


def _own_invals(by: str, at: int) -> list[dict[str, Any]]:
    return [{"kind": "mbarrier_inval", "at": at, "mbarrier": m, "partition": by} for m in MBARRIERS]


def test_the_requests_own_invals_count_under_existing() -> None:
    req = _pipeline("existing", _own_invals("consumer", 8), barriers=[8, 9])
    plan = _checked(req)
    assert plan.arena_bytes == 1048
    assert {(v.origin, v.partition, v.at) for v in plan.invals} == {("existing", "consumer", 8)}
    fault = plant_fault(req, plan, "drop_inval", np.random.default_rng(0))
    assert fault is not None
    assert fault.request is not req
    assert fault.buffers[0] in MBARRIERS
    assert fault.buffers[1] == "E"
    assert _missing_inval(fault.request, fault.plan) == (True, True)


def test_an_inval_before_another_partitions_last_operation_does_not_count() -> None:
    # The consumer invalidates at 6, unordered with the producer's arrive on full1 at 6.
    req = _pipeline("existing", _own_invals("consumer", 6), barriers=[8, 9])
    invals = mbarrier_invals(req, order_of(req))
    names = [b.id for b in req.buffers]
    assert sorted(names[i] for i in invals) == []
    assert _checked(req).arena_bytes == 1072


# Random programs: one mbarrier M, then a buffer B that may take its bytes.

HORIZON = 8


@st.composite
def _mbarrier_programs(draw: st.DrawFn) -> tuple[PlanRequest, tuple[int, int] | None]:
    """A request with mbarrier ``M`` (lifetime [0, c)) and buffer ``B`` ([c, 8)), random
    operations on ``M`` and random syncs; and a candidate inval (partition, point) for the
    plan, or None."""
    names = draw(st.sampled_from([("producer", "consumer"), THREE]))
    cut = draw(st.integers(4, HORIZON - 2))
    syncs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["edge", "expect_tx", "mbarrier_wait"]))
        at = draw(st.integers(1, cut - 2))
        by = draw(st.sampled_from(names))
        if kind == "edge" and at + 1 < cut - 1:
            wait = draw(st.integers(at + 1, cut - 2))
            syncs += edge("M", at, by, wait, draw(st.sampled_from(names)))
        else:
            name = "expect_tx" if kind == "edge" else kind
            syncs.append({"kind": name, "at": at, "mbarrier": "M", "partition": by})
    if draw(st.booleans()):
        at = draw(st.integers(1, cut - 1))
        by = draw(st.sampled_from(names))
        syncs.append({"kind": "mbarrier_inval", "at": at, "mbarrier": "M", "partition": by})
    syncs += drawn_orders(draw, names, HORIZON)
    accesses = []
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(["write", "read"]))
        at = draw(st.integers(cut, HORIZON - 1))
        accesses.append(access(op, at, draw(st.sampled_from(names))))
    # Often a block barrier after the init (as kernels have) and after the mbarrier's last
    # operation, and others around the hand-over.
    barriers = sorted(
        {
            *([1] if draw(st.integers(0, 3)) else []),
            *([cut - 1] if draw(st.booleans()) else []),
            *draw(st.lists(st.integers(cut - 1, cut + 1), max_size=2)),
            *draw(st.lists(st.integers(1, HORIZON - 1), max_size=1)),
        }
    )
    req = PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "barriers": barriers,
            "buffers": [
                {"id": "M", "kind": "mbarrier", "size": 8, "start": 0, "end": cut},
                {"id": "B", "size": 64, "start": cut, "end": HORIZON, "accesses": accesses},
            ],
            "syncs": syncs,
            "options": {"sync": draw(st.sampled_from(["existing", "insert", "none"]))},
        }
    )
    # The plan's inval: none, one at a random point, or where the planner would insert one.
    candidate = None
    how = draw(st.sampled_from(["none", "random", "planner"]))
    found = mbarrier_invals(
        req.model_copy(update={"options": Options(sync="insert")}), order_of(req)
    )
    if how == "planner" and 0 in found and found[0][2] == "inserted":
        candidate = found[0][:2]
    elif how != "none":
        candidate = (draw(st.integers(0, len(names) - 1)), draw(st.integers(1, cut - 1)))
    return req, candidate


def _on_common_bytes(req: PlanRequest, plan_inval: tuple[int, int] | None) -> Plan:
    """The request's plan with M and B at offset 0 and the candidate inval listed."""
    plan = planner.plan(req)
    placements = [p.model_copy(update={"offset": 0}) for p in plan.placements]
    names = [p.id for p in req.partitions]
    invals = []
    if plan_inval is not None:
        q, at = plan_inval
        invals = [Inval(mbarrier="M", at=at, origin="inserted", partition=names[q])]
    return plan.model_copy(update={"placements": placements, "invals": invals})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mbarrier_programs())
def test_both_validators_agree_with_every_interleaving(
    drawn: tuple[PlanRequest, tuple[int, int] | None],
) -> None:
    req, candidate = drawn
    note(req.model_dump_json(exclude_defaults=True))
    note(f"plan inval: {candidate}")
    truth = inval_truth(req, candidate)
    plan = _on_common_bytes(req, candidate)
    barriers = sorted(set(req.barriers))
    static = {c for c, _, _ in check_partitions(req, plan, barriers)}
    emulated = {c for c, _, _, _ in run_partitions(req, plan, barriers)}
    assert (not static) == truth, static
    assert (not emulated) == truth, emulated
    if not truth:
        assert "missing_inval" in static or "missing_barrier" in static
        assert "missing_inval" in emulated or "race" in emulated


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mbarrier_programs())
def test_the_planners_inval_follows_every_operation_in_every_interleaving(
    drawn: tuple[PlanRequest, tuple[int, int] | None],
) -> None:
    req, _ = drawn
    note(req.model_dump_json(exclude_defaults=True))
    invals = mbarrier_invals(req, order_of(req))
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    m = req.buffers[0]
    names = [p.id for p in req.partitions]
    others = [t for t in touches(req, None) if not t[3]]

    def follows(q: int, at: int) -> bool:
        """Whether every other operation on M comes before an inval by partition ``q`` at
        ``at`` in every interleaving."""
        inval = {"id": "inval", "size": 4, "start": at, "end": HORIZON}  # every sync in range
        inval["accesses"] = [access("write", at, names[q])]
        pairs = ordered_pairs(as_buffers(req, others, [inval]))
        return all((k, len(others)) in pairs for k in range(len(others)))

    own = sorted(
        (s.at, names.index(s.partition or ""))
        for s in req.syncs
        if s.kind == "mbarrier_inval" and m.start < s.at < m.end
    )
    q, at, origin = invals.get(0, (0, m.end, "existing"))
    if origin == "existing":
        # The request's earliest inval that qualifies, or none: every earlier one does not.
        assert all(not follows(r, p) for p, r in own if (p, r) < (at, q))
        if 0 not in invals:
            if req.options.sync != "existing":  # no point of any partition qualifies
                assert not any(follows(r, m.end - 1) for r in range(len(names)))
            assert plan.invals == []
            return
    else:
        assert origin == {"insert": "inserted", "none": "required"}[req.options.sync]
        # No partition qualifies at an earlier point (a later point of one that does does).
        assert all(not follows(r, at - 1) for r in range(len(names)) if at - 1 > m.start)
    assert m.start < at < m.end
    assert follows(q, at)
    if plan.invals:
        assert plan.invals == [Inval(mbarrier="M", at=at, origin=origin, partition=names[q])]
        # The kernel as it runs (the syncs the plan adds too) lets B take M's bytes.
        kernel = kernel_as_run(req, plan)
        assert inval_truth(kernel, None if origin == "existing" else (q, at))
        if origin != "existing":
            dropped = plan.model_copy(update={"invals": []})
            assert _missing_inval(req, dropped) == (True, True)


@pytest.mark.parametrize(
    "name",
    ["fa3_attention_forward", "fa3_attention_forward_hostile", "ws_cluster_multicast_gemm"],
)
@pytest.mark.parametrize("sync", ["existing", "insert", "none"])
def test_field_examples_plan_and_validate(name: str, sync: str) -> None:
    request = parse_request((ROOT / "examples" / f"{name}.json").read_text())
    request = request.model_copy(
        update={"options": request.options.model_copy(update={"sync": sync})}
    )
    plan = _checked(request)
    # FA3 keeps its mbarriers outside the plan (one 256-byte block); the cluster GEMM's
    # producer ends on an expect_tx that no release of its own follows: no inval anywhere.
    assert plan.invals == []
    assert mbarrier_invals(request, order_of(request)) == {}
