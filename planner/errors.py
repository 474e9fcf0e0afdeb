"""The planner's error tree. Every failure is one of these; nothing returns ``None``.

PlannerError
 ├── RequestError          bad input: a list of field errors, each with loc, msg, type
 │    └── FormatError      a file that is not valid JSON or MiniMalloc CSV
 └── InternalError         a plan the planner built failed its own static check
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["FieldError", "FormatError", "InternalError", "PlannerError", "RequestError"]

FieldError = dict[str, Any]
"""One error in FastAPI's ``detail`` shape: ``{"loc": [...], "msg": str, "type": str}``."""


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""

    code = "planner_error"


class RequestError(PlannerError):
    """The request is invalid; ``errors`` names each bad field and its value."""

    code = "bad_request"

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__(self.summary())

    def summary(self) -> str:
        """One line: the first error's location and message, and how many follow."""
        if not self.errors:
            return "invalid request"
        first = self.errors[0]
        loc = ".".join(str(part) for part in first.get("loc", ())) or "request"
        more = len(self.errors) - 1
        tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
        return f"{loc}: {first.get('msg', 'invalid')}{tail}"

    @classmethod
    def field(cls, loc: tuple[str | int, ...], msg: str, type_: str, value: Any) -> RequestError:
        """An error about a single field."""
        return cls([{"loc": list(loc), "msg": msg, "type": type_, "input": value}])

    @classmethod
    def from_validation(
        cls, exc: ValidationError, prefix: tuple[str | int, ...] = ()
    ) -> RequestError:
        """Wrap pydantic's errors, keeping loc, msg, type and the offending input."""
        errors: list[FieldError] = []
        for err in exc.errors(include_url=False, include_context=False):
            errors.append(
                {
                    "loc": [*prefix, *err["loc"]],
                    "msg": err["msg"],
                    "type": err["type"],
                    "input": err.get("input"),
                }
            )
        return cls(errors)


class FormatError(RequestError):
    """The input file is not valid JSON or MiniMalloc CSV."""

    code = "bad_format"


class InternalError(PlannerError):
    """The planner built a plan its own static validator rejects; no plan is returned."""

    code = "internal_error"
