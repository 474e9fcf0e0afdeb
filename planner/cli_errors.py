"""Bad input as the command line reports it: ``planner: error: ...`` on stderr, one line per
error, and exit code 2, the field and the value named (``planner``, ``planner batch``,
``selftest``); a misspelt field, solver, flag or command gets the nearest known name."""

from __future__ import annotations

import difflib
import sys
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from planner.core.errors import FieldError, FormatError, RequestError

__all__ = ["EXIT_BAD_INPUT", "MAX_SHOWN", "describe", "describe_all", "fail", "nearest"]

EXIT_BAD_INPUT = 2
MAX_SHOWN = 20  # errors listed one per line; the rest are counted


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, if one is close enough to be a typo."""
    found = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model holding the last field of ``loc`` (a path from ``root``), if any."""
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is not None:
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def _hint(error: FieldError, root: type[BaseModel] | None) -> str:
    """``; did you mean 'size'?`` for a field the model does not have, else nothing."""
    loc = list(error.get("loc", ()))
    if root is None or error.get("type") != "extra_forbidden" or not loc:
        return ""
    name = loc[-1]
    model = _model_at(root, loc[:-1])
    if not isinstance(name, str) or model is None:
        return ""
    known = {f.alias or n for n, f in model.model_fields.items()}
    guess = nearest(name, known)
    return f"; did you mean {guess!r}?" if guess else ""


def _line(
    error: FieldError,
    exc: RequestError,
    source: str | None,
    always: bool,
    root: type[BaseModel] | None,
) -> str:
    loc = ".".join(str(part) for part in error.get("loc", ()))
    msg = str(error.get("msg", "invalid"))
    if isinstance(exc, FormatError) or not loc:
        field = source or "input"
        if loc:
            msg = f"{loc}: {msg}"
    else:
        field = f"{source}: {loc}" if always and source else loc
        value = error.get("input")
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            shown = repr(value)
            if (shown if isinstance(value, str) else str(value)) not in msg:
                msg += f", got {shown}"  # pydantic's own messages leave the value out
    return f"{field}: {msg}{_hint(error, root)}"


def describe(
    exc: RequestError,
    source: str | None,
    *,
    always: bool = False,
    root: type[BaseModel] | None = None,
) -> str:
    """``<field>: <message>`` of the first error, and how many follow: the dotted loc of a
    model error, else the file at fault (``always``: the file, then the loc)."""
    first: FieldError = exc.errors[0] if exc.errors else {"loc": [], "msg": str(exc)}
    more = len(exc.errors) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more > 0 else ""
    return _line(first, exc, source, always, root) + tail


def describe_all(
    exc: RequestError,
    source: str | None,
    *,
    always: bool = False,
    root: type[BaseModel] | None = None,
) -> list[str]:
    """One ``<field>: <message>`` per error (the first ``MAX_SHOWN``, then a count), each
    with the nearest known field name when the field is unknown (``root``: the model the
    locs start from)."""
    errors: list[FieldError] = list(exc.errors) or [{"loc": [], "msg": str(exc)}]
    lines = [_line(e, exc, source, always, root) for e in errors[:MAX_SHOWN]]
    if len(errors) > MAX_SHOWN:
        lines.append(f"... and {len(errors) - MAX_SHOWN} more errors")
    return lines


def fail(message: str | Sequence[str]) -> int:
    """Report ``message`` (one line, or several) as bad input; the exit code to return."""
    for line in [message] if isinstance(message, str) else message:
        print(f"planner: error: {line}", file=sys.stderr)
    return EXIT_BAD_INPUT
