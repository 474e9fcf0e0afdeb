"""Argument types of the command line: each turns a flag's text into a value or says, in one
line, why it cannot."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["at_least", "positive_float", "positive_int"]


def at_least(least: int) -> Callable[[str], int]:
    """An integer flag of at least ``least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


positive_int = at_least(1)


def positive_float(text: str) -> float:
    """A finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value
