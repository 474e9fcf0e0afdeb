"""The sweep placement (``solvers._place.place_sweep``, split into named steps) places as
recorded: per case the digest of its offsets in tests/solvers/data/sweep_offsets.json
(written by ``record``), every plan valid. A change that keeps its placements (a rewrite
into steps, say) keeps the recording."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from planner.solvers.greedy import run
from tests.support.bruteforce import assert_valid_offsets
from tests.support.kernel_cases import kernel_case
from tests.support.paths import TESTS

RECORDED = TESTS / "solvers" / "data" / "sweep_offsets.json"
FAMILIES = ("guillotine", "mixed", "sparse", "random-wide", "random-narrow", "pinwheel")
SIZES = (40, 300, 1500)  # buffers


def record() -> dict[str, str]:
    """Per family, size and pinning: the digest of the sweep's offsets, each plan checked."""
    out: dict[str, str] = {}
    for k, family in enumerate(FAMILIES):
        for n in SIZES:
            for pins in (False, True):
                request, g = kernel_case(family, n, 100 + k, pins)
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
