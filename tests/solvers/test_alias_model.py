"""The exact alias model: the request's own sharing rules, solved and proved."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings

import planner
from planner.core.models import PlanRequest
from planner.solvers.alias_model import AliasRules, solve_aliased
from tests.support.hazards import brute_optimum, capped_requests, hazard_requests
from tests.support.patterned import THREADS, WIDTH, patterned_dicts

ROW = {"threadIdx.x": 1, "i": THREADS}  # element tx + 32 i: thread tx owns it


def _tile(ident: str, start: int, end: int, rows: int, read_at: int | None) -> dict[str, Any]:
    accesses: list[dict[str, Any]] = [
        {"op": "write", "at": start, "bytes": WIDTH, "index": ROW, "loops": {"i": rows}}
    ]
    if read_at is not None:
        accesses.append(
            {"op": "read", "at": read_at, "bytes": WIDTH, "index": ROW, "loops": {"i": rows}}
        )
    size = rows * THREADS * WIDTH
    return {"id": ident, "size": size, "start": start, "end": end, "accesses": accesses}


def _nested() -> PlanRequest:
    """A 512-byte tile, then two 128-byte tiles live together, each written by the threads
    that own those bytes of the first: both fit inside it, with no barrier in between."""
    buffers = [
        _tile("big", 2, 3, 4, None),
        _tile("left", 3, 5, 1, 4),
        _tile("right", 4, 6, 1, 5),
    ]
    data = {
        "block": [THREADS],
        "alignment": 128,
        "barriers": [6],
        "buffers": buffers,
        "options": {"sync": "existing", "time_limit": 2.0},
    }
    return PlanRequest.model_validate(data)


def test_model_overlaps_only_at_allowed_shifts() -> None:
    size = np.asarray([512, 128, 128], dtype=np.int64)
    alignment = np.full(3, 128, dtype=np.int64)
    pinned = np.full(3, -1, dtype=np.int64)
    rules = AliasRules(apart=[(1, 2)], shifts=[(0, 1, [0, 128]), (0, 2, [0, 128])])
    found = solve_aliased(
        size, alignment, pinned, rules, lower_bound=0, upper=768, hint=None, time_limit=1.0
    )
    assert found.proved_optimal
    assert found.arena_bytes == 512
    assert found.offsets is not None
    shifts = {int(found.offsets[1] - found.offsets[0]), int(found.offsets[2] - found.offsets[0])}
    assert shifts == {0, 128}
    # Without the shifts every pair is apart: the three stack.
    apart = AliasRules(apart=[(0, 1), (0, 2), (1, 2)], shifts=[(0, 1, []), (0, 2, [])])
    stacked = solve_aliased(
        size, alignment, pinned, apart, lower_bound=0, upper=768, hint=None, time_limit=1.0
    )
    assert stacked.proved_optimal
    assert stacked.arena_bytes == 768


def test_aliased_plan_is_proved_optimal() -> None:
    req = _nested()
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.arena_bytes == 512
    assert plan.status == "optimal"
    assert plan.lower_bound == 512
    assert sorted(map(tuple, plan.aliases)) == [("big", "left"), ("big", "right")]


@settings(max_examples=40, deadline=None)
@given(hazard_requests())
def test_fixed_barriers_reach_the_brute_force_optimum(req: PlanRequest) -> None:
    """With the barriers fixed by the request the model is exact: the plan is the optimum
    found by brute force, and says so."""
    opts = req.options
    if not (opts.sync == "existing" or opts.max_new_barriers == 0):
        req = req.model_copy(update={"options": opts.model_copy(update={"sync": "existing"})})
    req = req.model_copy(update={"options": req.options.model_copy(update={"time_limit": 2.0})})
    optimum = brute_optimum(req)[0]
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.arena_bytes == optimum
    assert plan.status == "optimal"


@settings(max_examples=15, deadline=None)
@given(patterned_dicts(max_buffers=4, horizon=10, sync="existing"))
def test_shared_shifts_agree_with_the_ownership_rule(data: dict[str, Any]) -> None:
    """The shifts found for every pair at once are those ``Owners.compatible`` accepts one
    by one, among the shifts where the two overlap."""
    from planner.core.aliasing import Owners
    from planner.pipeline.aliased import _shared_shifts

    req = PlanRequest.model_validate(data)
    owners = Owners(req, sorted(set(req.barriers)))
    for a, first in enumerate(req.buffers):
        for b, second in enumerate(req.buffers):
            if a == b or not (owners.patterned[a] and owners.patterned[b]):
                continue
            shifts = range(-(second.size - 1), first.size)
            expected = [s for s in shifts if owners.compatible(a, b, s)]
            assert _shared_shifts(owners, a, b, shifts, owners.cut(b)) == expected


def _check_capped(req: PlanRequest) -> None:
    optimum = brute_optimum(req)[0]
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.solver.bound <= optimum <= plan.arena_bytes
    if plan.arena_bytes == optimum:
        assert plan.status == "optimal"
        assert plan.solver.gap == 0


@settings(max_examples=60, deadline=None)
@given(capped_requests(max_buffers=4))
def test_a_cap_of_new_barriers_reaches_the_brute_force_optimum(req: PlanRequest) -> None:
    """Under "insert" with a cap of new barriers the model chooses them with the offsets:
    its bound never exceeds the optimum found by brute force over every barrier set within
    the cap, and a plan at that optimum says optimal with gap 0."""
    _check_capped(req)


@settings(max_examples=30, deadline=None)
@given(capped_requests(max_buffers=4, patterns=False, horizon=8))
def test_a_cap_without_aliases_reaches_the_brute_force_optimum(req: PlanRequest) -> None:
    """Without aliases too the model chooses the capped barriers with the offsets: the
    plan is the brute-force optimum and says so, whichever barrier sets the other attempts
    tried."""
    optimum = brute_optimum(req)[0]
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.arena_bytes == plan.solver.bound == optimum
    assert plan.status == "optimal"


def test_a_new_barrier_that_moves_a_cut_off_is_counted() -> None:
    """One new barrier (at 4 or 5) protects two of the three reuses, never all three; ``t2``
    may alias ``t0`` only if a barrier at 6 cuts off its read by other threads, which the
    cap leaves no room for. So 768 bytes is optimal, and proved: the bound over barrier sets
    alone judges aliases as if every point held a barrier and sees 512."""
    row = {"threadIdx.x": 1, "i": 32}
    column = {"threadIdx.x": 4, "i": 1}
    t0 = {"op": "write", "at": 4, "bytes": 4, "index": row, "loops": {"i": 4}}
    t1 = [
        {"op": "write", "at": 1, "bytes": 4, "index": column, "loops": {"i": 4}},
        {"op": "read", "at": 2, "bytes": 4, "index": column, "loops": {"i": 4}},
    ]
    t2 = [
        {"op": "write", "at": 5, "bytes": 4, "index": row, "loops": {"i": 2}},
        {"op": "read", "at": 6, "bytes": 4, "index": {"threadIdx.x": 2, "i": 1}, "loops": {"i": 2}},
    ]
    data = {
        "alignment": 128,
        "block": [32],
        "buffers": [
            {"id": "t0", "size": 512, "start": 4, "end": 5, "accesses": [t0]},
            {"id": "t1", "size": 512, "start": 1, "end": 3, "accesses": t1},
            {"id": "t2", "size": 256, "start": 5, "end": 7, "accesses": t2},
        ],
        "options": {"sync": "insert", "max_new_barriers": 1, "time_limit": 2.0},
    }
    req = PlanRequest.model_validate(data)
    assert brute_optimum(req)[0] == 768
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    assert plan.arena_bytes == plan.solver.bound == 768
    assert plan.status == "optimal"
