"""The static validator on access patterns: barrier windows from the first and last access,
thread-local aliases proved from the owner maps, and per-block footprints."""

from __future__ import annotations

from typing import Any

import planner
from planner.core.models import Footprint, Placement, Plan, PlanRequest
from planner.validators import validate_plan
from tests.support.patterned import THREADS, TILE, access, tile


def _request(b_write: str = "row", barriers: list[int] | None = None) -> PlanRequest:
    return PlanRequest.model_validate(
        {
            "block": [THREADS],
            "barriers": barriers or [],
            "buffers": [tile("a", 0, 2, "row", "row"), tile("b", 2, 4, b_write, "row")],
            "options": {"sync": "existing"},
        }
    )


def _plan(request: PlanRequest, offsets: dict[str, int], **fields: Any) -> Plan:
    """The planner's plan for ``request`` with the buffers moved to ``offsets``."""
    base = planner.plan(request)
    placements = [
        Placement(id=p.id, offset=offsets.get(p.id, p.offset), size=p.size) for p in base.placements
    ]
    arena = max(p.offset + p.size for p in placements)
    update = {"placements": placements, "arena_bytes": arena, "aliases": [], **fields}
    return base.model_copy(update=update)


def _codes(request: PlanRequest, plan: Plan) -> list[str]:
    return [v.code for v in validate_plan(request, plan).violations]


def test_accepts_a_listed_alias() -> None:
    request = _request()
    plan = _plan(request, {"a": 0, "b": 0}, aliases=[["a", "b"]])
    assert _codes(request, plan) == []


def test_unlisted_alias_is_a_missing_barrier() -> None:
    request = _request()
    report = validate_plan(request, _plan(request, {"a": 0, "b": 0}))
    assert [v.code for v in report.violations] == ["missing_barrier"]
    assert "not list it in aliases" in report.violations[0].message


def test_rejects_bad_alias_with_other_threads() -> None:
    request = _request(b_write="column")  # thread t writes other elements of b
    plan = _plan(request, {"a": 0, "b": 0}, aliases=[["a", "b"]])
    assert _codes(request, plan) == ["missing_barrier", "bad_alias"]


def test_rejects_bad_alias_that_shares_nothing_or_overlaps_in_time() -> None:
    request = _request()
    apart = _plan(request, {"a": 0, "b": TILE}, aliases=[["a", "b"]])
    assert _codes(request, apart) == ["bad_alias"]
    backwards = _plan(request, {"a": 0, "b": 0}, aliases=[["b", "a"], ["a", "b"]])
    assert _codes(request, backwards) == ["bad_alias"]
    unknown = _plan(request, {"a": 0, "b": TILE}, aliases=[["a", "zz"]])
    assert _codes(request, unknown) == ["bad_alias"]


def test_shifted_alias_is_checked_byte_by_byte() -> None:
    # Rows of 32 floats: b one row (128 bytes) above a puts row 0 of b over row 1 of a,
    # touched by the same threads; two rows up there is no sharing at all.
    request = _request()
    plan = _plan(request, {"a": 0, "b": 128}, aliases=[["a", "b"]])
    assert _codes(request, plan) == []
    odd = _plan(request, {"a": 0, "b": 4}, aliases=[["a", "b"]])
    assert "bad_alias" in _codes(request, odd)


def test_broadcast_never_aliases() -> None:
    data = _request().model_dump()
    data["buffers"][1]["accesses"][1] = access("read", 3, "all", 2)
    data["buffers"][1]["accesses"][0] = access("write", 2, "all", 2)
    request = PlanRequest.model_validate(data)
    plan = _plan(request, {"a": 0, "b": 0}, aliases=[["a", "b"]])
    assert "bad_alias" in _codes(request, plan)


def test_later_accesses_after_a_barrier_do_not_count() -> None:
    # b is written by the row threads at 2, then read by any thread after the barrier at 3.
    data = _request().model_dump()
    data["buffers"][1]["end"] = 5
    data["buffers"][1]["accesses"][1] = access("read", 4, "all", 2)
    data["barriers"] = [3]
    request = PlanRequest.model_validate(data)
    plan = _plan(request, {"a": 0, "b": 0}, aliases=[["a", "b"]])
    assert _codes(request, plan) == []


def test_barrier_window_runs_from_last_to_first_access() -> None:
    # a's last access is at 0 and b's first at 3: a barrier at 1, inside a's lifetime, or at
    # 3, inside b's, separates them; a barrier at 4 comes after b's first access.
    data = _request(b_write="column").model_dump()
    data["buffers"][0]["accesses"] = [access("write", 0, "row", 2)]
    data["buffers"][1]["accesses"] = [access("write", 3, "column", 2)]
    for barrier, ok in ((1, True), (3, True), (4, False)):
        request = PlanRequest.model_validate({**data, "barriers": [barrier]})
        plan = _plan(request, {"a": 0, "b": 0})
        assert (_codes(request, plan) == []) is ok, barrier


RNN: dict[str, Any] = {
    "block": [32],
    "grid": [4],
    "buffers": [
        {
            "id": "w",
            "size": 4 * 32 * 8 * 4,  # 4 blocks x 8 rows x 32 floats
            "start": 0,
            "end": 2,
            "accesses": [
                {
                    "op": "read",
                    "at": 1,
                    "bytes": 4,
                    "index": {"blockIdx.x": 256, "r": 32, "threadIdx.x": 1},
                    "loops": {"r": 8},
                }
            ],
        }
    ],
    "options": {"shrink": True},
}


def test_rejects_bad_footprint() -> None:
    request = PlanRequest.model_validate(RNN)
    plan = planner.plan(request)
    assert plan.footprints == [
        Footprint(
            id="w", declared=4096, planned=1024, index_base={"blockIdx.x": 1024, "constant": 0}
        )
    ]
    assert plan.placements[0].size == 1024
    wrong = plan.footprints[0].model_copy(update={"index_base": {"constant": 0}})
    assert _codes(request, plan.model_copy(update={"footprints": [wrong]})) == ["bad_footprint"]
    assert _codes(request, plan.model_copy(update={"footprints": []})) == ["bad_footprint"]
    whole = PlanRequest.model_validate({**RNN, "options": {"shrink": False}})
    assert _codes(whole, plan) == ["wrong_size", "bad_footprint"]
