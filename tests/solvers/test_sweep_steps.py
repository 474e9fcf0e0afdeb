"""The sweep placement (``solvers._place.place_sweep``, split into named steps) places as
recorded: per case the digest of its offsets in tests/solvers/data/sweep_offsets.json
(written by ``record``), every plan valid. A change that keeps its placements (a rewrite
into steps, say) keeps the recording."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.families import family_instance
from planner.solvers.greedy import portfolio, run
from tests.support.bruteforce import assert_valid_offsets
from tests.support.paths import TESTS

RECORDED = TESTS / "solvers" / "data" / "sweep_offsets.json"
FAMILIES = ("guillotine", "mixed", "sparse", "random-wide", "random-narrow", "pinwheel")
SIZES = (40, 300, 1500)  # buffers
PIN_EVERY = 7  # the pinned cases pin every seventh buffer where a greedy plan puts it


def _request(family: str, n: int, seed: int, pins: bool) -> tuple[PlanRequest, InterferenceGraph]:
    """The case as the sweep sees it: lifetimes only, no capacity; pinned if ``pins``."""
    request = family_instance(family, n, seed).request
    request = request.model_copy(
        update={
            "capacity": None,
            "target": None,
            "options": request.options.model_copy(update={"sync": "none"}),
        }
    )
    if pins:
        offsets = portfolio(build_graph(request, "none")).plan_offsets
        buffers = [
            b.model_copy(update={"offset": int(offsets[i])}) if i % PIN_EVERY == 0 else b
            for i, b in enumerate(request.buffers)
        ]
        request = request.model_copy(update={"buffers": buffers})
    return request, build_graph(request, "none")


def record() -> dict[str, str]:
    """Per family, size and pinning: the digest of the sweep's offsets, each plan checked."""
    out: dict[str, str] = {}
    for k, family in enumerate(FAMILIES):
        for n in SIZES:
            for pins in (False, True):
                request, g = _request(family, n, 100 + k, pins)
                offsets = np.asarray(run(g, "start/first-fit"), dtype=np.int64)
                assert_valid_offsets(request, g, offsets)
                digest = hashlib.sha256(offsets.tobytes()).hexdigest()[:16]
                out[f"{family}-{n}{'+pins' if pins else ''}"] = digest
    return out


def test_the_sweep_places_as_recorded() -> None:
    expected = json.loads(RECORDED.read_text())
    found = record()
    assert len(found) == len(expected) == len(FAMILIES) * len(SIZES) * 2
    differing = {k: (found[k], v) for k, v in expected.items() if found.get(k) != v}
    assert not differing


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
