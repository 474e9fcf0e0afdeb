"""Plans of a fixed corpus are byte-identical to the committed hashes (tests/data).

The hashes are of this version's plans: a change meant to leave plans alone (a refactor, a
faster data structure) must keep them, and one meant to change plans (a stronger bound, a
new search order) says so and records new ones with ``python -m tests.support.corpus``. A
plan that says the clock cut its work (``solver.cut_by_clock``) is made again: only the
others are promised to be the same byte for byte.
"""

from __future__ import annotations

import pytest

import planner
from planner.core.models import Plan, PlanRequest
from planner.pipeline.warm import ensure_warm
from tests.support.corpus import corpus, load_fixture, plan_hash

CUT_TRIES = 3  # plans of a request cut by the clock before its last one is compared


@pytest.mark.slow
def test_corpus_plans_match_the_fixture() -> None:
    ensure_warm(planner.plan)
    expected = load_fixture()
    cases = corpus()
    assert sorted(expected) == sorted(name for name, _ in cases)
    changed: list[str] = []
    for name, request in cases:
        plan = _uncut_plan(request)
        assert planner.validate(request, plan).valid, name
        if plan_hash(plan) != expected[name]:
            changed.append(name)
    assert not changed, f"plans changed: {changed}"


def _uncut_plan(request: PlanRequest) -> Plan:
    """The plan of ``request`` with its work not cut by the clock: the same request gets the
    same plan byte for byte unless the plan says the clock cut its work (a machine too busy
    for its time limit), so such a plan is made again, up to ``CUT_TRIES`` times."""
    for _ in range(CUT_TRIES - 1):
        plan = planner.plan(request)
        if not plan.solver.cut_by_clock:
            return plan
    return planner.plan(request)
