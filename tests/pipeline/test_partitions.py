"""Warp-specialised partitions: the planner's happens-before order, the static validator and
the emulator against a brute force over every interleaving (docs/design.md,
Warp-specialised partitions)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import planner
from planner.core import partitions
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.core.partitions import pair_orders
from planner.validators.emulator import emulate
from planner.validators.faults import plant_fault
from planner.validators.partition_run import run_partitions
from planner.validators.partitions import check_partitions
from tests.support.interleavings import ordered_pairs
from tests.support.partition_programs import THREE, access, edge, kernel_as_run, programs
from tests.support.paths import ROOT
from tests.support.plans import pairs_on_common_bytes

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]


def _two(syncs: list[dict[str, Any]], sync: str = "existing", **more: Any) -> PlanRequest:
    """A producer writes A then B; the consumer reads each after an arrive/wait."""
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
                    "accesses": [access("write", 1, "producer"), access("read", 3, "consumer")],
                },
                {
                    "id": "B",
                    "size": 1024,
                    "start": 4,
                    "end": 8,
                    "accesses": [access("write", 5, "producer"), access("read", 7, "consumer")],
                },
            ],
            "syncs": syncs,
            "options": {"sync": sync},
            **more,
        }
    )


FULL = edge("full0", 2, "producer", 3, "consumer") + edge("full1", 6, "producer", 7, "consumer")
EMPTY = edge("empty0", 4, "consumer", 5, "producer")


def _checked(req: PlanRequest) -> Plan:
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    return plan


def test_arrive_wait_edge_lets_buffers_share() -> None:
    plan = _checked(_two(FULL + EMPTY))
    assert plan.arena_bytes == 1024 == plan.lower_bound
    assert plan.barriers.inserted == []
    assert any(d.code == "reuse_across_partitions" for d in plan.diagnostics)


def test_without_the_empty_edge_the_buffers_stay_apart() -> None:
    plan = _checked(_two(FULL))
    assert plan.arena_bytes == 2048 == plan.lower_bound


def test_insert_adds_a_block_barrier_where_no_sync_orders_the_reuse() -> None:
    plan = _checked(_two(FULL, "insert"))
    assert (plan.arena_bytes, plan.barriers.inserted) == (1024, [5])


def test_none_lists_the_barrier_it_relies_on() -> None:
    plan = _checked(_two(FULL, "none"))
    assert (plan.barriers.inserted, plan.barriers.required) == ([], [5])


def test_named_barrier_of_both_partitions_orders_the_reuse() -> None:
    named = [{"kind": "named_barrier", "at": 5, "id": 1, "partitions": ["producer", "consumer"]}]
    assert _checked(_two(FULL + named)).arena_bytes == 1024
    alone = [{"kind": "named_barrier", "at": 5, "id": 1, "partitions": ["producer"]}]
    assert _checked(_two(FULL + alone)).arena_bytes == 2048


def test_planted_cross_partition_reuse_without_an_edge_is_caught_by_both() -> None:
    good = _two(FULL + EMPTY)
    plan = _checked(good)
    bad = _two(FULL)  # the same plan, the consumer's arrive/wait to the producer dropped
    static = planner.validate(bad, plan)
    emulated = emulate(bad, plan)
    assert [v.code for v in static.violations] == ["missing_barrier"]
    assert {v.code for v in emulated.violations} == {"race"}


def test_planted_missing_proxy_fence_is_caught_by_both() -> None:
    def req(fence: bool) -> PlanRequest:
        syncs = [
            {"kind": "named_barrier", "at": 3, "id": 1, "partitions": ["producer", "consumer"]},
            {"kind": "wait_group", "at": 5, "group": "bulk", "partition": "producer"},
        ]
        if fence:
            syncs.append({"kind": "fence_proxy_async", "at": 2, "partition": "consumer"})
        return PlanRequest.model_validate(
            {
                "partitions": PARTS,
                "buffers": [
                    {
                        "id": "S",
                        "size": 512,
                        "start": 0,
                        "end": 2,
                        "accesses": [access("write", 1, "consumer")],
                    },
                    {
                        "id": "O",
                        "size": 512,
                        "start": 2,
                        "end": 6,
                        "accesses": [
                            access("write", 2, "consumer"),
                            access("read", 4, "producer", agent="tma"),
                        ],
                    },
                ],
                "syncs": syncs,
            }
        )

    plan = _checked(req(True))
    assert plan.arena_bytes == 512
    bad = req(False)
    assert "missing_fence" in {v.code for v in planner.validate(bad, plan).violations}
    assert "missing_fence" in {v.code for v in emulate(bad, plan).violations}
    existing = bad.model_copy(
        update={"options": bad.options.model_copy(update={"sync": "existing"})}
    )
    assert _checked(existing).arena_bytes == 1024  # only the request's syncs: kept apart
    fixed = _checked(bad)  # sync "insert": the missing fence alone orders the reuse
    assert fixed.arena_bytes == 512
    assert [(f.at, f.partition, f.origin) for f in fixed.fences] == [(2, "consumer", "inserted")]
    assert fixed.barriers.inserted == plan.barriers.inserted == [2]  # the consumer's own
    assert emulate(bad, fixed).valid
    assert not planner.validate(bad, plan).valid  # the same placement without the fence


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        (
            "partitions",
            [{"id": "a", "threads": [0, 128]}, {"id": "a", "threads": [128, 256]}],
            "duplicate_partition",
        ),
        (
            "partitions",
            [{"id": "a", "threads": [0, 128]}, {"id": "b", "threads": [64, 256]}],
            "partitions_overlap",
        ),
        ("partitions", [{"id": "a", "threads": [0, 512]}], "partition_outside_block"),
    ],
)
def test_rejects_bad_partitions(field: str, value: Any, code: str) -> None:
    base = _two(FULL).model_dump(mode="json")
    base[field] = value
    with pytest.raises(ValidationError) as err:
        PlanRequest.model_validate(base)
    assert code in {e["type"] for e in err.value.errors()}


def test_rejects_an_access_without_its_partition() -> None:
    base = _two(FULL).model_dump(mode="json")
    del base["buffers"][0]["accesses"][0]["partition"]
    with pytest.raises(ValidationError, match="missing_partition"):
        PlanRequest.model_validate(base)


def test_rejects_a_partition_in_a_request_without_partitions() -> None:
    base = _two(FULL).model_dump(mode="json")
    del base["partitions"]
    with pytest.raises(ValidationError, match="unknown_partition"):
        PlanRequest.model_validate(base)


def _shared_plan(req: PlanRequest, pair: tuple[int, int]) -> Plan:
    """A plan that puts the pair on common bytes and every other buffer apart."""
    plan = planner.plan(req)
    top = sum(b.size for b in req.buffers)
    placements = [
        p.model_copy(update={"offset": 0 if k in pair else top * (k + 1)})
        for k, p in enumerate(plan.placements)
    ]
    return plan.model_copy(update={"placements": placements})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_planner_and_both_validators_agree_with_every_interleaving(req: PlanRequest) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    truth = ordered_pairs(req)
    planned = {v.ordered for v in pair_orders(req, allow_new=False) if v.ordered is not None}
    bufs = req.buffers
    for x, y in itertools.permutations(range(len(bufs)), 2):
        if bufs[x].end > bufs[y].start:
            continue
        # The brute force orders a generic write before a TMA write only behind a proxy fence.
        expect = (x, y) in truth
        assert ((x, y) in planned) == expect, (x, y)
        plan = _shared_plan(req, (x, y))
        static = [c for c, _, _ in check_partitions(req, plan, sorted(set(req.barriers)))]
        emulated = [c for c, _, _, _ in run_partitions(req, plan, sorted(set(req.barriers)))]
        assert (not static) == expect, (x, y, static)
        assert (not emulated) == expect, (x, y, emulated)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs() | programs(THREE), st.sampled_from(["insert", "none"]))
def test_inserted_syncs_order_every_shared_pair_in_every_interleaving(
    req: PlanRequest, sync: str
) -> None:
    req = req.model_copy(update={"options": req.options.model_copy(update={"sync": sync})})
    note(req.model_dump_json(exclude_defaults=True))
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    # The kernel as it runs: the request's syncs and barriers, and those the plan adds.
    kernel = kernel_as_run(req, plan)
    truth = ordered_pairs(kernel)
    bufs = req.buffers
    for i, j in pairs_on_common_bytes(plan):
        x, y = (i, j) if bufs[i].end <= bufs[j].start else (j, i)
        assert (x, y) in truth, (bufs[x].id, bufs[y].id)
    new = plan.barriers.required or plan.named_barriers or plan.fences
    if not new:
        return
    # Without what the plan adds, some pair on common bytes is unordered: both say so.
    bare = plan.model_copy(
        update={
            "barriers": plan.barriers.model_copy(update={"inserted": [], "required": []}),
            "named_barriers": [],
            "fences": [],
        }
    )
    assert not planner.validate(req, bare).valid
    assert not emulate(req, bare).valid


def _optimum(req: PlanRequest, apart: set[tuple[int, int]]) -> int:
    """The smallest arena over every placement at offsets that are sums of sizes."""
    sizes = [b.size for b in req.buffers]
    offsets = sorted({sum(c) for k in range(len(sizes)) for c in itertools.combinations(sizes, k)})
    best = sum(sizes)
    for where in itertools.product(offsets, repeat=len(sizes)):
        if all(
            where[i] + sizes[i] <= where[j] or where[j] + sizes[j] <= where[i] for i, j in apart
        ):
            best = min(best, max(w + s for w, s in zip(where, sizes, strict=True)))
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_lower_bound_never_exceeds_the_brute_force_optimum(req: PlanRequest) -> None:
    bufs = req.buffers
    truth = ordered_pairs(req)  # a generic write before a TMA write: behind a proxy fence only
    n = len(bufs)
    apart = {
        (i, j)
        for i, j in itertools.combinations(range(n), 2)
        if (i, j) not in truth and (j, i) not in truth
    }
    best = _optimum(req, apart)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert plan.lower_bound <= best <= plan.arena_bytes
    assert plan.arena_bytes == best  # three buffers: the exact search closes any gap


# The field example: a warp-specialised attention forward in the FlashAttention-3 style.

FA3 = ROOT / "examples" / "fa3_attention_forward.json"
FA3_HOSTILE = ROOT / "examples" / "fa3_attention_forward_hostile.json"
TILE = 128 * 128 * 2  # bytes: a 128x128 bf16 tile
# FA3's shared storage (hopper/kernel_traits.h, SharedStorageQKVO): Q, the K stages, V's
# stages in a union with O, then the pipelines' mbarriers (here 256 bytes).
HAND_LAYOUT = TILE + 2 * TILE + max(2 * TILE, TILE) + 256


def test_fa3_plans_within_the_hand_layout_on_its_own_syncs() -> None:
    req = parse_request(FA3.read_text())
    plan = _checked(req)
    assert plan.arena_bytes == plan.lower_bound == HAND_LAYOUT == 164096
    assert plan.naive_bytes == 6 * TILE + 256
    assert plan.barriers.inserted == plan.barriers.required == []
    kinds = Counter(s.kind for s in req.syncs)
    assert kinds["named_barrier"] == 5  # 3 scheduler barriers, the epilogue's, the store's
    assert kinds["mbarrier_wait"] == 16
    assert kinds["mbarrier_arrive"] == 12
    shared = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert shared == [
        "O reuses bytes of Q, ordered by the request's syncs (barriers, named barriers, "
        "mbarrier arrive/wait, fences)"
    ]


def test_fa3_hostile_variant_is_fixed_by_a_named_barrier_or_kept_apart() -> None:
    req = parse_request(FA3_HOSTILE.read_text())
    plan = _checked(req)  # sync "insert": the scheduler and epilogue barriers are gone
    assert plan.arena_bytes == HAND_LAYOUT
    # O's writes by both consumers after Q's wgmma reads by both: a named barrier of the two
    # consumer warp groups (bar.sync 1, 256), not a block barrier that stalls the producer.
    assert plan.barriers.inserted == []
    assert [(b.at, b.id, b.partitions, b.threads) for b in plan.named_barriers] == [
        (26, 1, ["consumer0", "consumer1"], 256)
    ]
    assert emulate(req, plan).valid
    dropped = plan.model_copy(update={"named_barriers": []})
    assert [v.code for v in planner.validate(req, dropped).violations] == ["missing_barrier"]
    assert {v.code for v in emulate(req, dropped).violations} == {"race"}
    fault = plant_fault(req, plan, "drop_partition_sync", np.random.default_rng(0))
    assert fault is not None
    assert "named barrier 1 at 26" in fault.description
    assert not planner.validate(fault.request, fault.plan).valid
    assert not emulate(fault.request, fault.plan).valid
    existing = req.model_copy(
        update={"options": req.options.model_copy(update={"sync": "existing"})}
    )
    assert _checked(existing).arena_bytes == 6 * TILE + 256  # nothing orders O after Q or V


def test_fa3_hand_layout_without_its_barriers_is_refused() -> None:
    body = json.loads(FA3_HOSTILE.read_text())
    body["options"] = {"sync": "existing"}
    offsets = {"Q": 0, "K0": TILE, "K1": 2 * TILE, "V0": 3 * TILE, "V1": 4 * TILE, "O": 3 * TILE}
    for b in body["buffers"]:
        b["offset"] = offsets.get(b["id"], 5 * TILE)
    with pytest.raises(RequestError) as err:
        planner.plan(parse_request(body))
    assert err.value.errors[0]["type"] == "pinned_conflict"
    assert "no synchronisation orders them" in err.value.errors[0]["msg"]
    good = json.loads(FA3.read_text())
    for b in good["buffers"]:
        b["offset"] = offsets.get(b["id"], 5 * TILE)
    assert _checked(parse_request(good)).arena_bytes == HAND_LAYOUT  # the hand layout is safe


def test_selftest_fault_drops_the_arrive_of_a_cross_partition_reuse() -> None:
    req = _two(FULL + EMPTY)
    plan = _checked(req)
    fault = plant_fault(req, plan, "drop_partition_sync", np.random.default_rng(0))
    assert fault is not None
    assert fault.buffers == ("A", "B")
    assert "mbarrier_arrive at 4" in fault.description
    assert not planner.validate(fault.request, fault.plan).valid
    assert not emulate(fault.request, fault.plan).valid
    # Faults built on the block-wide program order have no place in a partitioned request.
    assert plant_fault(req, plan, "drop_barrier", np.random.default_rng(0)) is None


def test_the_brute_force_tells_a_rule_left_out_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the arrive/wait edges the planner's order disagrees with the brute force on
    the producer/consumer hand-over: the agreement test can fail."""
    req = _two(FULL + EMPTY)
    assert (0, 1) in ordered_pairs(req)
    assert any(v.ordered == (0, 1) for v in pair_orders(req, allow_new=False))
    real = partitions.order_of

    def without_arrives(r: PlanRequest) -> partitions.Order:
        return dataclasses.replace(real(r), arrives={})

    monkeypatch.setattr(partitions, "order_of", without_arrives)
    assert not any(v.ordered == (0, 1) for v in pair_orders(req, allow_new=False))


def test_rejects_ring_copies_in_a_partitioned_request() -> None:
    base = _two(FULL).model_dump(mode="json")
    base["buffers"][0]["copies"] = {"min": 2, "max": 3}
    base["buffers"][0]["accesses"] = []  # a ring's slots take no access patterns
    with pytest.raises(ValidationError, match="copies_with_partitions"):
        PlanRequest.model_validate(base)


def test_a_partitioned_request_without_buffers_plans_an_empty_arena() -> None:
    req = PlanRequest.model_validate({"buffers": [], "partitions": [PARTS[0]]})
    plan = _checked(req)
    assert (plan.status, plan.arena_bytes, plan.lower_bound) == ("optimal", 0, 0)


def _write(at: int, part: str) -> dict[str, Any]:
    return access("write", at, part)


def _one_point(first: list[str], second: list[str], sync: str = "existing") -> PlanRequest:
    """The producer writes A at 2, consumer1 writes B at 3; at 3 two named barriers, listed
    in this order, each of two partitions (consumer0 in both)."""
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": "producer", "threads": [0, 128]},
                {"id": "consumer0", "threads": [128, 256]},
                {"id": "consumer1", "threads": [256, 384]},
            ],
            "block": [384],
            "buffers": [
                {"id": "A", "size": 128, "start": 2, "end": 3, "accesses": [_write(2, "producer")]},
                {
                    "id": "B",
                    "size": 128,
                    "start": 3,
                    "end": 8,
                    "accesses": [_write(3, "consumer1")],
                },
            ],
            "syncs": [
                {"kind": "named_barrier", "at": 3, "id": 1, "partitions": first},
                {"kind": "named_barrier", "at": 3, "id": 2, "partitions": second},
            ],
            "options": {"sync": sync},
        }
    )


def test_barriers_at_one_point_run_in_the_listed_order_and_carry_only_forward() -> None:
    # consumer0 meets the producer first, then consumer1: A's write reaches consumer1.
    early = _one_point(["producer", "consumer0"], ["consumer0", "consumer1"])
    shared = planner.plan(early)
    assert planner.validate(early, shared).valid
    assert emulate(early, shared).valid
    assert pairs_on_common_bytes(shared) == [(0, 1)]
    assert (0, 1) in ordered_pairs(kernel_as_run(early, shared))
    # Listed the other way round, consumer0 meets consumer1 before it has seen A's write:
    # nothing orders it before B's, so they keep apart.
    late = _one_point(["consumer0", "consumer1"], ["producer", "consumer0"])
    apart = planner.plan(late)
    assert planner.validate(late, apart).valid
    assert emulate(late, apart).valid
    assert not pairs_on_common_bytes(apart)
    assert apart.arena_bytes == 256
    # The shared plan is a race there, for both validators and every interleaving.
    assert (0, 1) not in ordered_pairs(kernel_as_run(late, shared))
    assert "race" in {v.code for v in emulate(late, shared).violations}
    assert {v.code for v in planner.validate(late, shared).violations} == {"missing_barrier"}
    # Asked to insert, the plan shares through a barrier of its own that the brute force
    # confirms.
    inserted = _one_point(["consumer0", "consumer1"], ["producer", "consumer0"], "insert")
    plan = planner.plan(inserted)
    assert planner.validate(inserted, plan).valid
    assert emulate(inserted, plan).valid
    assert plan.arena_bytes == 128
    assert plan.named_barriers
    assert (0, 1) in ordered_pairs(kernel_as_run(inserted, plan))
