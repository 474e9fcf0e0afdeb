"""The time budget: the shares of every route sum to at most the whole limit, and an attempt
outside its request's schedule never runs."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

import planner
from planner.pipeline.schedule import Eligible, Kind, schedule, share
from tests.support.corpus import corpus


def _routes() -> list[Eligible]:
    return [Eligible(*flags) for flags in itertools.product([False, True], repeat=7)]


@pytest.mark.parametrize("route", _routes())
def test_every_route_shares_at_most_the_limit(route: Eligible) -> None:
    shares = schedule(route)
    assert sum(shares.values(), Fraction(0)) <= 1
    assert Kind.POLICY in shares  # the policy's plan always runs
    assert all(s > 0 for s in shares.values())


def test_routes_without_insertion_run_the_policy_alone_or_with_aliases() -> None:
    alone = schedule(Eligible(False, False, True, True, True, True))
    assert alone == {Kind.POLICY: Fraction(1)}
    paired = schedule(Eligible(False, True, False, False, False, False))
    assert set(paired) == {Kind.POLICY, Kind.ALIASES}


def test_an_unscheduled_attempt_is_refused() -> None:
    shares = schedule(Eligible(True, False, False, False, False, False))
    assert share(shares, Kind.POLICY, 8.0) == 3.0
    with pytest.raises(AssertionError, match="exact"):
        share(shares, Kind.EXACT, 8.0)


def test_varied_requests_stay_within_their_schedules() -> None:
    # Every sync policy, caps, candidates, aliases and Pareto fronts: an attempt outside the
    # schedule would raise, and every plan passes the static check.
    for name, request in corpus()[::7]:
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid, name
