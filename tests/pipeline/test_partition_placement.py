"""The placement of partitioned requests, with and without loops: the fit a request names
(planner/pipeline/ground.py, the fits a solver gives each route) and the certificate of a
lower bound over the capacity (planner/pipeline/outcome_parts.py ``pair_certifier``)."""

from __future__ import annotations

import itertools

import pytest

import planner
from planner.core.models import Plan, PlanRequest
from tests.support.partition_programs import access, edge

PARTS = [{"id": "producer", "threads": [0, 128]}, {"id": "consumer", "threads": [128, 256]}]
FITS = [
    f"greedy:{o}/{f}"
    for o in ("size", "length", "area", "start", "degree", "input")
    for f in ("best-fit", "first-fit")
]


def _tiles(looped: bool, capacity: int | None = None, solver: str = "auto") -> PlanRequest:
    """Two tiles of 100 bytes aligned to 128, written by the producer and read by the
    consumer after a full arrive/wait, live together (so no plan holds them in less than
    228 bytes, and none in less than their 200 bytes together); in a K loop of 4 trips the
    empty arrive/wait hands their slots back."""
    syncs = edge("full", 2, "producer", 3, "consumer")
    if looped:
        syncs += edge("empty", 4, "consumer", 1, "producer")
    tiles = [
        {
            "id": name,
            "size": 100,
            "start": 1,
            "end": 5,
            "accesses": [access("write", 1, "producer"), access("read", 3, "consumer")],
        }
        for name in ("a", "b")
    ]
    return PlanRequest.model_validate(
        {
            "partitions": PARTS,
            "loops": [{"start": 1, "end": 5, "trips": 4}] if looped else [],
            "alignment": 128,
            "capacity": capacity,
            "buffers": tiles,
            "syncs": syncs,
            "options": {"solver": solver},
        }
    )


def _checked(req: PlanRequest) -> Plan:
    plan = planner.plan(req)
    assert planner.validate(req, plan).valid
    return plan


@pytest.mark.parametrize("looped", [False, True])
def test_a_lower_bound_over_the_capacity_names_buffers_that_coexist_and_their_bytes(
    looped: bool,
) -> None:
    req = _tiles(looped, capacity=150)
    plan = _checked(req)
    assert plan.status == "infeasible"
    cert = plan.certificate
    assert cert is not None
    assert cert.reason == "lower_bound"
    named = [b for b in req.buffers if b.id in cert.buffers]
    assert len(named) == len(cert.buffers) >= 2
    # Pairwise live together (intervals that pairwise meet share a point): every plan holds
    # them at once, in their bytes together, not in the arena a placement proves (228).
    for x, y in itertools.combinations(named, 2):
        assert max(x.start, y.start) < min(x.end, y.end)
    assert cert.live_bytes == sum(b.size for b in named) == 200 > cert.capacity
    assert plan.arena_bytes == 228


@pytest.mark.parametrize("looped", [False, True])
def test_a_named_fit_of_the_conflict_pairs_is_the_one_tried(looped: bool) -> None:
    plan = _checked(_tiles(looped, solver="greedy:length/first-fit"))
    assert [t.name for t in plan.solver.tried] == ["greedy:length/first-fit"]
    assert "solver_not_applicable" not in {d.code for d in plan.diagnostics}
    assert plan.arena_bytes == 228


@pytest.mark.parametrize("looped", [False, True])
def test_a_fit_the_conflict_pairs_cannot_run_falls_back_with_a_note(looped: bool) -> None:
    plan = _checked(_tiles(looped, solver="greedy:size/skyline"))
    assert [t.name for t in plan.solver.tried] == FITS
    notes = [d for d in plan.diagnostics if d.code == "solver_not_applicable"]
    assert len(notes) == 1
    assert "partitions were planned by the fits" in notes[0].message
