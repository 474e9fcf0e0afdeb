"""``options.gap_tolerance``: the exact methods do not run, or stop, once the plan is that close
to the bound, and the plan says why its search stopped (``solver.stopped``)."""

from __future__ import annotations

from typing import Any

import pytest

import planner
from planner.core.budget import SMALL_GAP_SECONDS
from planner.core.errors import RequestError
from planner.core.io import request_sha256
from planner.core.models import PlanRequest
from planner.solvers.exact import allowed_gap, exact_budget

pytest.importorskip("ortools")

BIG = 10**9  # bytes: a whole-model buffer, so that a millionth of the bound is 1000 bytes


def _fragmented(k: int, base: int = 0, **options: Any) -> dict[str, Any]:
    """A pin at ``base + k`` leaves a hole of ``k`` bytes above ``base`` that f (``2k``) cannot
    use: greedy's plan (``base + 4k``) is the optimum, ``k`` above the bound (``base + 3k``),
    and only an exact method proves it. ``base`` > 0 puts a pinned buffer of that many bytes
    under everything."""
    buffers: list[dict[str, Any]] = [
        {"id": "p", "size": k, "start": 0, "end": 2, "offset": base + k},
        {"id": "f", "size": 2 * k, "start": 0, "end": 2},
        {"id": "g", "size": 3 * k, "start": 2, "end": 3},
    ]
    if base:
        buffers.append({"id": "w", "size": base, "start": 0, "end": 3, "offset": 0})
    return {"buffers": buffers, "options": {"sync": "none", "time_limit": 2.0, **options}}


def _planned(request: dict[str, Any]) -> planner.Plan:
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return plan


def _exact_ran(plan: planner.Plan) -> bool:
    return any(t.name.startswith("exact:") for t in plan.solver.tried)


def test_allowed_gap_by_kind() -> None:
    assert allowed_gap(0, 10**12, 1024) == 0  # a proof, whatever the sizes
    assert allowed_gap(100, 5, 1) == 100  # bytes
    assert allowed_gap(0.25, 1000, 1) == 250  # a fraction of the bound
    # Default: a gap below the largest alignment, or below a millionth of the bound.
    assert allowed_gap(None, 4096, 128) == 127
    assert allowed_gap(None, 4096, 1) == 0
    assert allowed_gap(None, 3 * BIG, 16) == 3000
    assert allowed_gap(None, 999_999, 1) == 0


@pytest.mark.parametrize(("k", "tolerance"), [(10, 10), (10, 9), (10, 0.34), (10, 0.33)])
def test_a_gap_within_the_tolerance_runs_no_exact_method(k: int, tolerance: int | float) -> None:
    plan = _planned(_fragmented(k, gap_tolerance=tolerance))
    assert plan.arena_bytes == 4 * k
    assert plan.lower_bound == 3 * k
    within = tolerance == k or (isinstance(tolerance, float) and tolerance * 3 * k >= k)
    if within:
        assert plan.solver.stopped == "within_tolerance"
        assert plan.status == "feasible"
        assert not plan.solver.proved_optimal
        assert not _exact_ran(plan)
    else:  # one byte short: the exact methods run until they prove a bound close enough
        assert _exact_ran(plan)
        assert plan.solver.bound > 3 * k
        assert plan.arena_bytes - plan.solver.bound <= allowed_gap(tolerance, 3 * k, 1)


def test_exact_budget_at_the_edges_of_the_default() -> None:
    # A gap below the largest alignment gets a short budget; one at it, the whole time.
    assert exact_budget(None, 127, 4096, 128, 10.0) == (SMALL_GAP_SECONDS, 0)
    assert exact_budget(None, 128, 4096, 128, 10.0) == (10.0, 0)
    assert exact_budget(None, 127, 4096, 128, 0.1) == (0.1, 0)  # never more than given
    # A millionth of the bound: the exact methods stop there (and do not start below it).
    assert exact_budget(None, 5000, 3 * BIG, 1, 10.0) == (10.0, 3000)
    # A tolerance given is kept, with the whole time.
    assert exact_budget(16, 5, 4096, 128, 10.0) == (10.0, 16)
    assert exact_budget(0, 5, 4096, 128, 10.0) == (10.0, 0)


@pytest.mark.parametrize("k", [7, 8])
def test_default_closes_a_gap_below_the_alignment_on_a_short_budget(k: int) -> None:
    request = _fragmented(k)
    # A buffer aligned to 8 bytes, alone in time: the largest alignment in the request.
    request["buffers"].append({"id": "z", "size": 8, "start": 5, "end": 6, "alignment": 8})
    plan = _planned(request)
    # Kernel-sized: the short budget (gap 7) is enough to prove what the full one (gap 8)
    # proves.
    assert plan.arena_bytes == 4 * k
    assert _exact_ran(plan)
    assert plan.solver.stopped == "proved"


@pytest.mark.parametrize("k", [1000, 1001])
def test_default_tolerates_a_millionth_of_a_whole_model_bound(k: int) -> None:
    plan = _planned(_fragmented(k, base=BIG))
    assert plan.lower_bound == BIG + 3 * k
    assert plan.arena_bytes == BIG + 4 * k
    # (BIG + 3k) // 10**6 is 1000 bytes for both: a gap of 1000 is tolerated, 1001 is not
    # (the search runs until it has proved a bound close enough).
    assert plan.solver.stopped == "within_tolerance"
    assert _exact_ran(plan) == (k == 1001)
    assert (plan.solver.bound > plan.lower_bound) == (k == 1001)


def test_zero_tolerance_asks_for_the_proof() -> None:
    plan = _planned(_fragmented(1000, base=BIG, gap_tolerance=0))
    assert plan.solver.stopped == "proved"
    assert plan.status == "optimal"


def test_a_plan_over_the_capacity_is_never_within_tolerance() -> None:
    # Greedy's 4k is over a capacity of 3k + 1 however large the tolerance; the exact methods
    # still run and prove that nothing fits.
    k = 10
    plan = _planned({**_fragmented(k, gap_tolerance=100 * k), "capacity": 3 * k + 1})
    assert plan.status == "infeasible"
    assert plan.solver.stopped == "proved"


def test_greedy_alone_stops_on_its_budget() -> None:
    plan = _planned(_fragmented(10, solver="greedy", gap_tolerance=0))
    assert plan.status == "feasible"
    assert plan.solver.stopped == "budget"


def test_the_tolerance_stops_a_running_search() -> None:
    # The search bisects from the bound up; with a tolerance it stops at the first plan
    # within it of the bound it has proved, instead of deciding every capacity below.
    from planner.core.graph import build_graph
    from planner.solvers.search import solve_search

    req = PlanRequest.model_validate(_fragmented(64))
    g = build_graph(req, "none")
    bound = g.lower_bound.bytes
    exact = solve_search(g, capacity=None, lower_bound=bound, hint=None, time_limit=1.0)
    loose = solve_search(
        g, capacity=None, lower_bound=bound, hint=None, time_limit=1.0, tolerance=10**6
    )
    assert exact.proved_optimal
    assert exact.arena_bytes == 4 * 64
    assert loose.arena_bytes is not None
    assert not loose.proved_optimal


@pytest.mark.parametrize(
    "value", [-1, 1.0, 1.5, -0.1, True, "16", float("nan")], ids=lambda v: repr(v)
)
def test_rejects_a_bad_tolerance(value: object) -> None:
    with pytest.raises(RequestError) as caught:
        planner.plan({**_fragmented(1), "options": {"gap_tolerance": value}})
    assert list(caught.value.errors[0]["loc"])[:2] == ["options", "gap_tolerance"]


def test_an_absent_tolerance_leaves_the_request_hash_alone() -> None:
    request = PlanRequest.model_validate(_fragmented(4))
    assert "gap_tolerance" not in request.model_dump_json()
    given = PlanRequest.model_validate(_fragmented(4, gap_tolerance=0))
    assert request_sha256(given) != request_sha256(request)
