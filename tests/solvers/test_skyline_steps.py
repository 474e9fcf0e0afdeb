"""The skyline kernel split into named steps searches exactly as the single loop it replaced:
per member, capacity and node budget the same status, node count and offsets as recorded
from that loop (tests/solvers/data/skyline_nodes.json, written by ``record`` on the kernel
before the split)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from planner.core.graph import build_graph
from planner.families import family_instance
from planner.solvers._search_kernel import FOUND
from planner.solvers.search import _decide, _members, _Skyline
from tests.support.bruteforce import assert_valid_offsets
from tests.support.paths import TESTS

RECORDED = TESTS / "solvers" / "data" / "skyline_nodes.json"
CASES = [("guillotine", 120, 11), ("mixed", 150, 13), ("sparse", 160, 15), ("random-wide", 320, 17)]
NODES = 4000


def record() -> dict[str, list[int | str]]:
    """Per skyline member of each case, at the bound and 2% above: (status, nodes used, the
    offsets' digest)."""
    out: dict[str, list[int | str]] = {}
    for family, n, seed in CASES:
        request = family_instance(family, n, seed).request
        # Checked as the kernel sees it: lifetimes only, the caller synchronizing, no
        # capacity but the one each run is given.
        request = request.model_copy(
            update={
                "capacity": None,
                "target": None,
                "options": request.options.model_copy(update={"sync": "none"}),
            }
        )
        g = build_graph(request, "none")
        bound = g.aligned_bound.bytes
        members = [m for m in _members(g) if isinstance(m, _Skyline)]
        for k, m in enumerate(members):
            for capacity in (bound, bound + bound // 50):
                status, offsets, used = _decide(m, capacity, NODES)
                if status == FOUND:  # a plan: within the capacity and valid
                    assert int((offsets + g.size).max()) <= capacity
                    assert_valid_offsets(request, g, offsets)
                digest = hashlib.sha256(np.asarray(offsets, dtype=np.int64).tobytes()).hexdigest()
                out[f"{family}-{n}-{seed}/{k}/{capacity}"] = [status, used, digest[:16]]
    return out


def test_the_split_kernel_searches_as_the_loop_it_replaced() -> None:
    expected = json.loads(RECORDED.read_text())
    found = record()
    assert len(found) == len(expected) >= 16
    assert {status for status, _, _ in expected.values()} >= {1, -1}  # plans and budgets
    differing = {k: (found[k], v) for k, v in expected.items() if found.get(k) != v}
    assert not differing
