"""Sequences made from their index when read behave as lists (planner.core.indexed)."""

from __future__ import annotations

import pytest

from planner.core.indexed import Indexed


class _Squares(Indexed[int]):
    def __init__(self, n: int) -> None:
        self.n = n
        self.made: list[int] = []  # the indices ``item`` was asked for

    def __len__(self) -> int:
        return self.n

    def item(self, i: int) -> int:
        self.made.append(i)
        return i * i


def test_indexing_slicing_and_iteration_behave_as_a_lists() -> None:
    seq = _Squares(5)
    listed = [i * i for i in range(5)]
    assert list(seq) == listed
    for k in range(-5, 5):
        assert seq[k] == listed[k]
    for s in (slice(1, 4), slice(None, None, -2), slice(-3, None), slice(7, 9)):
        assert seq[s] == listed[s]
    for k in (5, -6):
        with pytest.raises(IndexError):
            seq[k]
    assert 9 in seq
    assert seq.index(16) == 4


def test_items_are_asked_for_in_range_and_only_when_read() -> None:
    seq = _Squares(4)
    assert seq.made == []
    assert seq[-1] == 9
    assert seq[1:3] == [1, 4]
    assert seq.made == [3, 1, 2]
