"""Shared pieces of the request models: point and byte types, and the error collector."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["MAX_POINT", "MAX_SIZE", "Bytes", "Errors", "Loc", "Point", "Span", "absent"]

MAX_SIZE = 1 << 40  # bytes; anything larger is a mistake, not a kernel
MAX_POINT = 1 << 40  # program points

Point = Annotated[int, Field(ge=0, le=MAX_POINT)]
Bytes = Annotated[int, Field(ge=1, le=MAX_SIZE)]
Span = Annotated[list[Point], Field(min_length=2, max_length=2)]  # [start, end), half-open

Loc = tuple[str | int, ...]


def absent(value: object) -> bool:
    """For ``exclude_if``: an optional field left out of dumps when it is not given."""
    return value is None


class Errors:
    """Collects semantic errors and raises them together as one ValidationError."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.items: list[InitErrorDetails] = []

    def add(self, loc: Loc, type_: str, msg: str, value: Any) -> None:
        # Braces in user strings must not be read as template fields.
        safe = msg.replace("{", "{{").replace("}", "}}")
        self.items.append(
            InitErrorDetails(type=PydanticCustomError(type_, safe), loc=loc, input=value)
        )

    def raise_if_any(self) -> None:
        if self.items:
            raise ValidationError.from_exception_data(self.title, self.items)
