"""Properties over the new request fields: random loops, branches and live ranges on random requests
(pins, candidates, caps, capacities, every sync policy) plan safely on every unrolled
execution; empty loops and branches change nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from tests.support.loops_brute import check
from tests.support.strategies import request_dicts

# What a request with control flow may be refused for at plan time (all 422s).
REFUSALS = {"unprotected_reuse", "ranges_overlap", "too_few_barriers"}


@st.composite
def looped(draw: st.DrawFn) -> dict[str, Any]:
    """A random request with up to two nested loops, an if/else, or some buffers split in
    two ranges."""
    data = draw(request_dicts(max_buffers=7))
    top = max([b["end"] for b in data["buffers"]] + [2])
    loops: list[dict[str, Any]] = []
    s = draw(st.integers(0, top - 1))
    e = draw(st.integers(s + 1, top))
    loops.append({"start": s, "end": e, "trips": draw(st.sampled_from([None, 1, 2, 5]))})
    if e - s >= 3 and draw(st.booleans()):
        s2 = draw(st.integers(s, e - 2))
        e2 = draw(st.integers(s2 + 1, e - 1 if s2 == s else e))
        loops.append({"start": s2, "end": e2, "trips": draw(st.sampled_from([None, 3]))})
    branches: list[dict[str, Any]] = []
    if top >= 3 and draw(st.booleans()):
        # An if/else; buffers that would straddle an arm grow over the whole branch, and
        # the branch is left out when a loop straddles it.
        bs = draw(st.integers(0, top - 2))
        bm = draw(st.integers(bs + 1, top - 1))
        be = draw(st.integers(bm + 1, top))
        arms = [[bs, bm], [bm, be]]
        if all(
            lp["end"] <= bs
            or be <= lp["start"]
            or (lp["start"] <= bs and be <= lp["end"])
            or any(s <= lp["start"] and lp["end"] <= e for s, e in arms)
            for lp in loops
        ):
            branches.append({"arms": arms})
            for b in data["buffers"]:
                s, e = b["start"], b["end"]
                inside = any(a0 <= s and e <= a1 for a0, a1 in arms)
                if not inside and s < be and bs < e:
                    b["start"], b["end"] = min(s, bs), max(e, be)
    for b in data["buffers"]:
        if not branches and b["end"] - b["start"] >= 3 and draw(st.booleans()):
            m1 = draw(st.integers(b["start"] + 1, b["end"] - 2))
            m2 = draw(st.integers(m1, b["end"] - 1))
            b["ranges"] = [[b.pop("start"), m1], [m2, b.pop("end")]]
    return {**data, "loops": loops, "branches": branches}


@settings(max_examples=60, deadline=None)
@given(looped())
def test_every_plan_with_loops_and_ranges_is_safe(data: dict[str, Any]) -> None:
    try:
        req = parse_request(data)
        plan = planner.plan(req)
    except RequestError as exc:
        if not {e["type"] for e in exc.errors} <= REFUSALS:
            raise
        return
    assert planner.validate(req, plan).valid
    problems, peak = check(req, plan)
    assert not problems, problems[:3]
    opts = req.options
    if opts.sync == "existing" or (opts.sync == "insert" and opts.max_new_barriers == 0):
        # No barrier can be added: the bound holds each piece until the next barrier.
        assert peak <= plan.lower_bound <= plan.arena_bytes
    elif opts.sync == "insert" and opts.max_new_barriers is not None:
        # Few new barriers: pieces may be held past their last access (test_loops_bound
        # checks this bound against the best arena under the cap).
        assert peak <= plan.lower_bound <= plan.arena_bytes
    else:
        assert plan.lower_bound == peak
    cap = req.options.max_new_barriers
    assert cap is None or len(plan.barriers.inserted) <= cap
    assert plan.barriers.static == len(set(plan.barriers.existing) | set(plan.barriers.inserted))
    assert plan.barriers.executions is not None
    assert plan.barriers.executions >= plan.barriers.static


@settings(max_examples=25, deadline=None)
@given(request_dicts(max_buffers=8))
def test_empty_loops_and_branches_change_nothing(data: dict[str, Any]) -> None:
    plain = planner.plan(data)
    assert planner.validate(data, plain).valid
    explicit = planner.plan({**data, "loops": [], "branches": []})
    assert explicit.model_dump_json() == plain.model_dump_json()
    assert plain.barriers.executions is None
    assert '"executions"' not in plain.model_dump_json()
