"""Plans of small random programs with loops, branches and live ranges, checked on every
unrolled execution (each loop body twice, every choice of arms): no overlap, no reuse without
a barrier, and a lower bound no execution's peak of live bytes is below."""

from __future__ import annotations

import random

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from tests.support.loops_brute import check, random_request

SEEDS = 120


@pytest.mark.slow
def test_random_programs_are_safe_on_every_execution() -> None:
    rng = random.Random(20260)
    planned = 0
    for _ in range(SEEDS):
        data = random_request(rng)
        req = parse_request(data)
        if not req.has_control_flow:
            continue  # straight-line: the interval path, tested on its own
        try:
            plan = planner.plan(req)
        except RequestError as exc:
            # Only a reuse of a buffer's own bytes that no allowed barrier protects (sync
            # "existing"), or two ranges of one buffer live at once over a loop.
            kinds = {e["type"] for e in exc.errors}
            if not kinds <= {"unprotected_reuse", "ranges_overlap"}:
                raise
            continue
        planned += 1
        assert planner.validate(req, plan).valid, data
        problems, peak = check(req, plan)
        assert not problems, (data, plan.barriers, problems[:3])
        if req.options.sync == "existing":
            # Each piece held until the next barrier: checked against the best arena in
            # test_loops_bound.
            assert peak <= plan.lower_bound, data
        else:
            assert plan.lower_bound <= peak, data  # a bound no execution refutes
            assert plan.lower_bound == peak, data  # and the peak of the worst execution
        assert plan.arena_bytes >= plan.lower_bound
    assert planned >= SEEDS // 2
