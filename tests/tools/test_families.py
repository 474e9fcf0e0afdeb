"""Generated families: each tiling is a valid plan at its known optimum, reproducibly."""

from __future__ import annotations

import numpy as np
import pytest

from planner import families
from planner.core.graph import build_graph
from planner.families import CAPACITY, FAMILIES, family_instance, family_suite
from tests.support.bruteforce import assert_valid_offsets

TILINGS = tuple(f for f in FAMILIES if f in families.TILINGS)


@pytest.mark.parametrize("family", TILINGS)
@pytest.mark.parametrize("buffers", [9, 61, 301])
def test_construction_is_a_plan_at_the_optimum(family: str, buffers: int) -> None:
    for seed in (0, 1):
        inst = family_instance(family, buffers, seed)
        assert inst.optimum == CAPACITY
        assert inst.offsets is not None
        request = inst.request
        assert len(request.buffers) == buffers
        g = build_graph(request)
        # The peak of live bytes is the capacity: the construction is optimal.
        assert g.lower_bound.bytes == CAPACITY
        offsets = np.asarray(inst.offsets, dtype=np.int64)
        assert int((offsets + g.size).max()) == CAPACITY
        assert_valid_offsets(request, g, offsets)


def test_mixed_alignments_are_used_and_kept() -> None:
    inst = family_instance("mixed", 301, 3)
    aligns = {b.alignment for b in inst.request.buffers}
    assert aligns == {16, 128, 1024}
    assert inst.offsets is not None
    for b, o in zip(inst.request.buffers, inst.offsets, strict=True):
        assert b.alignment is not None
        assert o % b.alignment == 0


@pytest.mark.parametrize("family", ["random-narrow", "random-wide"])
def test_random_families_peak_at_the_capacity(family: str) -> None:
    inst = family_instance(family, 350, 4)
    g = build_graph(inst.request)
    assert g.lower_bound.bytes == CAPACITY
    assert inst.optimum is None
    assert all(b.size % 1024 == 0 for b in inst.request.buffers)


def test_same_seed_same_request_other_seed_other_request() -> None:
    for family in FAMILIES:
        a = family_instance(family, 150, 5).request.model_dump()
        b = family_instance(family, 150, 5).request.model_dump()
        c = family_instance(family, 150, 6).request.model_dump()
        assert a == b
        assert a["buffers"] != c["buffers"]


def test_suite_draws_counts_in_range() -> None:
    suite = family_suite("guillotine", 6, (150, 450), 11)
    assert len(suite) == 6
    assert all(150 <= len(i.request.buffers) <= 450 for i in suite)
    assert len({i.name for i in suite}) == 6


def test_bad_family_and_count_are_named() -> None:
    with pytest.raises(ValueError, match="family must be one of"):
        family_instance("spiral", 100, 0)
    with pytest.raises(ValueError, match="buffers must be in"):
        family_instance("guillotine", 2, 0)
