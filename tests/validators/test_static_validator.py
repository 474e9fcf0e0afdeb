"""The static validator: one planted plan per violation code, and exactness against brute force."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core._jit import compiled
from planner.core.models import (
    Barriers,
    GraphStats,
    Launch,
    Placement,
    Plan,
    PlanRequest,
    SolverInfo,
    ValidationReport,
)
from planner.validators import validate_plan
from planner.validators._disjoint import any_clash
from planner.validators.sweep import PRESWEEP_READY_MIN_EXTENTS, _presweeps
from tests.support.samples import TWO_PHASE

BASE = TWO_PHASE  # a, b share bytes across the barrier at 4; c lives beside both
OFFSETS = {"a": 0, "b": 0, "c": 64}


def _request(**changes: Any) -> PlanRequest:
    data = {**BASE, **changes}
    return PlanRequest.model_validate(data)


def _plan(
    request: PlanRequest,
    offsets: dict[str, int] | None = None,
    *,
    placements: list[Placement] | None = None,
    arena_bytes: int | None = None,
    status: str = "optimal",
    existing: list[int] | None = None,
    inserted: list[int] | None = None,
    required: list[int] | None = None,
) -> Plan:
    """A plan placing each request buffer at ``offsets[id]``, consistent unless told otherwise."""
    if placements is None:
        offsets = OFFSETS if offsets is None else offsets
        sizes = {b.id: b.size for b in request.buffers}
        placements = [Placement(id=i, offset=o, size=sizes[i]) for i, o in offsets.items()]
    shared = [p.offset + p.size for p in placements if p.memory == "shared"]
    arena = max(shared, default=0) if arena_bytes is None else arena_bytes
    return Plan.model_validate(
        {
            "name": request.name,
            "status": status,
            "arena_bytes": arena,
            "lower_bound": 0,
            "naive_bytes": sum(b.size for b in request.buffers),
            "capacity": request.effective_capacity,
            "placements": placements,
            "barriers": Barriers(
                existing=sorted(set(request.barriers)) if existing is None else existing,
                inserted=inserted or [],
                required=required or [],
            ),
            "launch": Launch(dynamic_smem_bytes=arena, requires_opt_in=False),
            "solver": SolverInfo(name="hand", proved_optimal=False, bound=0, gap=0.0),
            "graph": GraphStats(
                buffers=len(request.buffers), live_edges=0, hazard_edges=0, components=0
            ),
            "request_sha256": "0" * 64,
        }
    )


def _codes(report: ValidationReport) -> list[str]:
    return [v.code for v in report.violations]


def _only(report: ValidationReport, code: str) -> list[list[str]]:
    """The buffers named by each violation, asserting every violation has ``code``."""
    assert not report.valid
    assert _codes(report) == [code] * len(report.violations), report.violations
    return [v.buffers for v in report.violations]


def test_accepts_valid_plan() -> None:
    request = _request()
    report = validate_plan(request, _plan(request, required=[4]))
    assert report.valid
    assert report.violations == []
    assert not report.truncated


def test_accepts_empty_request() -> None:
    request = _request(buffers=[], barriers=[])
    assert validate_plan(request, _plan(request, {})).valid


def test_rejects_missing_buffer() -> None:
    request = _request()
    report = validate_plan(request, _plan(request, {"a": 0, "b": 0}))
    assert _only(report, "missing_buffer") == [["c"]]
    assert "'c'" in report.violations[0].message


def test_rejects_unknown_buffer() -> None:
    request = _request()
    extra = Placement(id="ghost", offset=512, size=16)
    placements = [*_plan(request).placements, extra]
    report = validate_plan(request, _plan(request, placements=placements, arena_bytes=528))
    assert _only(report, "unknown_buffer") == [["ghost"]]
    assert "512" in report.violations[0].message


def test_rejects_duplicate_buffer() -> None:
    request = _request()
    placements = [*_plan(request).placements, Placement(id="c", offset=64, size=32)]
    report = validate_plan(request, _plan(request, placements=placements))
    assert _only(report, "duplicate_buffer") == [["c"]]
    assert "2 placements" in report.violations[0].message


def test_rejects_wrong_size() -> None:
    request = _request()
    placements = [
        Placement(id="a", offset=0, size=64),
        Placement(id="b", offset=0, size=48),
        Placement(id="c", offset=64, size=32),
    ]
    report = validate_plan(request, _plan(request, placements=placements))
    assert _only(report, "wrong_size") == [["b"]]
    assert "48" in report.violations[0].message
    assert "64" in report.violations[0].message


@pytest.mark.parametrize(("offset", "words"), [(72, "alignment 16"), (-32, "negative")])
def test_rejects_misaligned(offset: int, words: str) -> None:
    request = _request()
    plan = _plan(request, {**OFFSETS, "c": offset}, arena_bytes=64 if offset < 0 else 104)
    report = validate_plan(request, plan)
    assert _only(report, "misaligned") == [["c"]]
    assert words in report.violations[0].message


def test_buffer_alignment_overrides_request_alignment() -> None:
    request = _request(
        alignment=1,
        buffers=[{"id": "a", "size": 8, "start": 0, "end": 1, "alignment": 128}],
        barriers=[],
    )
    report = validate_plan(request, _plan(request, {"a": 64}))
    assert _only(report, "misaligned") == [["a"]]
    assert "128" in report.violations[0].message


def test_rejects_pinned_moved() -> None:
    buffers = [*BASE["buffers"][:2], {**BASE["buffers"][2], "offset": 128}]
    request = _request(buffers=buffers)
    report = validate_plan(request, _plan(request))
    assert _only(report, "pinned_moved") == [["c"]]
    assert "128" in report.violations[0].message
    assert validate_plan(request, _plan(request, {**OFFSETS, "c": 128})).valid


def test_rejects_wrong_arena() -> None:
    request = _request()
    report = validate_plan(request, _plan(request, arena_bytes=64))
    assert _only(report, "wrong_arena") == [["c"]]
    assert "96" in report.violations[0].message


def test_rejects_over_capacity() -> None:
    request = _request(capacity=80)
    report = validate_plan(request, _plan(request))
    assert _only(report, "over_capacity") == [[]]
    assert "96" in report.violations[0].message
    assert "80" in report.violations[0].message


@pytest.mark.parametrize("status", ["infeasible", "unknown"])
def test_allows_over_capacity_when_not_claimed_to_fit(status: str) -> None:
    request = _request(capacity=80)
    assert validate_plan(request, _plan(request, status=status)).valid


def test_capacity_from_target() -> None:
    request = _request(
        capacity=None,
        target="sm_75",
        buffers=[{"id": "a", "size": 65536 + 16, "start": 0, "end": 1}],
        barriers=[],
    )
    report = validate_plan(request, _plan(request, {"a": 0}))
    assert _codes(report) == ["over_capacity"]
    assert "65536" in report.violations[0].message


def test_rejects_overlap() -> None:
    request = _request()
    report = validate_plan(request, _plan(request, {**OFFSETS, "c": 48}, arena_bytes=80))
    assert sorted(map(sorted, _only(report, "overlap"))) == [["a", "c"], ["b", "c"]]
    message = next(v.message for v in report.violations if set(v.buffers) == {"a", "c"})
    assert "[48, 64)" in message  # the shared bytes
    assert "[2, 4)" in message  # the points both are live


@pytest.mark.parametrize(
    ("sync", "barriers", "options", "words"),
    [
        ("existing", {"existing": [4, 6]}, {}, "barriers.existing"),
        ("existing", {"inserted": [6]}, {}, "sync 'existing'"),
        ("insert", {"inserted": [6]}, {"barrier_candidates": [5]}, "barrier_candidates"),
        ("insert", {"inserted": [4]}, {}, "already an existing"),
        ("insert", {"inserted": [5, 6]}, {"max_new_barriers": 1}, "max_new_barriers"),
        ("insert", {"inserted": [6, 6]}, {}, "twice"),
        ("insert", {"required": [4, 7], "inserted": [6]}, {}, "neither existing nor inserted"),
        ("existing", {"required": [7]}, {}, "neither existing nor inserted"),
    ],
)
def test_rejects_bad_barrier(
    sync: str, barriers: dict[str, list[int]], options: dict[str, Any], words: str
) -> None:
    request = _request(options={"sync": sync, **options})
    plan = _plan(
        request,
        existing=barriers.get("existing"),
        inserted=barriers.get("inserted"),
        required=barriers.get("required"),
    )
    report = validate_plan(request, plan)
    assert _only(report, "bad_barrier") == [[]]
    assert words in report.violations[0].message


def test_accepts_inserted_barriers_within_policy() -> None:
    request = _request(options={"sync": "insert", "barrier_candidates": [5, 6]})
    report = validate_plan(request, _plan(request, inserted=[6], required=[4, 6]))
    assert report.valid, report.violations


def test_rejects_missing_barrier() -> None:
    request = _request(barriers=[])
    report = validate_plan(request, _plan(request))
    assert _only(report, "missing_barrier") == [["a", "b"]]
    violation = report.violations[0]
    assert violation.point == 4
    assert "[4, 4]" in violation.message
    assert "[0, 64)" in violation.message


@pytest.mark.parametrize(("barrier", "ok"), [(3, False), (4, True), (5, True), (6, True)])
def test_barrier_window_is_inclusive(barrier: int, ok: bool) -> None:
    # a is last touched at 3 and b first at 6: a barrier at 4, 5 or 6 separates them.
    request = _request(
        barriers=[barrier],
        buffers=[
            {"id": "a", "size": 16, "start": 0, "end": 4},
            {"id": "b", "size": 16, "start": 6, "end": 8},
        ],
    )
    report = validate_plan(request, _plan(request, {"a": 0, "b": 0}))
    assert report.valid is ok
    if not ok:
        assert _only(report, "missing_barrier") == [["a", "b"]]
        assert "[4, 6]" in report.violations[0].message


def test_inserted_barrier_separates() -> None:
    request = _request(barriers=[], options={"sync": "insert"})
    report = validate_plan(request, _plan(request, inserted=[4], required=[4]))
    assert report.valid, report.violations


def test_sync_none_is_checked_against_required() -> None:
    request = _request(barriers=[], options={"sync": "none"})
    assert validate_plan(request, _plan(request, required=[4])).valid
    report = validate_plan(request, _plan(request, required=[]))
    assert _only(report, "missing_barrier") == [["a", "b"]]
    # Under "none" required points need not be existing or inserted: the caller places them.
    assert validate_plan(request, _plan(request, required=[4, 7])).valid


def test_global_placement_is_outside_the_arena() -> None:
    request = _request()
    placements = [
        Placement(id="a", offset=0, size=64),
        Placement(id="b", offset=0, size=64),
        Placement(id="c", offset=0, size=32, memory="global"),
    ]
    plan = _plan(request, placements=placements)
    plan = plan.model_copy(update={"spilled": ["c"], "global_bytes": 32})
    report = validate_plan(request, plan)
    assert report.valid, report.violations


def test_reports_every_violation_at_once() -> None:
    request = _request(barriers=[], capacity=64)
    placements = [
        Placement(id="a", offset=8, size=64),  # misaligned
        Placement(id="c", offset=32, size=16),  # wrong size, overlaps a
        Placement(id="c", offset=0, size=32),  # duplicate
        Placement(id="x", offset=0, size=8),  # unknown
    ]
    plan = _plan(request, placements=placements, arena_bytes=10, existing=[3])
    report = validate_plan(request, plan)
    assert _codes(report) == [
        "missing_buffer",
        "unknown_buffer",
        "duplicate_buffer",
        "wrong_size",
        "misaligned",
        "wrong_arena",
        "over_capacity",
        "overlap",
        "bad_barrier",
    ]
    assert report.violations[0].buffers == ["b"]
    assert report.violations[7].buffers == ["a", "c"]


def test_garbage_plan_does_not_raise() -> None:
    request = _request()
    garbage = [
        Placement(id="zz", offset=-7, size=-3),
        Placement(id="", offset=-(1 << 62), size=1 << 62),
        Placement(id="zz", offset=3, size=0, memory="global"),
    ]
    plan = _plan(request, placements=garbage, arena_bytes=-1, existing=[-5, 99], required=[-1])
    report = validate_plan(request, plan)
    assert not report.valid
    assert set(_codes(report)) == {"missing_buffer", "unknown_buffer", "wrong_arena", "bad_barrier"}
    empty = validate_plan(request, _plan(request, placements=[], arena_bytes=-3))
    assert set(_codes(empty)) == {"missing_buffer", "wrong_arena"}
    wild = {"a": -5, "b": -(1 << 41), "c": (1 << 41) + 3}
    report = validate_plan(request, _plan(request, wild))
    assert _codes(report).count("misaligned") == 3


def test_truncates_at_max_violations() -> None:
    ids = [f"b{i}" for i in range(10)]
    buffers = [{"id": i, "size": 16, "start": 0, "end": 1} for i in ids]
    request = _request(buffers=buffers, barriers=[], capacity=None)
    plan = _plan(request, dict.fromkeys(ids, 0))  # 45 overlapping pairs
    full = validate_plan(request, plan)
    assert len(full.violations) == 45
    assert not full.truncated
    cut = validate_plan(request, plan, max_violations=7)
    assert len(cut.violations) == 7
    assert cut.truncated
    assert not cut.valid
    nothing = validate_plan(request, plan, max_violations=0)
    assert nothing.violations == []
    assert nothing.truncated
    assert not nothing.valid
    with pytest.raises(ValueError, match="-1"):
        validate_plan(request, plan, max_violations=-1)


def test_report_is_deterministic() -> None:
    buffers = [{"id": f"b{i}", "size": 16, "start": i % 3, "end": i % 3 + 2} for i in range(12)]
    request = _request(buffers=buffers, barriers=[2], capacity=None)
    offsets = {f"b{i}": 16 * (i % 4) for i in range(12)}
    placements = list(_plan(request, offsets).placements)
    first = validate_plan(request, _plan(request, placements=placements))
    random.Random(0).shuffle(placements)
    second = validate_plan(request, _plan(request, placements=placements))
    assert not first.valid
    assert first == second


# -- exactness against an all-pairs oracle ---------------------------------------------------


@st.composite
def _instances(
    draw: st.DrawFn, buffers_from: int = 0, buffers_to: int = 9, stacked: bool = False
) -> tuple[PlanRequest, Plan]:
    """A request and a plan; ``stacked``: each buffer in a slot of its own or one byte up,
    so that most plans are valid and a few share a byte."""
    n = draw(st.integers(buffers_from, buffers_to))
    buffers: list[dict[str, Any]] = []
    offsets: dict[str, int] = {}
    horizon = 0
    for i in range(n):
        start = draw(st.integers(0, 12))
        end = start + draw(st.integers(1, 5))
        horizon = max(horizon, end)
        buffers.append(
            {
                "id": f"b{i}",
                "size": draw(st.integers(1, 8)),
                "start": start,
                "end": end,
            }
        )
        offsets[f"b{i}"] = 8 * i + draw(st.integers(0, 1)) if stacked else draw(st.integers(0, 16))
    points = st.lists(st.integers(0, horizon), max_size=5)
    sync = draw(st.sampled_from(["existing", "insert", "none"]))
    request = PlanRequest.model_validate(
        {"buffers": buffers, "barriers": draw(points), "options": {"sync": sync}}
    )
    plan = _plan(request, offsets, inserted=draw(points), required=draw(points))
    return request, plan


def _oracle(request: PlanRequest, plan: Plan) -> tuple[set[frozenset[str]], set[tuple[str, str]]]:
    """Overlapping pairs and (earlier, later) pairs lacking a barrier, by checking all pairs."""
    at = {p.id: p.offset for p in plan.placements}
    runtime = set(request.barriers) | set(plan.barriers.inserted)
    if request.options.sync == "none":
        runtime |= set(plan.barriers.required)
    overlaps: set[frozenset[str]] = set()
    missing: set[tuple[str, str]] = set()
    for a in request.buffers:
        for b in request.buffers:
            if a.id >= b.id and a.start < b.end and b.start < a.end:
                continue
            share = at[a.id] < at[b.id] + b.size and at[b.id] < at[a.id] + a.size
            if not share:
                continue
            if a.start < b.end and b.start < a.end:
                overlaps.add(frozenset((a.id, b.id)))
            elif a.end <= b.start and not any(a.end <= p <= b.start for p in runtime):
                missing.add((a.id, b.id))
    return overlaps, missing


@settings(max_examples=400, deadline=None)
@given(_instances())
def test_sweep_matches_all_pairs(instance: tuple[PlanRequest, Plan]) -> None:
    _matches_all_pairs(*instance)


@settings(max_examples=100, deadline=None)
@given(_instances(PRESWEEP_READY_MIN_EXTENTS, PRESWEEP_READY_MIN_EXTENTS + 16, stacked=True))
def test_presweep_then_sweep_matches_all_pairs(instance: tuple[PlanRequest, Plan]) -> None:
    """Once the compiled pre-sweep is loaded it runs first on plans of this size: valid
    ones end there, the others go on to the sweep, and either way the report is exact."""
    with compiled():
        any_clash(*(np.zeros(1, dtype=np.int64) for _ in range(5)))
    assert _presweeps(len(instance[0].buffers))
    _matches_all_pairs(*instance)


def _matches_all_pairs(request: PlanRequest, plan: Plan) -> None:
    report = validate_plan(request, plan, max_violations=10_000)
    overlaps = [frozenset(v.buffers) for v in report.violations if v.code == "overlap"]
    missing = [tuple(v.buffers) for v in report.violations if v.code == "missing_barrier"]
    want_overlaps, want_missing = _oracle(request, plan)
    assert len(overlaps) == len(set(overlaps)), "a pair reported twice"
    assert set(overlaps) == want_overlaps
    # Exact even when overlaps are present, not only on overlap-free plans.
    assert len(missing) == len(set(missing)), "a pair reported twice"
    assert set(missing) == want_missing
    assert report.valid == (not report.violations)
