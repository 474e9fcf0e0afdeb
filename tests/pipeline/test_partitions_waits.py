"""Waits inside warp-specialised partitions (docs/design.md, Asynchronous accesses and
Warp-specialised partitions): under sync "insert" and "none" an asynchronous access that no
wait of its own partition completes gets a ``wait_group`` run by the partition that issued it;
a reuse across partitions is ordered from that partition's next release after the wait; both
validators take the plan's waits as part of the kernel and reject the plan without them, and
agree with a brute force over every interleaving."""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import NamedBarrier, Plan, PlanRequest, Wait
from planner.emit.cuda import emit_cuda
from planner.emit.mlir import emit_mlir
from planner.pipeline import partitioned
from planner.selftest import CORRECT, Subject, run_selftest, validators
from planner.validators.emulator import emulate
from planner.validators.faults import plant, plant_fault
from planner.validators.partition_run import run_partitions
from planner.validators.partitions import check_partitions
from planner.validators.program import with_plan_syncs
from tests.support.interleavings import ordered_pairs, unfinished
from tests.support.partition_programs import THREE, access, edge, kernel_as_run
from tests.support.partition_waits import AGENTS, wait_programs
from tests.support.paths import ROOT

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]


def _copy_then_reuse(
    sync: str, group: str = "cp.async", syncs: list[dict[str, Any]] | None = None, **more: Any
) -> PlanRequest:
    """The producer issues an asynchronous access of ``group`` to ``A`` at 1 and hands ``A``
    to the consumer through an arrive/wait (2 -> 3); then the consumer's ``B`` may take
    ``A``'s bytes. No wait_group in the request."""
    agent, op = AGENTS[group]
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "block": [256],
            "buffers": [
                {
                    "id": "A",
                    "size": 1024,
                    "start": 0,
                    "end": 4,
                    "accesses": [
                        access(op, 1, "producer", agent=agent),
                        access("read", 3, "consumer"),
                    ],
                },
                {
                    "id": "B",
                    "size": 1024,
                    "start": 4,
                    "end": 8,
                    "accesses": [access("write", 5, "consumer"), access("read", 7, "consumer")],
                },
            ],
            "syncs": [*edge("full", 2, "producer", 3, "consumer"), *(syncs or [])],
            "options": {"sync": sync, **more},
        }
    )


def _checked(req: PlanRequest) -> Plan:
    plan = planner.plan(req)  # the static check runs inside
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    return plan


def _codes(req: PlanRequest, plan: Plan) -> tuple[set[str], set[str]]:
    static: set[str] = {v.code for v in planner.validate(req, plan).violations}
    return static, {v.code for v in emulate(req, plan).violations}


@pytest.mark.parametrize("group", list(AGENTS))
@pytest.mark.parametrize(("sync", "origin"), [("insert", "inserted"), ("none", "required")])
def test_an_uncovered_access_gets_a_wait_of_the_issuing_partition(
    group: str, sync: str, origin: str
) -> None:
    plan = _checked(_copy_then_reuse(sync, group))
    assert [(w.kind, w.at, w.origin, w.partition) for w in plan.waits] == [
        (group, 2, origin, "producer")
    ]
    assert plan.arena_bytes == 1024  # B takes A's bytes
    assert plan.model_dump(mode="json")["waits"][0]["partition"] == "producer"


def test_under_existing_the_request_gives_its_waits() -> None:
    with pytest.raises(ValueError, match="uncovered_async_access"):
        _copy_then_reuse("existing")
    own = [{"kind": "wait_group", "at": 2, "group": "cp.async", "partition": "producer"}]
    plan = _checked(_copy_then_reuse("existing", syncs=own))
    assert plan.waits == []
    # Nothing orders the consumer's read of A before its own other threads' writes of B.
    assert plan.arena_bytes == 2048


def test_a_wait_of_another_partition_covers_nothing() -> None:
    other = [{"kind": "wait_group", "at": 2, "group": "cp.async", "partition": "consumer"}]
    plan = _checked(_copy_then_reuse("insert", syncs=other))
    assert [(w.at, w.partition) for w in plan.waits] == [(2, "producer")]


def test_plans_without_partitions_leave_the_partition_out() -> None:
    assert "partition" not in Wait(kind="bulk", at=3, origin="inserted").model_dump_json()


def test_issues_of_one_partition_at_one_point_share_one_wait() -> None:
    data = _copy_then_reuse("insert").model_dump(mode="json", exclude_defaults=True)
    data["buffers"].append(
        {
            "id": "C",
            "size": 512,
            "start": 0,
            "end": 6,
            "accesses": [access("write", 1, "producer", agent="cp.async")],
        }
    )
    data["buffers"].append(
        {
            "id": "D",
            "size": 512,
            "start": 0,
            "end": 6,
            "accesses": [access("write", 1, "consumer", agent="cp.async")],
        }
    )
    plan = _checked(PlanRequest.model_validate(data))
    assert [(w.kind, w.at, w.partition) for w in plan.waits] == [
        ("cp.async", 2, "consumer"),
        ("cp.async", 2, "producer"),
    ]


def _lone_copy(names: tuple[str, ...], **options: Any) -> PlanRequest:
    """``A`` filled by the producer's cp.async at 1, nothing else; then the first consumer's
    ``B`` from 4. No sync between the partitions: a barrier must order the reuse."""
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "barriers": [1],
            "buffers": [
                {
                    "id": "A",
                    "size": 1024,
                    "start": 0,
                    "end": 4,
                    "accesses": [access("write", 1, "producer", agent="cp.async")],
                },
                {
                    "id": "B",
                    "size": 1024,
                    "start": 4,
                    "end": 8,
                    "accesses": [access("write", 4, names[1]), access("read", 7, names[1])],
                },
            ],
            "options": {"sync": "insert", **options},
        }
    )


def test_a_reuse_across_partitions_gets_its_barrier_after_the_wait() -> None:
    # The request's barrier at 1 comes before the wait (at 2): it orders nothing of A's copy.
    plan = _checked(_lone_copy(("producer", "consumer"), barrier_candidates=[1, 2, 3]))
    assert [(w.at, w.partition) for w in plan.waits] == [(2, "producer")]
    assert plan.arena_bytes == 1024
    assert plan.barriers.inserted == [3]
    # Only before the wait: no point orders the reuse, B stays apart.
    early = _checked(_lone_copy(("producer", "consumer"), barrier_candidates=[1]))
    assert early.arena_bytes == 2048
    # At the wait's own point the barrier runs after it (waits first).
    at_wait = _checked(_lone_copy(("producer", "consumer"), barrier_candidates=[2]))
    assert (at_wait.arena_bytes, at_wait.barriers.inserted) == (1024, [2])


def test_a_reuse_by_one_of_three_partitions_gets_a_named_barrier_after_the_wait() -> None:
    plan = _checked(_lone_copy(THREE, barrier_candidates=[1, 2]))
    assert [(w.at, w.partition) for w in plan.waits] == [(2, "producer")]
    assert plan.barriers.inserted == []
    assert plan.named_barriers == [
        NamedBarrier(
            at=2, id=1, partitions=["producer", "consumer0"], threads=256, origin="inserted"
        )
    ]


@pytest.mark.parametrize("sync", ["insert", "none"])
@pytest.mark.parametrize("group", list(AGENTS))
def test_both_validators_reject_the_plan_without_its_wait(sync: str, group: str) -> None:
    req = _copy_then_reuse(sync, group)
    plan = _checked(req)
    bad = plant(req, plan, "drop_wait", np.random.default_rng(0))
    assert bad is not None
    assert bad.waits == []
    static, emulated = _codes(req, bad)
    assert "missing_wait" in static
    assert "missing_wait" in emulated
    # Run by the other partition, it covers nothing either.
    moved = [w.model_copy(update={"partition": "consumer"}) for w in plan.waits]
    static, emulated = _codes(req, plan.model_copy(update={"waits": moved}))
    assert "missing_wait" in static
    assert "missing_wait" in emulated


def _with_waits(req: PlanRequest, how: str, data: st.DataObject) -> Plan:
    """The planner's plan with its waits as drawn (its own, none, or random ones) and no
    other sync it adds: the request's syncs and the waits order what they order."""
    plan = planner.plan(req)  # validated inside
    plan = plan.model_copy(
        update={
            "barriers": plan.barriers.model_copy(update={"inserted": [], "required": []}),
            "named_barriers": [],
            "fences": [],
        }
    )
    if how == "planner":
        return plan
    waits: list[Wait] = []
    issued = [(b, a) for b in req.buffers for a in b.accesses if a.agent != "threads"]
    if how == "random" and issued:
        # Each after an issue of its group, mostly inside the buffer's lifetime, by either
        # partition: whether it completes the access is the partition's to decide.
        names = [p.id for p in req.partitions]
        kinds = {agent_op: kind for kind, agent_op in AGENTS.items()}
        for _ in range(data.draw(st.integers(1, 2))):
            b, a = data.draw(st.sampled_from(issued))
            waits.append(
                Wait(
                    kind=kinds[a.agent, a.op],
                    at=data.draw(st.integers(a.at + 1, b.end + 1)),
                    origin="required",
                    partition=data.draw(st.sampled_from(names)),
                )
            )
    return plan.model_copy(update={"waits": waits})


@settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    wait_programs() | wait_programs(THREE),
    st.sampled_from(["planner", "none", "random"]),
    st.data(),
)
def test_both_validators_agree_with_every_interleaving(
    req: PlanRequest, how: str, data: st.DataObject
) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    plan = _with_waits(req, how, data)
    note(f"waits: {plan.waits}")
    kernel = with_plan_syncs(req, plan)
    truth = ordered_pairs(kernel)
    late = unfinished(kernel)
    bufs = req.buffers
    barriers = sorted(set(req.barriers))
    top = sum(b.size for b in bufs)
    for x, y in itertools.permutations(range(len(bufs)), 2):
        if bufs[x].end > bufs[y].start:
            continue
        placements = [
            p.model_copy(update={"offset": 0 if k in (x, y) else top * (k + 1)})
            for k, p in enumerate(plan.placements)
        ]
        shared = plan.model_copy(update={"placements": placements})
        found = check_partitions(req, shared, barriers)
        ran = run_partitions(req, shared, barriers)
        # The buffers left in flight: the same for both validators and the brute force.
        late_ids = {bufs[i].id for i in late}
        assert {b[0] for c, _, b in found if c == "missing_wait"} == late_ids
        assert {b[0] for c, _, b, _ in ran if c == "missing_wait"} == late_ids
        static = {c for c, _, _ in found} - {"missing_wait"}
        emulated = {c for c, _, _, _ in ran} - {"missing_wait"}
        # The brute force orders a generic write before an async-proxy access only behind a
        # proxy fence, as both validators do.
        expect = (x, y) in truth
        assert (not static) == expect, (x, y, static)
        assert (not emulated) == expect, (x, y, emulated)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wait_programs() | wait_programs(THREE), st.sampled_from(["insert", "none"]))
def test_the_planners_waits_complete_every_access_in_every_interleaving(
    req: PlanRequest, sync: str
) -> None:
    req = req.model_copy(update={"options": req.options.model_copy(update={"sync": sync})})
    note(req.model_dump_json(exclude_defaults=True))
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    kernel = kernel_as_run(req, plan)
    assert unfinished(kernel) == set()
    truth = ordered_pairs(kernel)
    bufs = req.buffers
    where = [(p.offset, p.offset + p.size) for p in plan.placements]
    for i, j in itertools.combinations(range(len(bufs)), 2):
        if where[i][0] < where[j][1] and where[j][0] < where[i][1]:
            x, y = (i, j) if bufs[i].end <= bufs[j].start else (j, i)
            assert (x, y) in truth, (bufs[x].id, bufs[y].id)
    names = [p.id for p in req.partitions]
    for w in plan.waits:
        # Each wait is run by a partition that issued an access of its group just before.
        assert w.partition in names
        assert any(
            a.partition == w.partition and a.at < w.at and AGENTS[w.kind] == (a.agent, a.op)
            for b in bufs
            for a in b.accesses
        )
    if plan.waits:
        bare = plan.model_copy(update={"waits": []})
        static, emulated = _codes(req, bare)
        assert "missing_wait" in static
        assert "missing_wait" in emulated


@pytest.mark.parametrize(
    ("group", "cuda", "mlir"),
    [
        ("cp.async", "planner_wait_group<0>();", "@planner_wait_group_0()"),
        ("bulk", "planner_bulk_wait_group_read<0>();", "@planner_bulk_wait_group_read_0()"),
        ("wgmma", "planner_wgmma_wait_group<0>();", "@planner_wgmma_wait_group_0()"),
    ],
)
def test_the_emitters_give_the_wait_to_its_partition(group: str, cuda: str, mlir: str) -> None:
    req = _copy_then_reuse("insert", group)
    plan = _checked(req)
    for text, call in ((emit_cuda(req, plan), cuda), (emit_mlir(req, plan), mlir)):
        line = next(x for x in text.splitlines() if f"point 2: {call}" in x)
        assert line.endswith('inserted by the plan: add it, partition "producer"'), line


WS_WAITS = ROOT / "examples" / "ws_gemm_added_waits.json"


@pytest.mark.parametrize(("sync", "origin"), [("insert", "inserted"), ("none", "required")])
def test_the_shipped_example_relies_on_its_added_waits_and_invals(sync: str, origin: str) -> None:
    data = json.loads(WS_WAITS.read_text())
    data["options"]["sync"] = sync
    req = parse_request(data)
    plan = _checked(req)
    assert (plan.arena_bytes, plan.lower_bound, plan.naive_bytes) == (65552, 65552, 131104)
    where = {p.id: p.offset for p in plan.placements}
    assert where["C_s"] == 0  # over the four stages
    assert where["next_tile"] == min(where["full0"], where["full1"])  # over the mbarriers
    assert [(w.kind, w.at, w.partition, w.origin) for w in plan.waits] == [
        ("wgmma", 4, "consumer", origin),
        ("wgmma", 5, "consumer", origin),
        ("bulk", 10, "consumer", origin),
    ]
    assert [(v.mbarrier, v.at, v.partition, v.origin) for v in plan.invals] == [
        ("full0", 6, "producer", origin),
        ("full1", 6, "producer", origin),
    ]
    assert plan.barriers.required == [7]
    # Under "existing" the request gives its waits: without them it is refused.
    data["options"]["sync"] = "existing"
    with pytest.raises(RequestError) as info:
        parse_request(data)
    assert {e["type"] for e in info.value.errors} == {"uncovered_async_access"}


def test_without_its_invals_the_example_keeps_the_mbarriers_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    req = parse_request(WS_WAITS.read_text())
    monkeypatch.setattr(partitioned, "mbarrier_invals", lambda *_: {})
    plan = planner.plan(req)  # validated inside
    assert (plan.arena_bytes, plan.invals) == (65568, [])


def test_the_selftest_plants_a_partitioned_drop_wait_and_drop_inval_both_validators_catch() -> None:
    req = parse_request(WS_WAITS.read_text())
    plan = _checked(req)
    for kind in ("drop_wait", "drop_inval"):
        fault = plant_fault(req, plan, kind, np.random.default_rng(0))
        assert fault is not None, kind
        code = "missing_wait" if kind == "drop_wait" else "missing_inval"
        static, emulated = _codes(fault.request, fault.plan)
        assert code in static, (kind, static)
        assert code in emulated, (kind, emulated)
    tally = run_selftest(
        [Subject(WS_WAITS.name, req, plan)], validators(), kinds=("drop_wait", "drop_inval")
    )
    assert tally.planted == {CORRECT: 1, "drop_wait": 1, "drop_inval": 1}
    assert not tally.failed
    assert not tally.other_misses
    assert all(tally.caught[k, v] == 1 for k in tally.planted for v in ("static", "emulator"))


def test_a_reuse_note_names_the_added_wait_that_finishes_the_earlier_buffer() -> None:
    """The C tile takes the ring stages' bytes once the consumer's added wgmma waits have
    completed their reads: each reuse note names that wait, the point and the partition."""
    req = parse_request(WS_WAITS.read_text())
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    notes = {
        d.message.split(", ordered by ")[0]: d.message.split(", ordered by ")[1]
        for d in plan.diagnostics
        if d.code == "reuse_across_partitions"
    }
    by_wait = {
        reuse: how
        for reuse, how in notes.items()
        if how.startswith("the wgmma wait_group by consumer at point")
    }
    assert by_wait, notes
    for reuse, how in by_wait.items():
        earlier = reuse.split(" reuses bytes of ")[1]
        point = int(how.split(" at point ")[1].split(" ")[0])
        assert any(w.at == point and w.partition == "consumer" for w in plan.waits), how
        assert any(
            a.agent == "mma" and a.at < point
            for b in req.buffers
            if b.id == earlier
            for a in b.accesses
        ), (reuse, how)
