"""Memory grows with what a request says, not with its numbers; the time limit bounds the
whole plan. Memory bounds run in a child process under an address-space cap, so a structure
that grows with edges or bytes fails with MemoryError there."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

import planner
import planner.core.clock
import planner.pipeline.checks
import planner.pipeline.facade
import planner.solvers.greedy
from planner.api.limits import check_emulation_budget
from planner.core.errors import InternalError, RequestError
from planner.core.graph import build_graph
from planner.core.io import parse_request
from planner.core.models import PlanRequest
from planner.generate import random_request
from planner.solvers._place import place
from planner.solvers.greedy import affordable, order_by_start, run
from planner.validators.cost import emulation_cost
from tests.support.paths import ROOT

ROOT = ROOT
CAP_BYTES = 3 << 30  # address space of the child: imports take about 1 GiB of it

_CAPPED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
import planner
{body}
"""


def _run_capped(body: str) -> str:
    """Run ``body`` (after ``import planner``) in a child whose address space is capped;
    its stdout. Fails the test with the child's last error line."""
    code = _CAPPED.format(cap=CAP_BYTES, body=textwrap.dedent(body))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr.strip().splitlines()[-3:]
    return done.stdout


@pytest.mark.slow
def test_all_overlapping_100k_plans_and_validates_under_a_memory_cap() -> None:
    # A clique of 5e9 edges: neighbour lists alone would need 40 GB.
    out = _run_capped(
        """
        from planner.generate import all_overlapping
        request = all_overlapping(100_000)
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        print(plan.status, plan.arena_bytes == sum(b.size for b in request.buffers))
        """
    )
    assert out.split() == ["optimal", "True"]


def _huge_patterned() -> dict[str, Any]:
    """Two sequential 128 MiB buffers with the same thread mapping (a ~700-byte request)."""
    size = 128 << 20
    access = {"bytes": 4, "index": {"threadIdx.x": 1, "i": 256}, "loops": {"i": 1024}}
    return {
        "name": "huge",
        "block": [256],
        "options": {"sync": "existing"},
        "buffers": [
            {
                "id": ident,
                "size": size,
                "start": start,
                "end": start + 2,
                "accesses": [
                    {"op": "write", "at": start, **access},
                    {"op": "read", "at": start + 1, **access},
                ],
            }
            for ident, start in (("a", 0), ("b", 2))
        ],
    }


@pytest.mark.slow
def test_owner_maps_of_two_128_mib_buffers_fit_under_a_memory_cap() -> None:
    out = _run_capped(
        f"""
        request = {_huge_patterned()!r}
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        print(plan.arena_bytes, plan.aliases)
        """
    )
    # Same thread on every byte both touch: b sits over a with no barrier.
    assert out.strip() == f"{128 << 20} [['a', 'b']]"


def test_broadcast_accesses_count_in_the_emulation_budget() -> None:
    request = parse_request(
        {
            "block": [128],
            "capacity": 256 << 20,
            "buffers": [
                {
                    "id": "w",
                    "size": 128 << 20,
                    "start": 0,
                    "end": 2,
                    "accesses": [{"op": "read", "at": 1, "bytes": 4, "threads": "all"}],
                }
            ],
        }
    )
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    # Two stand-in threads over every byte of the buffer.
    assert emulation_cost(request, plan, 16).total >= 2 * (128 << 20)
    with pytest.raises(RequestError) as caught:
        check_emulation_budget(request, plan, 1 << 24)
    (error,) = caught.value.errors
    assert error["type"] == "emulation_budget_exceeded"
    assert "limit of 16777216" in error["msg"]


def test_the_pipeline_consults_the_deadline_before_optional_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = random_request(800, overlap=0.2, seed=3)  # one heuristic at a time
    planner.plan(random_request(50))  # compiled code loaded before the clock is faked
    readings = iter([0.0])  # the call's start; every later reading is far past any limit
    fake = lambda: next(readings, 1e9)  # noqa: E731
    monkeypatch.setattr(planner.pipeline.facade, "now", fake)  # read first, by the call itself
    monkeypatch.setattr(planner.core.clock, "now", fake)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    # Only the first heuristic: the rest of the portfolio and every exact method skipped.
    assert [t.name for t in plan.solver.tried] == ["greedy:size/best-fit"]
    monkeypatch.undo()
    full = planner.plan(request)
    assert len(full.solver.tried) > 1


def test_heuristics_are_chosen_by_counts_and_the_limit() -> None:
    g = build_graph(random_request(20_000, seed=1))
    names = list(planner.solvers.greedy.HEURISTICS)
    assert affordable(g, names, None) == names
    tight = affordable(g, names, 1e-9)
    assert tight == ["start/first-fit"]  # the cheapest: a sweep without neighbour lists
    some = affordable(g, names, 0.5)
    more = affordable(g, names, 5.0)
    assert set(some) <= set(more)
    assert affordable(g, names, 0.5) == some  # the same counts, the same choice


def test_past_the_conflict_limit_only_the_sweep_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner.solvers.greedy, "NEIGHBOUR_EDGES_MAX", 10)
    request = random_request(200, overlap=0.5, seed=2)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    greedy = [t.name.removeprefix("greedy:") for t in plan.solver.tried if "greedy:" in t.name]
    assert greedy[0] == "start/first-fit"
    assert all(h == "start/first-fit" or h.endswith("/skyline") for h in greedy)
    named = request.model_copy(
        update={"options": request.options.model_copy(update={"solver": "greedy:size/best-fit"})}
    )
    with pytest.raises(RequestError) as caught:
        planner.plan(named)
    (error,) = caught.value.errors
    assert error["type"] == "conflict_budget_exceeded"
    assert "limit of 10" in error["msg"]


@pytest.mark.parametrize("seed", range(40))
def test_the_sweep_places_as_first_fit_over_neighbour_lists(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    g = build_graph(random_request(n, overlap=float(rng.choice([0.01, 0.2, 1.0])), seed=seed))
    pinned = np.full(n, -1, dtype=np.int64)
    alignment = rng.choice([1, 8, 16, 128], size=n).astype(np.int64)
    for i in rng.choice(n, size=min(n, 3), replace=False):
        pinned[i] = int(rng.integers(0, 40)) * alignment[i]
    sizes = rng.integers(1, 300, size=n).astype(np.int64)
    g = replace(g, size=sizes, alignment=alignment, pinned=pinned)
    order = order_by_start(g)
    fixed = g.pinned[order] >= 0
    order = np.concatenate([order[fixed], order[~fixed]])
    pos, hi, back_ptr, back = g.neighbours
    expected = place(
        order, g.size, g.alignment, g.pinned, pos, g.by_start, hi, back_ptr, back, False, 0
    )
    assert (run(g, "start/first-fit") == expected).all()


def test_memory_errors_surface_as_internal_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    request = random_request(20, seed=4)
    plan = planner.plan(request)

    def exhausted(*_: object, **__: object) -> None:
        raise MemoryError

    monkeypatch.setattr(planner.pipeline.facade, "validate_plan", exhausted)
    monkeypatch.setattr(planner.pipeline.checks, "validate_plan", exhausted)
    with pytest.raises(InternalError, match="out of memory while validating"):
        planner.validate(request, plan)
    with pytest.raises(InternalError, match="out of memory while planning"):
        planner.plan(request)


def test_buffers_without_accesses_count_their_synthetic_pattern() -> None:
    # No access patterns: the emulator writes and reads every element (4-byte elements when
    # the size allows), so a request of a few large buffers cannot slip past the budget.
    request = PlanRequest.model_validate(
        {
            "block": [128, 1, 1],
            "buffers": [
                {"id": "a", "size": 1 << 20, "start": 0, "end": 2},
                {"id": "b", "size": 3, "start": 2, "end": 4},
            ],
        }
    )
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    # Each of the write and the read covers every byte of a.
    assert emulation_cost(request, plan, 16).total >= 2 * (1 << 20)
    with pytest.raises(RequestError) as caught:
        check_emulation_budget(request, plan, 1 << 18)
    assert caught.value.errors[0]["type"] == "emulation_budget_exceeded"
