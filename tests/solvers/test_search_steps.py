"""The canonical search kernel searches as recorded: per order, capacity and node budget the
same status, node count, offsets, padding checks and doomed children passed over as
tests/solvers/data/search_nodes.json (written by ``record``), alone, under a limit another
member lowered, keeping pace with other members, and over the whole portfolio taking turns.
A change to the kernel's code that keeps its search (a rewrite into named steps, say) keeps
the recording; one that changes the search re-records it and says which orders moved."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from planner.core.graph import InterferenceGraph
from planner.core.models import PlanRequest
from planner.solvers._pace_kernel import member_cap
from planner.solvers._search_kernel import FOUND, STATS
from planner.solvers.search import STOPPED, _decide, _decide_all, _Instance, _members
from tests.support.bruteforce import assert_valid_offsets
from tests.support.kernel_cases import kernel_case
from tests.support.paths import TESTS

RECORDED = TESTS / "solvers" / "data" / "search_nodes.json"
# (family, buffers, seed, node budget); "+pins" pins every seventh buffer where a greedy plan
# puts it.
CASES = [
    ("guillotine", 60, 21, 3000),
    ("guillotine", 200, 22, 2000),
    ("mixed", 80, 23, 3000),
    ("mixed", 240, 24, 2000),
    ("sparse", 120, 25, 2000),
    ("random-wide", 160, 26, 2000),
    ("random-wide", 400, 27, 1000),
    ("random-narrow", 100, 28, 3000),
    ("random-narrow", 300, 29, 1500),
    ("pinwheel", 90, 30, 3000),
    ("random-narrow", 80, 31, 3000),
    ("mixed", 100, 32, 3000),
]
PINNED = {("random-narrow", 80, 31), ("mixed", 100, 32)}


def _entry(
    request: PlanRequest, g: InterferenceGraph, capacity: int, result: tuple[int, object, int]
) -> list[int | str]:
    """(status, nodes used, the offsets' digest); a plan is checked: valid, within capacity."""
    status, offsets, used = result
    offsets = np.asarray(offsets, dtype=np.int64)
    if status == FOUND:
        assert int((offsets + g.size).max()) <= capacity
        assert_valid_offsets(request, g, offsets)
    digest = hashlib.sha256(offsets.tobytes()).hexdigest()
    return [int(status), int(used), digest[:16]]


def record() -> dict[str, list[int | str]]:
    """Per case, at the bound, 1% and 4% above: each canonical order alone (with its padding
    checks), each under a limit lowered to two thirds, each keeping pace with a member that
    has stopped, and the whole portfolio taking turns."""
    out: dict[str, list[int | str]] = {}
    for family, n, seed, nodes in CASES:
        request, g = kernel_case(family, n, seed, (family, n, seed) in PINNED)
        bound = g.aligned_bound.bytes
        members = _members(g)
        canonical = [m for m in members if isinstance(m, _Instance)]
        for capacity in (bound, bound + bound // 100, bound + bound // 25):
            case = f"{family}-{n}-{seed}/{capacity}"
            for k, m in enumerate(canonical):
                stats = np.zeros(STATS, dtype=np.int64)
                alone = _decide(m, capacity, nodes, stats=stats)
                out[f"{case}/{k}"] = [*_entry(request, g, capacity, alone), *stats.tolist()]
                lowered = member_cap(2 * nodes // 3)
                capped = _decide(m, capacity, nodes, lowered)
                out[f"{case}/{k}/capped"] = _entry(request, g, capacity, capped)
                efforts = np.array([0, STOPPED], dtype=np.int64)
                pace = member_cap(nodes, 0, 1, 64, 1)
                paced = _decide(m, capacity, nodes, pace, efforts=efforts)
                out[f"{case}/{k}/paced"] = _entry(request, g, capacity, paced)
            turns = _decide_all(members, capacity, len(canonical) * nodes, parallel=False)
            out[f"{case}/turns"] = _entry(request, g, capacity, turns)
    return out


def test_the_kernel_searches_as_recorded() -> None:
    expected = json.loads(RECORDED.read_text())
    found = record()
    assert len(found) == len(expected) >= 500
    statuses = {v[0] for v in expected.values()}
    assert statuses >= {1, 0, -1}  # plans, proofs and budgets
    assert any(v[3] > 0 for v in expected.values() if len(v) > 3)  # padding checks ran
    assert any(v[6] > 0 for v in expected.values() if len(v) > 3)  # doomed children passed
    differing = {k: (found[k], v) for k, v in expected.items() if found.get(k) != v}
    assert not differing


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
