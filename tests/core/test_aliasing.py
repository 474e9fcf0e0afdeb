"""Thread-local aliasing on the planner's side: owner compatibility, chains, and plans."""

from __future__ import annotations

from typing import Any

import numpy as np

import planner
from planner.core.aliasing import Owners, alias_chains, merge_chains, sharing_pairs
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.validators import validate_plan
from tests.support.patterned import THREADS, TILE, tile


def _request(*buffers: dict[str, Any], sync: str = "existing", **extra: Any) -> PlanRequest:
    return PlanRequest.model_validate(
        {"block": [THREADS], "buffers": list(buffers), "options": {"sync": sync}, **extra}
    )


def test_compatible_needs_the_same_thread_per_byte() -> None:
    request = _request(
        tile("a", 0, 2, "row", "row"),
        tile("b", 2, 4, "row", "row"),
        tile("c", 4, 6, "column", "row"),
        {"id": "d", "size": TILE, "start": 6, "end": 8},  # no patterns: any thread
    )
    owners = Owners(request, [])
    assert owners.compatible(0, 1, 0)
    assert owners.compatible(0, 1, 128)  # one row up: row 0 of b over row 1 of a
    assert not owners.compatible(0, 1, 4)  # one float up: thread t over thread t + 1
    assert not owners.compatible(1, 2, 0)
    assert not owners.compatible(2, 3, 0)
    assert owners.compatible(0, 1, TILE)  # nothing shared


def test_chains_place_buffers_exactly_over_dead_ones() -> None:
    request = _request(
        tile("a", 0, 2, "row", "row"),
        tile("b", 2, 4, "row", "row"),
        tile("c", 4, 6, "row", "row"),
        tile("x", 4, 6, "column", "column"),
    )
    g = build_graph(request)
    parent = alias_chains(g, Owners(request, []))
    assert parent[:3] == [-1, 0, 1]
    assert parent[3] == -1  # x has other threads: it cannot take a's or b's bytes
    merged, node = merge_chains(g, parent)
    assert merged.n == 2
    assert node.tolist() == [0, 0, 0, 1]
    assert merged.occupied_end.tolist()[0] == 6


def test_existing_sync_aliases_instead_of_stacking() -> None:
    request = _request(
        tile("a", 0, 2, "row", "row"),
        tile("b", 2, 4, "row", "row"),
        tile("c", 4, 6, "row", "row"),
    )
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    assert plan.arena_bytes == TILE
    assert plan.aliases == [["a", "b"], ["a", "c"], ["b", "c"]]
    # Different threads in c: it must stack (no barrier may be inserted).
    other = _request(
        tile("a", 0, 2, "row", "row"),
        tile("b", 2, 4, "row", "row"),
        tile("c", 4, 6, "column", "row"),
    )
    plan = planner.plan(other)
    assert validate_plan(other, plan).valid
    assert plan.arena_bytes == 2 * TILE
    assert plan.aliases == [["a", "b"]]


def test_sharing_pairs_lists_every_sequential_pair() -> None:
    request = _request(
        tile("a", 0, 2, "row", "row"),
        tile("b", 1, 4, "row", "row"),
        tile("c", 4, 6, "row", "row"),
    )
    offsets = np.array([0, TILE, 0], dtype=np.int64)
    sizes = np.array([TILE] * 3, dtype=np.int64)
    pairs = sharing_pairs(request, offsets, sizes)
    assert [(r.previous, r.next, r.after, r.before) for r in pairs] == [(0, 2, 2, 4)]
