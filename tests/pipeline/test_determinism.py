"""Plans of a fixed corpus are byte-identical to the committed hashes (tests/data).

The hashes are of this version's plans: a change meant to leave plans alone (a refactor, a
faster data structure) must keep them, and one meant to change plans (a stronger bound, a
new search order) says so and records new ones with ``python -m tests.support.corpus``.
"""

from __future__ import annotations

import pytest

import planner
from planner.pipeline.warm import ensure_warm
from tests.support.corpus import corpus, load_fixture, plan_hash


@pytest.mark.slow
def test_corpus_plans_match_the_fixture() -> None:
    ensure_warm(planner.plan)
    expected = load_fixture()
    cases = corpus()
    assert sorted(expected) == sorted(name for name, _ in cases)
    changed: list[str] = []
    for name, request in cases:
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid, name
        if plan_hash(plan) != expected[name]:
            changed.append(name)
    assert not changed, f"plans changed: {changed}"
