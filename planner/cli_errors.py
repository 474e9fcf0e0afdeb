"""Bad input as the command line reports it: one line ``planner: error: ...`` on stderr and
exit code 2, the field and the value named (``planner``, ``planner batch``, ``selftest``)."""

from __future__ import annotations

import sys

from planner.core.errors import FormatError, RequestError

__all__ = ["EXIT_BAD_INPUT", "describe", "fail"]

EXIT_BAD_INPUT = 2


def describe(exc: RequestError, source: str | None, *, always: bool = False) -> str:
    """``<field>: <message>``: the dotted loc of a model error, else the file at fault
    (``always``: the file, then the loc)."""
    first = exc.errors[0] if exc.errors else {"loc": [], "msg": str(exc)}
    loc = ".".join(str(part) for part in first.get("loc", ()))
    msg = str(first.get("msg", "invalid"))
    more = len(exc.errors) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more > 0 else ""
    if isinstance(exc, FormatError) or not loc:
        field = source or "input"
        if loc:
            msg = f"{loc}: {msg}"
    else:
        field = f"{source}: {loc}" if always and source else loc
        value = first.get("input")
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            shown = repr(value)
            if (shown if isinstance(value, str) else str(value)) not in msg:
                msg += f", got {shown}"  # pydantic's own messages leave the value out
    return f"{field}: {msg}{tail}"


def fail(message: str) -> int:
    """Report ``message`` as bad input; the exit code to return."""
    print(f"planner: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
