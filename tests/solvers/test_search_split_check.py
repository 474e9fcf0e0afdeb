"""In MiniMalloc's orders, the placement after which the search splits into sub-problems is
checked as MiniMalloc's solver checks it, before it decomposes: the section bound covers
every new sub-problem, each of its buffers at or above that node's floor, not only the
first sub-problem from the lowest floor. Each test decides an instance with one order that
the search, checking the first sub-problem alone, did not decide within the same nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.core.csvio import read_csv
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.families import CAPACITY, family_instance
from planner.solvers._search_kernel import FOUND
from planner.solvers.search import decide_orders
from tests.support.bruteforce import assert_valid_offsets

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "minimalloc"


def _decides(request: PlanRequest, order: str, nodes: int) -> int:
    """Nodes the search uses to fit ``request`` within the capacity with ``order`` alone;
    the plan is checked: within the capacity, aligned, and valid."""
    g = build_graph(request, "none")
    status, offsets, used = decide_orders(g, CAPACITY, (order,), nodes)
    assert status == FOUND
    assert int((offsets + g.size).max()) <= CAPACITY
    assert_valid_offsets(request, g, offsets)
    return used


def test_twa_fits_minimallocs_e_at_its_capacity() -> None:
    """MiniMalloc's TWA fits E within 1048576 bytes in 2 s; checking the first sub-problem
    alone, TWA ran out of 606 060 nodes there, and now fits it in 23 382."""
    request = read_csv((BENCHMARKS / "E.1048576.csv").read_text())
    assert _decides(request, "TWA", 30_000) < 30_000


@pytest.mark.parametrize(
    ("family", "buffers", "seed", "order", "nodes"),
    [("random-wide", 265, 114, "TWA", 900), ("random-wide", 132, 127, "WAT", 340)],
)
def test_a_split_is_checked_over_every_sub_problem(
    family: str, buffers: int, seed: int, order: str, nodes: int
) -> None:
    """Checking the first sub-problem alone, these took 1125 (TWA) and 408 (WAT) nodes; now
    672 and 273."""
    assert _decides(family_instance(family, buffers, seed).request, order, nodes) < nodes
