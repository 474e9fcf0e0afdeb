"""Plans of a fixed corpus are byte-identical to the committed hashes (tests/data).

The hashes were taken before the memory and time-limit work on the graph, the owner maps and
the greedy portfolio; those changes must leave every plan that already worked unchanged.
"""

from __future__ import annotations

import pytest

import planner
from planner.warm import ensure_warm
from tests.corpus import corpus, load_fixture, plan_hash


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
