"""The static validator's own flattening: executions, copies, pieces and their limits."""

from __future__ import annotations

import pytest

from planner.validators.unroll import (
    MAX_EXECUTIONS,
    ControlFlow,
    TooManyExecutionsError,
    UnrolledRange,
    executions,
)


def _spans(flow: ControlFlow, horizon: int) -> list[list[tuple[int, int]]]:
    return [[(s.lo, s.hi) for s in ex.segments] for ex in executions(flow, horizon)]


def test_straight_program_is_one_execution_of_itself() -> None:
    assert _spans(ControlFlow(), 7) == [[(0, 7)]]


def test_a_loop_that_may_run_zero_times_is_also_skipped() -> None:
    skipped, ran = [(0, 2), (5, 7)], [(0, 2), (2, 5), (2, 5), (5, 7)]
    assert _spans(ControlFlow(loops=((2, 5, 0, None),)), 7) == [skipped, ran]
    assert _spans(ControlFlow(loops=((2, 5, 0, 1),)), 7) == [skipped, [(0, 2), (2, 5), (5, 7)]]
    (ex,) = executions(ControlFlow(loops=((2, 5, 1, None),)), 7)
    assert [(s.lo, s.hi) for s in ex.segments] == ran


def test_a_range_inside_a_skipped_loop_has_no_piece() -> None:
    skipped, _ = executions(ControlFlow(loops=((2, 5, 0, None),)), 7)
    assert skipped.pieces(3, 4) == []
    assert skipped.pieces(0, 3) == [UnrolledRange(0, 2, (), (0,))]


def test_a_loop_body_runs_twice_and_once_for_one_trip() -> None:
    assert _spans(ControlFlow(loops=((2, 5, 1, None),)), 7) == [[(0, 2), (2, 5), (2, 5), (5, 7)]]
    assert _spans(ControlFlow(loops=((2, 5, 9, 9),)), 7) == [[(0, 2), (2, 5), (2, 5), (5, 7)]]
    assert _spans(ControlFlow(loops=((2, 5, 1, 1),)), 7) == [[(0, 2), (2, 5), (5, 7)]]


def test_nested_loops_repeat_inside_each_outer_copy() -> None:
    (ex,) = executions(ControlFlow(loops=((0, 4, 1, None), (1, 3, 1, None))), 4)
    copies = [(s.lo, s.hi, s.copy) for s in ex.segments]
    assert copies == [
        (0, 1, ((0, 0),)),
        (1, 3, ((0, 0), (1, 0))),
        (1, 3, ((0, 0), (1, 1))),
        (3, 4, ((0, 0),)),
        (0, 1, ((0, 1),)),
        (1, 3, ((0, 1), (1, 0))),
        (1, 3, ((0, 1), (1, 1))),
        (3, 4, ((0, 1),)),
    ]
    assert ex.length == 2 * (1 + 2 * 2 + 1)


def test_each_arm_is_one_execution_and_skips_the_others() -> None:
    flow = ControlFlow(branches=(((1, 3), (3, 4), (4, 6)),))
    assert _spans(flow, 7) == [
        [(0, 1), (1, 3), (6, 7)],
        [(0, 1), (3, 4), (6, 7)],
        [(0, 1), (4, 6), (6, 7)],
    ]


def test_arms_are_chosen_afresh_in_every_loop_copy() -> None:
    flow = ControlFlow(loops=((0, 4, 1, None),), branches=(((0, 2), (2, 4)),))
    runs = _spans(flow, 4)
    assert len(runs) == 4  # (arm 0 | arm 1) in the first copy times the same in the second
    assert [(0, 2), (2, 4)] in runs
    assert [(2, 4), (0, 2)] in runs


def test_pieces_one_per_copy_of_the_loops_around_the_range() -> None:
    (ex,) = executions(ControlFlow(loops=((2, 5, 1, None),)), 7)
    # Unrolled: [0, 2) at 0, body copy 0 at 2, body copy 1 at 5, [5, 7) at 8.
    assert ex.pieces(3, 4) == [UnrolledRange(3, 4, ((0, 0),)), UnrolledRange(6, 7, ((0, 1),))]
    assert ex.pieces(0, 2) == [UnrolledRange(0, 2, ())]
    assert ex.occurrences([1, 2, 4, 6]) == [1, 2, 4, 5, 7, 9]
    assert [ex.origin(u) for u in range(ex.length)] == [0, 1, 2, 3, 4, 2, 3, 4, 5, 6]


def test_a_range_entering_or_leaving_a_loop_covers_every_copy() -> None:
    (ex,) = executions(ControlFlow(loops=((2, 5, 1, None),)), 7)
    assert ex.pieces(0, 3) == [UnrolledRange(0, 8, (), (0,))]  # live over both copies of the body
    assert ex.pieces(4, 7) == [UnrolledRange(2, 10, (), (0,))]


def test_a_range_in_an_arm_not_taken_has_no_piece() -> None:
    first, second = executions(ControlFlow(branches=(((1, 3), (3, 5)),)), 6)
    assert first.pieces(3, 5) == []
    assert second.pieces(1, 3) == []
    assert second.pieces(3, 5) == [UnrolledRange(1, 3, ())]
    assert first.pieces(0, 6) == [UnrolledRange(0, 4, ())]


def test_too_many_executions_name_the_limit() -> None:
    # Each loop holding a two-armed branch squares its count: 2 -> 4 per loop, 7 loops.
    loops = tuple((10 * k, 10 * k + 4, 1, None) for k in range(7))
    branches = tuple(((10 * k, 10 * k + 2), (10 * k + 2, 10 * k + 4)) for k in range(7))
    with pytest.raises(TooManyExecutionsError, match=str(MAX_EXECUTIONS)):
        next(executions(ControlFlow(loops=loops, branches=branches), 80))


def test_a_loop_of_one_trip_does_not_stretch_the_ranges_crossing_it() -> None:
    (ex,) = executions(ControlFlow(loops=((2, 5, 1, 1),)), 7)
    assert ex.pieces(0, 3) == [UnrolledRange(0, 3, ())]
    assert ex.pieces(4, 7) == [UnrolledRange(4, 7, ())]
