"""The segment-tree gap filling (``solvers._tree.place_tree``, split into named steps)
places as recorded: per case the digest of its offsets in tests/solvers/data/tree_offsets.json
(written by running this file), every plan valid. Both ways of reading a query's runs are
recorded: the merged fit (offsets in few bits) and the gathered runs (``offset_bits`` set
high: packed keys for a few runs, an argsort for more)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from planner.core.graph import InterferenceGraph
from planner.solvers import greedy
from planner.solvers._tree import place_tree
from tests.support.bruteforce import assert_valid_offsets
from tests.support.kernel_cases import kernel_case
from tests.support.paths import TESTS

RECORDED = TESTS / "solvers" / "data" / "tree_offsets.json"
FAMILIES = ("guillotine", "mixed", "sparse", "random-wide", "pinwheel")
SIZES = (40, 600)  # buffers
GATHERED_BITS = 60  # offset bits that send every query to the gathered runs


def _offsets(g: InterferenceGraph, best_fit: bool, gathered: bool) -> np.ndarray:
    """``place_tree``'s offsets in size order, pinned buffers first."""
    order = greedy.ordering_of("size")(g)
    pinned = g.pinned[order] >= 0
    order = np.concatenate([order[pinned], order[~pinned]])
    bits = GATHERED_BITS if gathered else greedy._offset_bits(g)
    found: np.ndarray = place_tree(
        order, g.start, g.occupied_end, g.size, g.alignment, g.pinned, best_fit, bits
    )
    return found


def record() -> dict[str, str]:
    """Per family, size, pinning, fit and way of reading: the digest of the offsets, each
    plan checked."""
    out: dict[str, str] = {}
    for k, family in enumerate(FAMILIES):
        for n in SIZES:
            for pins in (False, True):
                request, g = kernel_case(family, n, 200 + k, pins)
                for best_fit in (False, True):
                    for gathered in (False, True):
                        offsets = _offsets(g, best_fit, gathered).astype(np.int64)
                        assert_valid_offsets(request, g, offsets)
                        digest = hashlib.sha256(offsets.tobytes()).hexdigest()[:16]
                        name = (
                            f"{family}-{n}{'+pins' if pins else ''}"
                            f"-{'best' if best_fit else 'first'}"
                            f"{'-gathered' if gathered else ''}"
                        )
                        out[name] = digest
    return out


def test_the_tree_places_as_recorded() -> None:
    expected = json.loads(RECORDED.read_text())
    found = record()
    assert len(found) == len(expected) == len(FAMILIES) * len(SIZES) * 2 * 2 * 2
    differing = {k: (found[k], v) for k, v in expected.items() if found.get(k) != v}
    assert not differing


if __name__ == "__main__":
    RECORDED.write_text(json.dumps(record(), indent=1, sort_keys=True) + "\n")
