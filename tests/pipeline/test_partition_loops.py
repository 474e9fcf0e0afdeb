"""Loops and branches inside warp-specialised partitions (docs/design.md, Warp-specialised
partitions, Loops and branches): the planner's fold over paths, the static validator and the
emulator against the brute force over interleavings run on every path."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import planner
from planner.core.errors import RequestError
from planner.core.models import Barriers, Plan, PlanRequest
from planner.core.partition_paths import partition_paths
from planner.validators.emulator import emulate
from planner.validators.program import with_plan_syncs
from tests.support.mbarrier_truth import inval_truth
from tests.support.partition_loops import (
    looped_programs,
    path_truth,
    planned_under,
    tile_and_epilogue,
)
from tests.support.partition_programs import THREE, access, edge
from tests.support.paths import ROOT
from tests.support.plans import hand_plan

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]


def _ring(
    empty: bool = True, meet: bool = True, sync: str = "existing", **loop: Any
) -> PlanRequest:
    """A producer writes a tile in each trip of a K loop, the consumer reads it after the
    full arrive/wait and hands the slot back by the empty one; then the consumer's warps meet
    at a named barrier and write an epilogue buffer."""
    syncs = edge("full", 2, "producer", 3, "consumer")
    if meet:
        syncs.append({"kind": "named_barrier", "at": 5, "id": 1, "partitions": ["consumer"]})
    if empty:
        syncs += edge("empty", 4, "consumer", 1, "producer")  # the next trip's wait
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "loops": [{"start": 1, "end": 5, **loop}],
            "buffers": tile_and_epilogue(access("write", 5, "consumer")),
            "syncs": syncs,
            "options": {"sync": sync},
        }
    )


def _barriers(req: PlanRequest) -> Barriers:
    return Barriers(existing=sorted(set(req.barriers)), inserted=[], required=[])


def test_a_ring_slot_freed_by_the_empty_edge_is_planned_and_checked() -> None:
    req = _ring()
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 256  # the epilogue buffer takes the tile's bytes
    assert "too_many_paths" not in {d.code for d in plan.diagnostics}


def test_a_ring_slot_without_the_empty_edge_is_refused_and_caught() -> None:
    req = _ring(empty=False)
    with pytest.raises(RequestError) as err:
        planner.plan(req)
    assert "unprotected_reuse" in str(err.value.errors)
    plan = hand_plan(req, {"tile": 0, "out": 256}, _barriers(req))
    static = planner.validate(req, plan)
    assert {v.code for v in static.violations} == {"missing_barrier"}
    assert static.violations[0].buffers == ["tile", "tile"]
    assert {v.code for v in emulate(req, plan).violations} == {"race"}


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_a_barrier_after_the_loop_lets_the_epilogue_take_the_ring(sync: str) -> None:
    req = _ring(meet=False, sync=sync)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 256
    assert plan.barriers.required == [5]  # after the loop: it runs once
    assert plan.barriers.inserted == ([5] if sync == "insert" else [])
    bare = plan.model_copy(
        update={"barriers": plan.barriers.model_copy(update={"inserted": [], "required": []})}
    )
    assert {v.code for v in planner.validate(req, bare).violations} == {"missing_barrier"}
    assert {v.code for v in emulate(req, bare).violations} == {"race"}


def test_insert_orders_a_ring_slot_without_its_empty_edge_by_a_barrier_in_the_loop() -> None:
    req = _ring(empty=False, sync="insert")
    plan = planner.plan(req)
    assert emulate(req, plan).valid
    assert plan.barriers.inserted == [4]  # every trip, after the consumer's read
    assert plan.barriers.executions == 1000  # unknown trips count 1000


def test_a_barrier_cap_keeps_the_pairs_past_it_apart() -> None:
    base = _ring(empty=False, meet=False).model_dump(mode="json", exclude_defaults=True)
    # The slot's own reuse is served at 1 only; out over the tile at 5 only.
    base["options"] = {"sync": "insert", "max_new_barriers": 1, "barrier_candidates": [1, 5]}
    plan = planner.plan(PlanRequest.model_validate(base))
    assert plan.barriers.inserted == [1]  # the slot's own reuse, every trip
    assert plan.arena_bytes == 512  # out kept apart within the cap
    base["options"]["barrier_candidates"] = [5]  # no point inside the loop
    with pytest.raises(RequestError) as err:
        planner.plan(PlanRequest.model_validate(base))
    assert [e["type"] for e in err.value.errors] == ["unprotected_reuse"]


def test_one_trip_needs_no_empty_edge() -> None:
    req = _ring(empty=False, trips=1)
    plan = planner.plan(req)
    assert emulate(req, plan).valid


def test_a_loop_of_four_trips_is_checked_as_three() -> None:
    req = _ring(trips=4)
    assert [len(p.request.buffers) for p in partition_paths(req)] == [4]  # 3 tiles and out
    assert emulate(req, planner.plan(req)).valid


def test_too_many_paths_is_a_field_error() -> None:
    base = _ring().model_dump(mode="json", exclude_defaults=True)
    base["loops"] = [{"start": k, "end": k + 1} for k in range(1, 5)]  # 4**4 paths
    with pytest.raises(ValidationError) as err:
        PlanRequest.model_validate(base)
    errors = err.value.errors()
    assert [e["type"] for e in errors] == ["too_many_paths"]
    assert errors[0]["loc"] == ("loops",)


def test_a_cluster_with_loops_is_refused() -> None:
    base = _ring().model_dump(mode="json", exclude_defaults=True)
    base["cluster"] = [2]
    base["grid"] = [2]
    with pytest.raises(ValidationError) as err:
        PlanRequest.model_validate(base)
    assert "partitions_control_flow" in {e["type"] for e in err.value.errors()}


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_a_missing_wait_in_the_loop_is_added_at_every_trip(sync: str) -> None:
    """The consumer's wgmma wait of stage 0 left out: the plan adds it right after the
    issue, in the loop body (a wait_group 0 completes every earlier group of its thread,
    those of earlier trips too), and the epilogue still takes the ring's bytes."""
    base = json.loads((ROOT / "examples" / "ws_gemm_k_loop.json").read_text())
    base["syncs"] = [s for s in base["syncs"] if not (s["kind"] == "wait_group" and s["at"] == 3)]
    base.setdefault("options", {})["sync"] = sync
    req = PlanRequest.model_validate(base)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == RING + 256  # as with the request's own wait
    origin = "inserted" if sync == "insert" else "required"
    assert [(w.kind, w.at, w.partition, w.origin) for w in plan.waits] == [
        ("wgmma", 3, "consumer", origin)
    ]
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert any(f"the wgmma wait_group by consumer at point 3 ({origin}), then" in m for m in notes)
    bare = plan.model_copy(update={"waits": []})
    assert "missing_wait" in {v.code for v in planner.validate(req, bare).violations}
    assert "missing_wait" in {v.code for v in emulate(req, bare).violations}


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_an_access_issued_at_the_end_of_the_loop_body_is_still_refused(sync: str) -> None:
    """A wgmma read issued at the last point of the loop body has no later point in its
    scope for a wait: the request gives it or is refused, under every policy."""
    data = _ring(sync=sync).model_dump(mode="json", exclude_defaults=True)
    data["buffers"][0]["accesses"][1] = access("read", 4, "consumer", agent="mma")
    with pytest.raises(ValidationError) as err:
        PlanRequest.model_validate(data)
    assert "uncovered_async_access" in {e["type"] for e in err.value.errors()}


def _stacked(req: PlanRequest, pair: tuple[int, int] | None) -> dict[str, int]:
    """Offsets putting ``pair`` on common bytes and every other buffer apart."""
    top = sum(b.size for b in req.buffers)
    return {
        b.id: 0 if pair is not None and k in pair else top * (k + 1)
        for k, b in enumerate(req.buffers)
    }


def _assert_shared_pairs_ordered(req: PlanRequest, kernel: PlanRequest, plan: Plan) -> None:
    """Every pair of buffers ``plan`` puts on common bytes is ordered on every path of
    ``kernel`` (the request as it runs with the plan's syncs), by the brute force."""
    own, good, _ = path_truth(partition_paths(kernel), len(req.buffers))
    assert own
    where = [(p.offset, p.offset + p.size) for p in plan.placements]
    for i, j in itertools.combinations(range(len(where)), 2):
        if where[i][0] < where[j][1] and where[j][0] < where[i][1]:
            assert (i, j) in good, (i, j)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(looped_programs() | looped_programs(THREE), st.sampled_from(["insert", "none"]))
def test_new_barriers_order_every_shared_pair_on_every_path(req: PlanRequest, sync: str) -> None:
    req, data, plan = planned_under(req, sync)
    if plan is None:
        return
    # The kernel as it runs, with the plan's barriers, named barriers and fences, against
    # the brute force.
    data["barriers"] = sorted({*req.barriers, *plan.barriers.required})
    data["options"]["sync"] = "existing"
    kernel = with_plan_syncs(PlanRequest.model_validate(data), plan)
    _assert_shared_pairs_ordered(req, kernel, plan)
    if plan.barriers.required or plan.named_barriers or plan.fences:
        # Without what the plan adds, some reuse is unordered or unfenced: both say so.
        bare = plan.model_copy(
            update={
                "barriers": plan.barriers.model_copy(update={"inserted": [], "required": []}),
                "named_barriers": [],
                "fences": [],
            }
        )
        assert not planner.validate(req, bare).valid
        assert not emulate(req, bare).valid


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(looped_programs() | looped_programs(THREE))
def test_validators_and_planner_agree_with_every_interleaving_on_every_path(
    req: PlanRequest,
) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    paths = partition_paths(req)
    n = len(req.buffers)
    own, good, live = path_truth(paths, n)
    apart = hand_plan(req, _stacked(req, None), _barriers(req))
    assert planner.validate(req, apart).valid == own
    assert emulate(req, apart).valid == own
    for x, y in itertools.combinations(range(n), 2):
        plan = hand_plan(req, _stacked(req, (x, y)), _barriers(req))
        expect = own and (x, y) in good
        assert planner.validate(req, plan).valid == expect, (x, y)
        if (x, y) not in live:  # the static check alone judges lifetimes
            assert emulate(req, plan).valid == expect, (x, y)
    if not own:
        with pytest.raises(RequestError):
            planner.plan(req)
        return
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    where = [(p.offset, p.offset + p.size) for p in plan.placements]
    for i, j in itertools.combinations(range(n), 2):
        if where[i][0] < where[j][1] and where[j][0] < where[i][1]:
            assert (i, j) in good, (i, j)
    # The lower bound: every plan keeps the pairs the brute force leaves unordered apart.
    sizes = [b.size for b in req.buffers]
    best = min(
        max(o + s for o, s in zip(offs, sizes, strict=True))
        for offs in itertools.product(
            sorted({0, *sizes, sizes[0] + sizes[1], sum(sizes)}), repeat=n
        )
        if all(
            offs[i] + sizes[i] <= offs[j] or offs[j] + sizes[j] <= offs[i]
            for i, j in itertools.combinations(range(n), 2)
            if (i, j) not in good
        )
    )
    assert plan.lower_bound <= best <= plan.arena_bytes
    assert plan.arena_bytes == best


# The field example: a warp-specialised GEMM whose K loop runs a 3-stage TMA ring.

GEMM = ROOT / "examples" / "ws_gemm_k_loop.json"
RING = 6 * 16384  # A and B tiles of three stages, 128x64 and 64x128 bf16
C_TILE = 32768  # the 128x128 bf16 epilogue tile


def _gemm(drop: Callable[[dict[str, Any]], bool] = lambda _: False) -> PlanRequest:
    data: dict[str, Any] = json.loads(GEMM.read_text())
    data["syncs"] = [s for s in data["syncs"] if not drop(s)]
    return PlanRequest.model_validate(data)


def test_ws_gemm_k_loop_puts_the_epilogue_over_the_ring() -> None:
    req = _gemm()
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == plan.lower_bound == RING + 256
    assert plan.naive_bytes == RING + C_TILE + 256
    assert plan.barriers.inserted == []
    assert plan.named_barriers == []
    at = {p.id: p.offset for p in plan.placements}
    assert len({at[f"{t}{s}"] for t in "AB" for s in range(3)}) == 6  # three stages apart
    assert at["C"] < RING  # the epilogue tile over the ring's bytes


def test_ws_gemm_k_loop_without_an_empty_arrive_is_refused() -> None:
    req = _gemm(lambda s: s["kind"] == "mbarrier_arrive" and s["mbarrier"] == "empty_1")
    with pytest.raises(RequestError) as err:
        planner.plan(req)
    assert "unprotected_reuse" in str(err.value.errors)
    assert "'A1'" in str(err.value.errors)


def test_ws_gemm_k_loop_without_the_consumers_barrier_keeps_the_epilogue_apart() -> None:
    req = _gemm(lambda s: s["kind"] == "named_barrier")
    plan = planner.plan(req)
    assert plan.arena_bytes == RING + C_TILE + 256
    assert emulate(req, plan).valid
    # The placement of the example itself is now a race on the epilogue's bytes.
    fitted = planner.plan(_gemm())
    assert {v.code for v in planner.validate(req, fitted).violations} == {"missing_barrier"}
    assert {v.code for v in emulate(req, fitted).violations} == {"race"}


def test_a_time_limit_below_the_paths_work_is_refused_at_once() -> None:
    data: dict[str, Any] = json.loads(GEMM.read_text())
    data["options"]["time_limit"] = 0.001
    with pytest.raises(RequestError) as err:
        planner.plan(PlanRequest.model_validate(data))
    assert [e["type"] for e in err.value.errors] == ["time_limit_too_small"]
    assert list(err.value.errors[0]["loc"]) == ["options", "time_limit"]


def test_a_persistent_tile_loop_around_the_k_loop_keeps_the_epilogue_apart() -> None:
    data: dict[str, Any] = json.loads(GEMM.read_text())
    data["loops"] = [{"start": 1, "end": 14}, {"start": 1, "end": 10, "min_trips": 1}]
    req = PlanRequest.model_validate(data)
    assert len(partition_paths(req)) == 1 + 3 + 9 + 27  # 0 to 3 tiles, 1 to 3 K trips each
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    # Nothing orders the next tile's loads after this tile's epilogue: C stays apart.
    assert plan.arena_bytes == plan.lower_bound == RING + C_TILE + 256
    fitted = planner.plan(_gemm())
    found = planner.validate(req, fitted).violations
    assert {v.code for v in found} == {"missing_barrier"}
    assert {tuple(sorted(v.buffers)) for v in found} <= {("A0", "C"), ("B0", "C")}
    assert "race" in {v.code for v in emulate(req, fitted).violations}


def test_both_validators_report_a_wait_dropped_from_a_looped_request() -> None:
    """The request without the epilogue store's wait (a request no path of which is well
    formed) is judged, not raised on: both validators report the access never completing."""
    req = PlanRequest.model_validate(
        json.loads((ROOT / "examples" / "ws_gemm_k_loop.json").read_text())
    )
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    dropped = [s for s in req.syncs if not (s.kind == "wait_group" and s.group == "bulk")]
    assert len(dropped) == len(req.syncs) - 1
    faulty = req.model_copy(update={"syncs": dropped})
    for report in (planner.validate(faulty, plan), emulate(faulty, plan)):
        assert not report.valid
        assert {(v.code, tuple(v.buffers)) for v in report.violations} >= {("missing_wait", ("C",))}


# New syncs at original points for reuses with loops: a proxy fence, a named barrier.


def _fenced_ring(sync: str) -> PlanRequest:
    """The ring of ``_ring`` whose epilogue buffer the consumer fills by TMA: the producer's
    generic writes of the tile, in every trip, need a proxy fence before the epilogue's
    async-proxy write may take the tile's bytes."""
    data = _ring(sync=sync).model_dump(mode="json", exclude_defaults=True)
    data["buffers"][1]["accesses"] = [
        access("write", 5, "consumer", agent="tma", mbarrier="landed"),
        access("read", 6, "consumer"),
    ]
    data["syncs"] += [
        {"kind": "expect_tx", "at": 5, "mbarrier": "landed", "partition": "consumer"},
        {"kind": "mbarrier_wait", "at": 6, "mbarrier": "landed", "partition": "consumer"},
    ]
    return PlanRequest.model_validate(data)


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_a_proxy_fence_in_the_loop_lets_a_tma_epilogue_take_the_ring(sync: str) -> None:
    req = _fenced_ring(sync)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 256  # kept apart without the fence: 512
    origin = "inserted" if sync == "insert" else "required"
    # Right after the producer's write, in every trip: its arrive on full then carries it.
    assert [(f.at, f.partition, f.origin) for f in plan.fences] == [(2, "producer", origin)]
    assert plan.barriers.required == []
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert notes == [
        "out reuses bytes of tile, ordered by the request's syncs, with a proxy fence by "
        f"producer at point 2 ({origin}) on every one of the 4 paths of its loops and branches"
    ]
    bare = plan.model_copy(update={"fences": []})
    assert "missing_fence" in {v.code for v in planner.validate(req, bare).violations}
    assert "missing_fence" in {v.code for v in emulate(req, bare).violations}


def test_existing_keeps_the_tma_epilogue_apart_without_its_fence() -> None:
    plan = planner.plan(_fenced_ring("existing"))
    assert plan.arena_bytes == 512
    assert plan.fences == []


def _three_ring(sync: str) -> PlanRequest:
    """Three partitions: consumer0 writes and reads a tile in every trip (its warps meet
    at a named barrier before the next trip), then after the loop consumer1 alone writes a
    scratch buffer; the producer touches neither, so a barrier of the two consumers orders
    the reuse."""
    parts = [
        {"id": "producer", "threads": [0, 128]},
        {"id": "consumer0", "threads": [128, 256]},
        {"id": "consumer1", "threads": [256, 384]},
    ]
    return PlanRequest.model_validate(
        {
            "partitions": parts,
            "loops": [{"start": 1, "end": 5}],
            "buffers": [
                {
                    "id": "tile",
                    "size": 256,
                    "start": 1,
                    "end": 5,
                    "accesses": [access("write", 1, "consumer0"), access("read", 3, "consumer0")],
                },
                {
                    "id": "scratch",
                    "size": 256,
                    "start": 5,
                    "end": 7,
                    "accesses": [access("write", 5, "consumer1"), access("read", 6, "consumer1")],
                },
            ],
            "syncs": [{"kind": "named_barrier", "at": 4, "id": 1, "partitions": ["consumer0"]}],
            "options": {"sync": sync},
        }
    )


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_a_named_barrier_of_the_two_consumers_orders_the_reuse_after_the_loop(sync: str) -> None:
    req = _three_ring(sync)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == 256
    origin = "inserted" if sync == "insert" else "required"
    assert plan.barriers.required == []  # no block barrier: the producer does not wait
    assert [(b.at, b.id, b.partitions, b.threads, b.origin) for b in plan.named_barriers] == [
        (5, 2, ["consumer0", "consumer1"], 256, origin)
    ]
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert notes == [
        f"scratch reuses bytes of tile, ordered by a named barrier (id 2) at point 5 ({origin})"
        " on every one of the 4 paths of its loops and branches"
    ]
    bare = plan.model_copy(update={"named_barriers": []})
    assert {v.code for v in planner.validate(req, bare).violations} == {"missing_barrier"}
    assert {v.code for v in emulate(req, bare).violations} == {"race"}


def test_a_fence_orders_a_slots_own_reuse_that_was_refused() -> None:
    """The tile is filled by TMA in every trip after the consumer's generic write of it in
    the trip before: only a proxy fence by the consumer (with the empty edge) frees the
    slot, so the request was refused; now the fence is added inside the loop."""
    data = _ring(sync="insert").model_dump(mode="json", exclude_defaults=True)
    data["buffers"][0]["accesses"] = [
        access("write", 1, "producer", agent="tma", mbarrier="full"),
        access("write", 3, "consumer"),
    ]
    data["syncs"] = [
        {"kind": "expect_tx", "at": 1, "mbarrier": "full", "partition": "producer"},
        {"kind": "mbarrier_wait", "at": 3, "mbarrier": "full", "partition": "consumer"},
        *edge("empty", 4, "consumer", 1, "producer"),
        {"kind": "named_barrier", "at": 5, "id": 1, "partitions": ["consumer"]},
    ]
    req = PlanRequest.model_validate(data)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert [(f.at, f.partition) for f in plan.fences] == [(4, "consumer")]
    bare = plan.model_copy(update={"fences": []})
    assert "missing_fence" in {v.code for v in planner.validate(req, bare).violations}
    assert "missing_fence" in {v.code for v in emulate(req, bare).violations}


def _ring_with_mbarriers(sync: str) -> PlanRequest:
    """The ring of ``_ring`` (at least one trip) with its ``full`` and ``empty`` mbarriers
    as buffers, and an epilogue buffer a little larger than the tile after them."""
    data = _ring(sync=sync, min_trips=1).model_dump(mode="json", exclude_defaults=True)
    tile, out = data["buffers"]
    out.update(size=272, start=6, end=8)
    out["accesses"] = [access("write", 6, "consumer"), access("read", 7, "consumer")]
    data["buffers"] = [
        tile,
        *(
            {"id": m, "kind": "mbarrier", "size": 8, "start": 0, "end": 6}
            for m in ("full", "empty")
        ),
        out,
    ]
    return PlanRequest.model_validate(data)


@pytest.mark.parametrize("sync", ["insert", "none"])
def test_an_inval_after_the_loop_lets_the_epilogue_take_an_mbarriers_bytes(sync: str) -> None:
    req = _ring_with_mbarriers(sync)
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    assert plan.arena_bytes == plan.lower_bound == 280  # kept apart without the inval: 288
    origin = "inserted" if sync == "insert" else "required"
    # After the consumer's last arrive on empty (its warps met at point 5): it runs once.
    assert [(v.mbarrier, v.at, v.partition, v.origin) for v in plan.invals] == [
        ("empty", 5, "consumer", origin)
    ]
    assert plan.barriers.required == [6]  # the inval's threads before the epilogue's
    notes = [d.message for d in plan.diagnostics if d.code == "reuse_across_partitions"]
    assert (
        f"out reuses bytes of empty, ordered by the mbarrier_inval by consumer at point 5 "
        f"({origin}), then a block barrier at point 6 ({origin}) on every one of the 3 paths "
        "of its loops and branches"
    ) in notes
    bare = plan.model_copy(update={"invals": []})
    assert "missing_inval" in {v.code for v in planner.validate(req, bare).violations}
    assert "missing_inval" in {v.code for v in emulate(req, bare).violations}


def test_existing_keeps_the_mbarriers_bytes_without_an_inval() -> None:
    plan = planner.plan(_ring_with_mbarriers("existing"))
    assert plan.arena_bytes == 288
    assert plan.invals == []


@st.composite
def _looped_mbarrier_programs(draw: st.DrawFn) -> PlanRequest:
    """An mbarrier ``M`` (lifetime [0, cut)) over a loop, random operations on it inside
    and around the loop, random syncs, and a buffer ``B`` ([cut, 8)) that may take its
    bytes under sync "insert" or "none"."""
    names = draw(st.sampled_from([("producer", "consumer"), THREE]))
    ls = draw(st.integers(1, 2))
    le = draw(st.integers(ls + 1, ls + 3))
    cut = draw(st.integers(le + 1, 6))
    syncs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(1, cut - 2))
        by = draw(st.sampled_from(names))
        if draw(st.booleans()) and at + 1 <= cut - 1:
            syncs += edge(
                "M", at, by, draw(st.integers(at + 1, cut - 1)), draw(st.sampled_from(names))
            )
        else:
            syncs.append({"kind": "mbarrier_arrive", "at": at, "mbarrier": "M", "partition": by})
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(1, 7))
        if draw(st.booleans()):
            by, to = draw(st.sampled_from(names)), draw(st.sampled_from(names))
            syncs += edge(f"e{at}", at, by, draw(st.integers(at + 1, 8)), to)
        else:
            members = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
            syncs.append({"kind": "named_barrier", "at": at, "id": 1, "partitions": members})
    accesses = [
        access(draw(st.sampled_from(["write", "read"])), draw(st.integers(cut, 7)), q)
        for q in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2))
    ]
    # Often a block barrier after the init and after the mbarrier's last operation.
    barriers = sorted(
        {
            *([1] if draw(st.integers(0, 3)) else []),
            *([cut - 1] if draw(st.booleans()) else []),
            *draw(st.lists(st.integers(1, 7), max_size=1)),
        }
    )
    return PlanRequest.model_validate(
        {
            "partitions": [
                {"id": x, "threads": [128 * k, 128 * k + 128]} for k, x in enumerate(names)
            ],
            "loops": [{"start": ls, "end": le, **draw(st.sampled_from(_LOOP_TRIPS))}],
            "barriers": barriers,
            "buffers": [
                {"id": "M", "kind": "mbarrier", "size": 8, "start": 0, "end": cut},
                {"id": "B", "size": 8, "start": cut, "end": 8, "accesses": accesses},
            ],
            "syncs": syncs,
            "options": {"sync": draw(st.sampled_from(["insert", "none"]))},
        }
    )


_LOOP_TRIPS: list[dict[str, int]] = [{"trips": 2}, {"min_trips": 1}, {}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_looped_mbarrier_programs())
def test_an_added_inval_follows_every_operation_on_every_path(req: PlanRequest) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, plan).valid
    at = {p.id: p.offset for p in plan.placements}
    if at["M"] != at["B"]:
        assert plan.invals == []
        return
    # B over M: on every path the kernel as it runs orders the inval after every other
    # operation on M and before B, in every interleaving.
    assert [v.mbarrier for v in plan.invals] == ["M"]
    names = [p.id for p in req.partitions]
    inval = plan.invals[0]
    data = with_plan_syncs(req, plan).model_dump(mode="json", exclude_defaults=True)
    data["barriers"] = sorted({*req.barriers, *plan.barriers.required})
    data["options"] = {"sync": "existing"}
    for path in partition_paths(PlanRequest.model_validate(data)):
        runs = [k for k, p in enumerate(path.points) if p == inval.at]
        assert len(runs) == 1  # outside the loop: it runs once
        assert inval_truth(path.request, (names.index(inval.partition or ""), runs[0]))
    bare = plan.model_copy(update={"invals": []})
    assert "missing_inval" in {v.code for v in planner.validate(req, bare).violations}
    assert "missing_inval" in {v.code for v in emulate(req, bare).violations}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    looped_programs(waits=True) | looped_programs(THREE, waits=True),
    st.sampled_from(["insert", "none"]),
)
def test_added_waits_complete_every_access_on_every_path(req: PlanRequest, sync: str) -> None:
    req, data, plan = planned_under(req, sync)
    if plan is None:
        return
    # The kernel as it runs, with every sync the plan adds (its waits at every run of their
    # points: the kernel is refused if one leaves an access uncovered on some path), against
    # the brute force, whose waits complete each thread's own copies.
    data["barriers"] = sorted({*req.barriers, *plan.barriers.required})
    data["options"]["sync"] = "existing"
    data["syncs"] = [
        *data.get("syncs", []),
        *(
            {"kind": "wait_group", "at": w.at, "group": w.kind, "partition": w.partition}
            | ({"read": True} if w.kind == "bulk" else {})
            for w in plan.waits
        ),
    ]
    kernel = with_plan_syncs(
        PlanRequest.model_validate(data), plan.model_copy(update={"waits": []})
    )
    _assert_shared_pairs_ordered(req, kernel, plan)
    if plan.waits:
        bare = plan.model_copy(update={"waits": []})
        assert "missing_wait" in {v.code for v in planner.validate(req, bare).violations}
        assert "missing_wait" in {v.code for v in emulate(req, bare).violations}
