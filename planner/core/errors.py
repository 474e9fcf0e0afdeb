"""The planner's error tree. Every failure is one of these; nothing returns ``None``.

PlannerError
 ├── RequestError                    bad input: field errors, each with loc, msg, type
 │    ├── FormatError                not valid JSON or MiniMalloc CSV
 │    ├── PayloadTooLargeError       a body over the service's size limit
 │    └── UnsupportedMediaTypeError  a body not declared JSON
 ├── InternalError                   a plan the planner built failed its own static check
 ├── MissingExtraError               a feature needs an optional package that is not installed
 ├── OverloadedError                 the service cannot take or finish the request now
 └── ServiceError                    the client got no usable answer from the service
      ├── ServiceUnavailableError    503 on every try (queue full or deadline passed)
      ├── ServiceConnectionError     no connection or no response on every try
      └── UnexpectedResponseError    any other status, or a body not as promised

The service answers each class with one HTTP status (``planner.api.errors.HTTP_STATUS``).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = [
    "ECHO_CHARS",
    "MAX_FIELD_ERRORS",
    "FieldError",
    "FormatError",
    "InternalError",
    "MissingExtraError",
    "OverloadedError",
    "PayloadTooLargeError",
    "PlannerError",
    "RequestError",
    "ServiceConnectionError",
    "ServiceError",
    "ServiceUnavailableError",
    "UnexpectedResponseError",
    "UnsupportedMediaTypeError",
    "shorten",
]

FieldError = dict[str, Any]
"""One error in FastAPI's ``detail`` shape: ``{"loc": [...], "msg": str, "type": str}``."""

# Characters of a value echoed in an error (its ``input``, a ``loc`` part); a message gets
# twice as many, since it names the value and says what is wrong with it. A 10 MB id is
# answered with its first characters and its length, not with itself.
ECHO_CHARS = 200
# Field errors one RequestError keeps: the first ones, then one entry saying how many more
# there were. A body of 20 000 empty objects has 80 000 errors; nobody reads past the first.
MAX_FIELD_ERRORS = 100
_BIG_INT_BITS = 664  # about 200 decimal digits
_SLACK = 40  # characters past the limit a text may have: room for the suffix shorten adds


def shorten(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` if it has at most ``limit`` characters (and a little slack, so that a text
    shortened once is left as it is), else its head, an ellipsis and the original length."""
    if len(text) <= limit + _SLACK:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def _echo(value: Any) -> Any:
    """``value`` as an error may echo it: itself when small, else a shortened description."""
    if isinstance(value, str):
        return shorten(value)
    if isinstance(value, bytes | bytearray):
        head = bytes(value[:ECHO_CHARS]).decode("utf-8", "replace")
        return head if len(value) <= ECHO_CHARS else f"{head}... ({len(value)} bytes)"
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _BIG_INT_BITS:
            return f"an integer of {value.bit_length()} bits"
        return value
    if isinstance(value, list | tuple | dict):
        preview = _preview(value, ECHO_CHARS)
        if preview is not None:
            return value
        kind = "an object" if isinstance(value, dict) else "an array"
        return f"{kind} of {len(value)} items"
    return value


def _preview(value: Any, budget: int) -> int | None:
    """Characters left of ``budget`` after a rough rendering of ``value``; None once it is
    spent (stops early: a huge container costs no more than a small one)."""
    if isinstance(value, dict):
        for key, item in value.items():
            left = _preview(key, budget - 2)
            left = None if left is None else _preview(item, left)
            if left is None:
                return None
            budget = left
        return budget - 2
    if isinstance(value, list | tuple):
        for item in value:
            left = _preview(item, budget - 1)
            if left is None:
                return None
            budget = left
        return budget - 2
    size = len(value) + 2 if isinstance(value, str) else len(repr(_echo(value)))
    return budget - size if budget >= size else None


def _capped(error: FieldError) -> FieldError:
    """The error with its message, location parts and input cut to a readable length."""
    capped = dict(error)
    if "msg" in capped:
        capped["msg"] = shorten(str(capped["msg"]), 2 * ECHO_CHARS)
    if "loc" in capped:
        capped["loc"] = [shorten(p) if isinstance(p, str) else p for p in capped["loc"]]
    if "input" in capped:
        capped["input"] = _echo(capped["input"])
    return capped


TOO_MANY_ERRORS = "too_many_errors"  # the type of the entry that counts the errors left out


def _more_errors(count: int) -> FieldError:
    plural = "s" if count > 1 else ""
    msg = f"and {count} more error{plural}, not listed (the first {MAX_FIELD_ERRORS} are)"
    return {"loc": [], "msg": msg, "type": TOO_MANY_ERRORS, "input": count}


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""

    code = "planner_error"


class RequestError(PlannerError):
    """The request is invalid; ``errors`` names each bad field and its value."""

    code = "bad_request"

    def __init__(self, errors: list[FieldError], more: int = 0) -> None:
        # The one place field errors are made: every echo of the input and the number of
        # errors are bounded here, for the service's 422 body and the command line's one-line
        # error alike. ``more``: errors beyond ``errors`` that were already left out.
        if errors and errors[-1].get("type") == TOO_MANY_ERRORS:  # a capped list, again
            more += int(errors[-1].get("input") or 0)
            errors = errors[:-1]
        more += max(0, len(errors) - MAX_FIELD_ERRORS)
        self.errors = [_capped(e) for e in errors[:MAX_FIELD_ERRORS]]
        if more:
            self.errors.append(_more_errors(more))
        super().__init__(self.summary())

    def summary(self) -> str:
        """One line: the first error's location and message, and how many follow."""
        if not self.errors:
            return "invalid request"
        first = self.errors[0]
        loc = ".".join(str(part) for part in first.get("loc", ())) or "request"
        more = len(self.errors) - 1
        if self.errors[-1].get("type") == TOO_MANY_ERRORS:
            more += int(self.errors[-1]["input"]) - 1
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
        """Wrap pydantic's errors, keeping loc, msg, type and the offending input (the first
        ``MAX_FIELD_ERRORS`` of them)."""
        errors: list[FieldError] = []
        everyone = exc.errors(include_url=False, include_context=False)
        for err in everyone[:MAX_FIELD_ERRORS]:
            errors.append(
                {
                    "loc": [*prefix, *err["loc"]],
                    "msg": err["msg"],
                    "type": err["type"],
                    "input": err.get("input"),
                }
            )
        return cls(errors, more=len(everyone) - len(errors))


class FormatError(RequestError):
    """The input file is not valid JSON or MiniMalloc CSV."""

    code = "bad_format"


class InternalError(PlannerError):
    """The planner built a plan its own static validator rejects; no plan is returned."""

    code = "internal_error"


class MissingExtraError(PlannerError):
    """A feature needs an optional extra that is not installed; the message says which and
    how to add it."""

    code = "missing_extra"

    def __init__(self, feature: str, extra: str, hint: str) -> None:
        super().__init__(f"{feature} needs the [{extra}] extra: {hint}")
        self.feature = feature
        self.extra = extra  # the name in pyproject's optional-dependencies


class PayloadTooLargeError(RequestError):
    """The request body passes the service's size limit."""

    code = "body_too_large"


class UnsupportedMediaTypeError(RequestError):
    """The request body is not declared JSON; its error's ``loc`` names the header."""

    code = "unsupported_media_type"


class OverloadedError(PlannerError):
    """The service cannot take or finish this request now; the client should retry later."""

    code = "overloaded"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        # "queue_full", "deadline_exceeded", "worker_died" or "client_disconnected"
        self.reason = reason


class ServiceError(PlannerError):
    """The service could not answer the request."""

    code = "service_error"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the last HTTP status seen; None without a response


class ServiceUnavailableError(ServiceError):
    """503 on every try: the solver queue was full or the deadline passed."""

    code = "service_unavailable"

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, 503)
        self.retry_after = retry_after  # s, the server's last Retry-After


class ServiceConnectionError(ServiceError):
    """No connection, or no response, on every try."""

    code = "service_connection_error"


class UnexpectedResponseError(ServiceError):
    """A status or a body the service does not promise."""

    code = "unexpected_response"
