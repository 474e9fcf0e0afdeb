"""Proxy fences inside warp-specialised partitions (docs/design.md, Asynchronous accesses and
Warp-specialised partitions): a generic-proxy write before an async-proxy access on the same
bytes needs a ``fence_proxy_async`` by the writing partition after the write, ordered before
the access. The brute force over interleavings models the fence on its own
(``tests/support/interleavings.py``); the static validator, the emulator and the planner's
plans under every sync policy are held to it."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.models import Barriers, Plan, PlanRequest, Wait
from planner.core.partition_paths import partition_paths
from planner.validators.emulator import emulate
from planner.validators.program import with_plan_syncs
from tests.support.interleavings import ordered_pairs
from tests.support.partition_fences import fence_programs, fenced_rings
from tests.support.partition_loops import looped_programs, path_truth
from tests.support.partition_programs import THREE, access, kernel_as_run
from tests.support.plans import hand_plan, pairs_on_common_bytes

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]


def _write_then_proxy(
    writer: str, reader: str, fences: list[tuple[int, str]], wait_at: int = 2
) -> PlanRequest:
    """The producer writes ``A`` at 1 (``writer``: a thread write, or a ``cp.async`` write its
    wait_group at ``wait_at`` completes); a block barrier at 4; the consumer's ``B`` then
    reaches the same bytes through the async proxy at 5 (``reader``: a TMA write or an
    ``mma`` read), with the proxy ``fences`` (point, partition) of the request."""
    syncs: list[dict[str, Any]] = [
        {"kind": "fence_proxy_async", "at": at, "partition": by} for at, by in fences
    ]
    if writer == "cp.async":
        first = access("write", 1, "producer", agent="cp.async")
        syncs.append({"kind": "wait_group", "at": wait_at, "group": "cp.async"})
        syncs[-1]["partition"] = "producer"
    else:
        first = access("write", 1, "producer")
    if reader == "tma":
        then = access("write", 5, "consumer", agent="tma", mbarrier="landed")
        syncs.append({"kind": "expect_tx", "at": 5, "mbarrier": "landed", "partition": "consumer"})
        syncs.append(
            {"kind": "mbarrier_wait", "at": 6, "mbarrier": "landed", "partition": "consumer"}
        )
    else:
        then = access("read", 5, "consumer", agent="mma")
        syncs.append({"kind": "wait_group", "at": 6, "group": "wgmma", "partition": "consumer"})
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "barriers": [4],
            "buffers": [
                {"id": "A", "size": 256, "start": 0, "end": 4, "accesses": [first]},
                {
                    "id": "B",
                    "size": 256,
                    "start": 4,
                    "end": 8,
                    "accesses": [then, access("read", 7, "consumer")],
                },
            ],
            "syncs": syncs,
            "options": {"sync": "existing"},
        }
    )


def _sharing(
    req: PlanRequest, pair: tuple[int, int] | None, waits: list[Wait] | None = None
) -> Plan:
    """A plan on the request's barriers (and ``waits``) that puts ``pair`` on common bytes
    and every other buffer apart."""
    top = sum(b.size for b in req.buffers)
    offsets = {
        b.id: 0 if pair is not None and k in pair else top * (k + 1)
        for k, b in enumerate(req.buffers)
    }
    existing = sorted(set(req.barriers))
    plan = hand_plan(req, offsets, Barriers(existing=existing, inserted=[], required=[]))
    return plan.model_copy(update={"waits": waits or []})


# (writer, fences, wait_group of a cp.async write, whether A's bytes may go to B)
CASES = [
    ("threads", [], 2, False),  # no fence
    ("threads", [(2, "producer")], 2, True),  # after the write, before the barrier
    ("threads", [(4, "producer")], 2, True),  # at the barrier's point: it runs before it
    ("threads", [(1, "producer")], 2, False),  # at the write's point: it runs before it
    ("threads", [(5, "producer")], 2, False),  # after the barrier: not ordered before B
    ("threads", [(2, "consumer")], 2, False),  # by a partition that did not write
    ("cp.async", [], 2, False),  # no fence
    ("cp.async", [(2, "producer")], 2, True),  # after the wait that completes the copy
    ("cp.async", [(2, "producer")], 3, False),  # before that wait: the copy may land later
    ("cp.async", [(3, "consumer")], 3, False),  # by a partition that did not write
]


@pytest.mark.parametrize("reader", ["tma", "mma"])
@pytest.mark.parametrize(("writer", "fences", "wait_at", "shares"), CASES)
def test_the_brute_force_and_both_validators_need_the_writers_fence(
    writer: str, fences: list[tuple[int, str]], wait_at: int, shares: bool, reader: str
) -> None:
    req = _write_then_proxy(writer, reader, fences, wait_at)
    assert ((0, 1) in ordered_pairs(req)) == shares
    plan = _sharing(req, (0, 1))
    static = {v.code for v in planner.validate(req, plan).violations}
    emulated = {v.code for v in emulate(req, plan).violations}
    assert static == emulated == (set() if shares else {"missing_fence"})
    assert planner.validate(req, _sharing(req, None)).valid
    # The planner lets B take A's bytes exactly when the fence orders them.
    planned = planner.plan(req)  # validated inside: the static check runs on every plan
    assert emulate(req, planned).valid
    assert (planned.arena_bytes == 256) == shares


def test_the_brute_force_leaves_a_generic_write_unfenced_before_a_tma_write() -> None:
    """The barrier at 4 orders the producer's write before the consumer's accesses: with a
    thread write in B the pair is ordered, with a TMA write it needs the fence as well."""
    req = _write_then_proxy("threads", "tma", [])
    data = req.model_dump(mode="json", exclude_defaults=True)
    data["buffers"][1]["accesses"][0] = access("write", 5, "consumer")
    data["syncs"] = []
    assert (0, 1) in ordered_pairs(PlanRequest.model_validate(data))
    assert (0, 1) not in ordered_pairs(req)
    assert (0, 1) in ordered_pairs(_write_then_proxy("threads", "tma", [(2, "producer")]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fence_programs() | fence_programs(THREE))
def test_both_validators_agree_with_every_interleaving_on_proxy_fences(req: PlanRequest) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    # The waits a plan under "none" requires, and no barrier, named barrier or fence it would
    # add: the request's syncs order what they order.
    waits = planner.plan(req).waits  # validated inside
    truth = ordered_pairs(with_plan_syncs(req, _sharing(req, None, waits)))
    bufs = req.buffers
    for x, y in itertools.permutations(range(len(bufs)), 2):
        if bufs[x].end > bufs[y].start:
            continue
        shared = _sharing(req, (x, y), waits)
        static = {v.code for v in planner.validate(req, shared).violations}
        emulated = {v.code for v in emulate(req, shared).violations}
        expect = (x, y) in truth
        assert (not static - {"missing_wait"}) == expect, (x, y, static)
        assert (not emulated - {"missing_wait"}) == expect, (x, y, emulated)


def _existing(req: PlanRequest) -> PlanRequest:
    """``req`` under sync "existing", with the waits a plan under "none" requires as its
    own syncs (so every asynchronous access is covered)."""
    waits: list[Wait] = planner.plan(req).waits
    data = req.model_dump(mode="json", exclude_defaults=True)
    data["syncs"] = [
        *data.get("syncs", []),
        *(
            {"kind": "wait_group", "at": w.at, "group": w.kind, "partition": w.partition}
            | ({"read": True} if w.kind == "bulk" else {})
            for w in waits
        ),
    ]
    data["options"] = {"sync": "existing"}
    return PlanRequest.model_validate(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fence_programs() | fence_programs(THREE), st.sampled_from(["insert", "none", "existing"]))
def test_plans_share_bytes_only_where_every_interleaving_orders_and_fences(
    req: PlanRequest, sync: str
) -> None:
    if sync == "existing":
        req = _existing(req)
    else:
        req = req.model_copy(update={"options": req.options.model_copy(update={"sync": sync})})
    note(req.model_dump_json(exclude_defaults=True))
    plan = planner.plan(req)  # validated inside: the static check runs on every plan
    assert planner.validate(req, plan).valid
    assert emulate(req, plan).valid
    kernel = kernel_as_run(req, plan)
    truth = ordered_pairs(kernel)
    bufs = req.buffers
    shared = pairs_on_common_bytes(plan)
    for i, j in shared:
        x, y = (i, j) if bufs[i].end <= bufs[j].start else (j, i)
        assert (x, y) in truth, (bufs[x].id, bufs[y].id)
    if plan.fences:
        # Without the fences the plan adds, both validators agree with every interleaving
        # on whether the pairs on common bytes are still ordered and fenced.
        bare = plan.model_copy(update={"fences": []})
        unfenced = ordered_pairs(kernel_as_run(req, bare))
        expect = all(
            (i, j) in unfenced if bufs[i].end <= bufs[j].start else (j, i) in unfenced
            for i, j in shared
        )
        assert planner.validate(req, bare).valid == expect
        assert emulate(req, bare).valid == expect


def _planned(req: PlanRequest) -> Plan | None:
    """The plan of ``req`` (validated inside ``planner.plan``), or None where no allowed
    point orders a buffer's own instances."""
    refused: RequestError | None = None
    try:
        return planner.plan(req)
    except RequestError as err:
        refused = err
    assert [e["type"] for e in refused.errors] == ["unprotected_reuse"]
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fenced_rings() | looped_programs(fences=True))
def test_both_validators_agree_with_every_interleaving_on_every_path_with_fences(
    req: PlanRequest,
) -> None:
    note(req.model_dump_json(exclude_defaults=True))
    n = len(req.buffers)
    own, good, live = path_truth(partition_paths(req), n)
    apart = _sharing(req, None)
    assert planner.validate(req, apart).valid == own
    assert emulate(req, apart).valid == own
    for x, y in itertools.combinations(range(n), 2):
        plan = _sharing(req, (x, y))
        expect = own and (x, y) in good
        assert planner.validate(req, plan).valid == expect, (x, y)
        if (x, y) not in live:  # the static check alone judges lifetimes
            assert emulate(req, plan).valid == expect, (x, y)
    if not own:
        return
    for sync in ("existing", "insert", "none"):
        data = req.model_dump(mode="json", exclude_defaults=True)
        data["options"]["sync"] = sync
        under = PlanRequest.model_validate(data)
        made = _planned(under)
        if made is None:
            continue
        assert emulate(under, made).valid
        kernel = kernel_as_run(under, made)
        data = kernel.model_dump(mode="json", exclude_defaults=True)
        data["options"] = {"sync": "existing"}
        ran = path_truth(partition_paths(PlanRequest.model_validate(data)), n)
        for i, j in pairs_on_common_bytes(made):
            assert (i, j) in ran[1], (sync, i, j)
