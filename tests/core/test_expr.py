"""Integer expressions: Python's integer arithmetic, interval enclosures, hostile input refused
in bounded time."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.expr import MAX_LENGTH, MAX_VALUE, ExprError, parse_expr

NAMES = ("A", "B", "C")
ENV_VALUES = st.integers(min_value=-50, max_value=50)


def _wrap(draw: st.DrawFn, text: str) -> str:
    pad = draw(st.sampled_from(["", " ", "  "]))
    return f"{pad}({text}){pad}" if draw(st.booleans()) else text


@st.composite
def expressions(draw: st.DrawFn, depth: int = 0) -> str:
    """Random expression text in the grammar, with spaces and redundant parentheses."""
    if depth >= 4 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return str(draw(st.integers(0, 300)))
        return draw(st.sampled_from(NAMES))
    kind = draw(st.sampled_from(["+", "-", "*", "//", "neg", "min", "max"]))
    if kind == "neg":
        return "-" + _wrap(draw, draw(expressions(depth + 1)))
    if kind in ("min", "max"):
        args = draw(st.lists(expressions(depth + 1), min_size=2, max_size=3))
        return f"{kind}({', '.join(args)})"
    left = _wrap(draw, draw(expressions(depth + 1)))
    right = _wrap(draw, draw(expressions(depth + 1)))
    return f"({left}) {kind} ({right})"


@settings(max_examples=400, deadline=None)
@given(expressions(), st.fixed_dictionaries(dict.fromkeys(NAMES, ENV_VALUES)))
def test_evaluates_as_python_integer_arithmetic(text: str, env: dict[str, int]) -> None:
    if len(text) > MAX_LENGTH:
        with pytest.raises(ExprError):
            parse_expr(text)
        return
    try:
        expected = eval(text, {"__builtins__": {}, "min": min, "max": max}, dict(env))
    except ZeroDivisionError:
        with pytest.raises(ExprError, match="divides by zero"):
            parse_expr(text).value(env)
        return
    expr = parse_expr(text)
    assert expr.value(env) == expected
    # Rendered text reads back to the same value; arrays agree element by element.
    assert parse_expr(expr.render()).value(env) == expected
    cols = {n: np.array([v, v], dtype=np.int64) for n, v in env.items()}
    if abs(expected) < MAX_VALUE:
        assert expr.values(cols, 2).tolist() == [expected, expected]


@settings(max_examples=300, deadline=None)
@given(
    expressions(),
    st.fixed_dictionaries({n: st.tuples(ENV_VALUES, st.integers(0, 20)) for n in NAMES}),
    st.data(),
)
def test_interval_encloses_every_value(
    text: str, boxes: dict[str, tuple[int, int]], data: st.DataObject
) -> None:
    if len(text) > MAX_LENGTH:
        return
    expr = parse_expr(text)
    bounds = {n: (lo, lo + width) for n, (lo, width) in boxes.items()}
    try:
        lo, hi = expr.interval(bounds)
    except ExprError:
        return  # a divisor may be zero somewhere in the box
    for _ in range(5):
        env = {n: data.draw(st.integers(a, b)) for n, (a, b) in bounds.items()}
        assert lo <= expr.value(env) <= hi


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("A +", "found the end"),
        ("A ** 2", "expected a number"),
        ("A / 2", "unexpected '/'"),
        ("__import__('os').system('x')", 'unexpected "\'"'),
        ("A.real", "unexpected '.'"),
        ("lambda: 1", "unexpected ':'"),
        ("min(A)", "at least two"),
        ("max", "expected '('"),
        ("1" * 14, "longer than 13 digits"),
        ("(" * 20 + "1" + ")" * 20, "nested deeper"),
        ("-" * 20 + "1", "nested deeper"),
        ("+".join(["A"] * 70), "more than 64 terms"),
        ("A" * 300, "at most 256"),
        ("2 3", "unexpected '3'"),
        ("A # comment", "unexpected '#'"),
    ],
)
def test_refuses_what_is_not_in_the_grammar(text: str, message: str) -> None:
    with pytest.raises(ExprError, match=message.replace("(", r"\(")):
        parse_expr(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="AB01()+-*/, minx\x00'\"_.", max_size=4000))
def test_hostile_text_is_refused_in_bounded_time(text: str) -> None:
    began = time.perf_counter()
    with contextlib.suppress(ExprError):
        parse_expr(text)
    # Bounded by the parser's length and depth limits, not by the machine: a second is far
    # above what 4000 characters cost here and far below what unbounded backtracking would.
    assert time.perf_counter() - began < 1.0


def test_interval_refuses_division_by_a_range_holding_zero() -> None:
    with pytest.raises(ExprError, match="division by zero"):
        parse_expr("A // (B - 2)").interval({"A": (1, 4), "B": (1, 3)})
    assert parse_expr("A // (B - 2)").interval({"A": (1, 4), "B": (3, 5)}) == (0, 4)


def test_interval_refuses_overflow() -> None:
    expr = parse_expr("A * A * A * A")
    with pytest.raises(ExprError, match="overflow"):
        expr.interval({"A": (1, 1 << 20)})


def test_render_as_c() -> None:
    expr = parse_expr("(BLOCK_M + 16) * (BLOCK_K // 2) - max(A, 4)")
    assert (
        expr.render(lambda n: f"p.{n}", "/") == "(p.BLOCK_M + 16) * (p.BLOCK_K / 2) - max(p.A, 4)"
    )
    assert expr.variables() == {"BLOCK_M", "BLOCK_K", "A"}
