"""Integer expressions over a request's parameters (docs/design.md, Parameters).

The grammar, read by a recursive-descent parser (no ``eval``, no ``ast``)::

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//") unary)*
    unary := "-" unary | atom
    atom  := INTEGER | NAME | "(" expr ")" | ("min" | "max") "(" expr ("," expr)+ ")"

``//`` is floor division, as in Python. Every input is bounded before it is read: at most
``MAX_LENGTH`` characters, ``MAX_DEPTH`` levels of nesting and ``MAX_NODES`` nodes, integer
literals of at most ``MAX_DIGITS`` digits, so a hostile string is refused in time linear in
its (bounded) length.

An expression is evaluated three ways: at one configuration (``value``), over arrays of
configurations at once (``values``, numpy ``int64``: the sweeps), and over the parameters'
ranges by interval arithmetic (``interval``), which is how a request is refused when some
declared value could make a size negative, zero or overflow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "MAX_VALUE",
    "Expr",
    "ExprError",
    "Interval",
    "parse_expr",
    "read_plan_expr",
]

MAX_LENGTH = 256  # characters
MAX_DEPTH = 16  # nested parentheses, calls and unary minus
MAX_NODES = 64
MAX_DIGITS = 13  # an integer literal below 10**13 (> 2**40, the largest size)
MAX_VALUE = 1 << 62  # |intermediate| bound: int64 arithmetic never overflows below it
NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
FUNCTIONS = ("min", "max")

I64 = npt.NDArray[np.int64]
Interval = tuple[int, int]  # inclusive


class ExprError(ValueError):
    """An expression that cannot be read, or cannot be evaluated where it is used."""


_TOKEN = re.compile(rf"\s*(?:(\d+)|({NAME_PATTERN})|(//|[-+*(),]))")


@dataclass(frozen=True)
class Expr:
    """One node: ``op`` is "int", "var", "neg", "+", "-", "*", "//", "min" or "max"."""

    op: str
    args: tuple[Expr, ...] = ()
    number: int = 0  # "int"
    name: str = ""  # "var"

    def variables(self) -> set[str]:
        """Names of the parameters the expression reads."""
        if self.op == "var":
            return {self.name}
        found: set[str] = set()
        for a in self.args:
            found |= a.variables()
        return found

    def value(self, env: Mapping[str, int]) -> int:
        """The value at one configuration (Python's integer arithmetic)."""
        op = self.op
        if op == "int":
            return self.number
        if op == "var":
            return env[self.name]
        xs = [a.value(env) for a in self.args]
        if op == "neg":
            return -xs[0]
        if op == "min":
            return min(xs)
        if op == "max":
            return max(xs)
        a, b = xs
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            raise ExprError(f"{self} divides by zero")
        return a // b

    def values(self, env: Mapping[str, I64], count: int) -> I64:
        """The values at ``count`` configurations at once, one array per parameter. The
        caller has bounded every intermediate by ``interval`` (no int64 overflow)."""
        op = self.op
        if op == "int":
            return np.full(count, self.number, dtype=np.int64)
        if op == "var":
            return np.asarray(env[self.name], dtype=np.int64)
        xs = [a.values(env, count) for a in self.args]
        if op == "neg":
            return -xs[0]
        if op in ("min", "max"):
            fold: Callable[[I64, I64], I64] = np.minimum if op == "min" else np.maximum
            out = xs[0]
            for x in xs[1:]:
                out = fold(out, x)
            return out
        a, b = xs
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if np.any(b == 0):
            raise ExprError(f"{self} divides by zero")
        return np.floor_divide(a, b)

    def interval(self, bounds: Mapping[str, Interval]) -> Interval:
        """The least and greatest value over the box ``bounds`` (inclusive per parameter), by
        interval arithmetic: exact for a parameter used once, else a safe enclosure. Raises
        ExprError where a divisor's interval holds zero or an intermediate could pass
        ``MAX_VALUE``."""
        op = self.op
        if op == "int":
            lo = hi = self.number
        elif op == "var":
            lo, hi = bounds[self.name]
        else:
            xs = [a.interval(bounds) for a in self.args]
            if op == "neg":
                lo, hi = -xs[0][1], -xs[0][0]
            elif op == "min":
                lo, hi = min(x[0] for x in xs), min(x[1] for x in xs)
            elif op == "max":
                lo, hi = max(x[0] for x in xs), max(x[1] for x in xs)
            else:
                (a0, a1), (b0, b1) = xs
                if op == "+":
                    lo, hi = a0 + b0, a1 + b1
                elif op == "-":
                    lo, hi = a0 - b1, a1 - b0
                else:
                    if op == "//" and b0 <= 0 <= b1:
                        raise ExprError(f"{self.args[1]} may be 0 in {self}: a division by zero")
                    # Product and floor quotient are monotone in each argument where the
                    # divisor keeps its sign, so the corners hold both extremes.
                    corners = [x * y if op == "*" else x // y for x in (a0, a1) for y in (b0, b1)]
                    lo, hi = min(corners), max(corners)
        if lo < -MAX_VALUE or hi > MAX_VALUE:
            raise ExprError(f"{self} may overflow: it reaches {lo if lo < -MAX_VALUE else hi}")
        return lo, hi

    def __str__(self) -> str:
        return self.render()

    def render(
        self, var: Callable[[str], str] = str, floor_div: str = "//", parent: int = 0
    ) -> str:
        """Text in the grammar (default), or C with ``floor_div="/"`` and ``var`` naming the
        parameters; parentheses only where precedence needs them."""
        op = self.op
        if op == "int":
            return str(self.number)
        if op == "var":
            return var(self.name)
        if op in FUNCTIONS:
            return f"{op}({', '.join(a.render(var, floor_div) for a in self.args)})"
        if op == "neg":
            text = "-" + self.args[0].render(var, floor_div, 3)
            return f"({text})" if parent >= 3 else text
        level = 1 if op in ("+", "-") else 2
        left = self.args[0].render(var, floor_div, level)
        right = self.args[1].render(var, floor_div, level + 1)
        text = f"{left} {floor_div if op == '//' else op} {right}"
        return f"({text})" if parent > level else text


def _bad(text: str, at: int, why: str) -> ExprError:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return ExprError(f"{why} at character {at} of {shown!r}")


class _Parser:
    def __init__(self, text: str, max_nodes: int) -> None:
        self.text = text
        self.max_nodes = max_nodes
        self.tokens: list[tuple[str, str, int]] = []  # (kind, text, position)
        self.pos = 0
        self.nodes = 0
        self._tokenize()

    def _tokenize(self) -> None:
        text, at = self.text, 0
        while at < len(text):
            if text[at:].strip() == "":
                break
            m = _TOKEN.match(text, at)
            if m is None:
                where = at + len(text[at:]) - len(text[at:].lstrip())
                raise _bad(text, where, f"unexpected {text[where]!r}")
            number, name, symbol = m.groups()
            if number is not None:
                if len(number) > MAX_DIGITS:
                    raise _bad(text, m.start(1), f"integer longer than {MAX_DIGITS} digits")
                self.tokens.append(("int", number, m.start(1)))
            elif name is not None:
                self.tokens.append(("name", name, m.start(2)))
            else:
                self.tokens.append(("sym", symbol, m.start(3)))
            at = m.end()
        self.tokens.append(("end", "", len(text)))

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.pos]

    def take(self, symbol: str) -> None:
        kind, tok, at = self.tokens[self.pos]
        if kind != "sym" or tok != symbol:
            found = "the end" if kind == "end" else repr(tok)
            raise _bad(self.text, at, f"expected {symbol!r}, found {found}")
        self.pos += 1

    def node(self, op: str, *args: Expr, number: int = 0, name: str = "") -> Expr:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise _bad(self.text, self.peek()[2], f"more than {self.max_nodes} terms")
        return Expr(op, args, number, name)

    def expr(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise _bad(self.text, self.peek()[2], f"nested deeper than {MAX_DEPTH}")
        left = self.term(depth)
        while self.peek()[:2] in (("sym", "+"), ("sym", "-")):
            op = self.peek()[1]
            self.pos += 1
            left = self.node(op, left, self.term(depth))
        return left

    def term(self, depth: int) -> Expr:
        left = self.unary(depth)
        while self.peek()[:2] in (("sym", "*"), ("sym", "//")):
            op = self.peek()[1]
            self.pos += 1
            left = self.node(op, left, self.unary(depth))
        return left

    def unary(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise _bad(self.text, self.peek()[2], f"nested deeper than {MAX_DEPTH}")
        if self.peek()[:2] == ("sym", "-"):
            self.pos += 1
            return self.node("neg", self.unary(depth + 1))
        return self.atom(depth)

    def atom(self, depth: int) -> Expr:
        kind, tok, at = self.peek()
        if kind == "int":
            self.pos += 1
            return self.node("int", number=int(tok))
        if kind == "name":
            self.pos += 1
            if tok in FUNCTIONS:
                self.take("(")
                args = [self.expr(depth + 1)]
                while self.peek()[:2] == ("sym", ","):
                    self.pos += 1
                    args.append(self.expr(depth + 1))
                self.take(")")
                if len(args) < 2:
                    raise _bad(self.text, at, f"{tok}() needs at least two arguments")
                return self.node(tok, *args)
            return self.node("var", name=tok)
        if (kind, tok) == ("sym", "("):
            self.pos += 1
            inner = self.expr(depth + 1)
            self.take(")")
            return inner
        found = "the end" if kind == "end" else repr(tok)
        raise _bad(self.text, at, f"expected a number, a name or '(', found {found}")


def parse_expr(text: str, *, max_length: int = MAX_LENGTH, max_nodes: int = MAX_NODES) -> Expr:
    """The expression ``text`` reads as; raises ExprError naming the character at fault.
    The limits are the request's; the planner's own output (a symbolic plan's offsets) is
    read back with limits that grow with its buffers."""
    if len(text) > max_length:
        raise ExprError(f"expression of {len(text)} characters; at most {max_length}")
    if not text.strip():
        raise ExprError("empty expression")
    parser = _Parser(text, max_nodes)
    result = parser.expr(0)
    kind, tok, at = parser.peek()
    if kind != "end":
        raise _bad(text, at, f"unexpected {tok!r}")
    return result


def read_plan_expr(text: str) -> Expr:
    """An expression the planner wrote (a symbolic plan's offset or arena), whose length
    grows with the buffers: read with limits far above a request's."""
    return parse_expr(text, max_length=1 << 24, max_nodes=1 << 20)
