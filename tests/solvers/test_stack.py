"""The padding check: can buffers live together stack with at most so much padding?"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.solvers._stack_kernel import new_memo, stack_fits
from planner.solvers.bounds import stack_height

I64 = np.int64


def _least_padding(size: list[int], alignment: list[int], start: int) -> int:
    """Brute force: the least padding over every order, each buffer at the lowest aligned
    offset above the one before, from ``start``."""
    best = None
    for order in itertools.permutations(range(len(size))):
        top = start
        for i in order:
            top = -(-top // alignment[i]) * alignment[i] + size[i]
        pad = top - start - sum(size)
        best = pad if best is None else min(best, pad)
    return 0 if best is None else best


def _call(
    size: list[int],
    alignment: list[int],
    start: int,
    slack: int,
    memo: np.ndarray,
    steps: int,
    chosen: list[int] | None = None,
) -> tuple[bool, int]:
    """The check on the buffers ``chosen`` (all by default) of the universe ``size`` and
    ``alignment``, listed as the search lists them: by class, then index."""
    period = max(alignment, default=1)
    cls = [a * period + s % period for s, a in zip(size, alignment, strict=True)]
    picked = range(len(size)) if chosen is None else chosen
    members = np.asarray(sorted(picked, key=lambda i: (cls[i], i)), dtype=I64)
    return stack_fits(
        members,
        members.size,
        np.asarray(cls, dtype=I64),
        np.asarray(size, dtype=I64),
        np.asarray(alignment, dtype=I64),
        period,
        start,
        slack,
        steps,
        memo,
    )


buffers = st.lists(
    st.tuples(st.integers(1, 40), st.sampled_from([1, 2, 8, 16, 32])), min_size=0, max_size=6
)


@settings(max_examples=150, deadline=None)
@given(buffers, st.integers(0, 63))
def test_agrees_with_every_order(pairs: list[tuple[int, int]], start: int) -> None:
    size = [s for s, _ in pairs]
    alignment = [a for _, a in pairs]
    least = _least_padding(size, alignment, start)
    # Each table is shared by every call below, as the search shares it; the one-row table
    # remembers a single state.
    for memo in (new_memo(), new_memo(needed=False)):
        for slack in range(max(0, least - 3), least + 3):
            fits, steps = _call(size, alignment, start, slack, memo, 1_000_000)
            assert fits == (least <= slack), (slack, least)
            assert steps <= 1_000_000
        assert not _call(size, alignment, start, -1, memo, 1_000_000)[0]


@settings(max_examples=60, deadline=None)
@given(buffers.filter(lambda p: len(p) > 0))
def test_agrees_with_the_clique_bound_stacking(pairs: list[tuple[int, int]]) -> None:
    # From offset 0, the least padding is what the clique bound's stacking adds to the sizes.
    size = np.asarray([s for s, _ in pairs], dtype=I64)
    alignment = np.asarray([a for _, a in pairs], dtype=I64)
    padding = stack_height(size, alignment) - int(size.sum())
    memo = new_memo()
    assert _call(size.tolist(), alignment.tolist(), 0, padding, memo, 1_000_000)[0]
    if padding > 0:
        assert not _call(size.tolist(), alignment.tolist(), 0, padding - 1, memo, 1_000_000)[0]


def test_a_memo_shared_by_subsets_changes_no_answer() -> None:
    # As in the search: one universe of buffers, checks on many subsets of it share the
    # memo, and states learned on one subset are reused by another that reaches them.
    rng = np.random.default_rng(7)
    size = rng.integers(1, 40, size=12).tolist()
    alignment = rng.choice([1, 8, 32], size=12).tolist()
    memo = new_memo()
    for _ in range(150):
        chosen = rng.choice(12, size=int(rng.integers(1, 7)), replace=False).tolist()
        start = int(rng.integers(0, 32))
        least = _least_padding([size[i] for i in chosen], [alignment[i] for i in chosen], start)
        slack = least + int(rng.integers(-2, 2))
        fits, _ = _call(size, alignment, start, slack, memo, 1_000_000, chosen)
        assert fits == (least <= slack)


def test_undecided_within_its_steps_says_it_fits() -> None:
    # Two 40-byte buffers aligned to 32 and an 8-byte one need 16 bytes of padding; with no
    # steps to find that out the check must not prune.
    size, alignment = [40, 40, 8], [32, 32, 8]
    assert _least_padding(size, alignment, 0) > 0
    fits, steps = _call(size, alignment, 0, 0, new_memo(), 0)
    assert fits
    assert steps == 0
    assert not _call(size, alignment, 0, 0, new_memo(), 1_000)[0]
