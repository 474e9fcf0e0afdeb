"""Reading requests and plans from JSON, with errors that name the field and the value."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from planner.core.errors import FieldError, FormatError, RequestError
from planner.core.models import DEFAULT_MAX_BUFFERS, Buffer, Plan, PlanRequest

if TYPE_CHECKING:
    from planner.core.params import Template

__all__ = [
    "canonical_chunks",
    "canonical_json",
    "parse_model",
    "parse_plan",
    "parse_request",
    "request_sha256",
]

M = TypeVar("M", bound=BaseModel)
HASH_CHUNK = 10_000  # buffers serialized at a time for the request's hash
_HUGE_ERRORS_MAX = 100  # fields named when integers too long to read are many


def parse_request(
    data: PlanRequest | dict[str, Any] | str | bytes, *, max_buffers: int = DEFAULT_MAX_BUFFERS
) -> PlanRequest:
    """A validated request from a model, a dict or JSON text; raises RequestError.

    Strict: ``"size": true`` or ``"size": "256"`` is an error, not 1 or 256.
    """
    if isinstance(data, PlanRequest):
        return data
    if isinstance(data, str) and not data.lstrip().startswith("{"):
        raise _not_json(data)
    template = _template_of(data)
    if template is not None:
        # A request with parameters plans as the request of its default configuration.
        return template.bind(template.default_config(), checked=True)
    return parse_model(PlanRequest, data, context={"max_buffers": max_buffers})


def _template_of(data: dict[str, Any] | str | bytes) -> Template | None:
    """The template of a request that declares ``params`` (docs/design.md, Parameters);
    None for any other request, which reads exactly as before."""
    from planner.core.params import has_params, parse_template

    if isinstance(data, dict):
        return parse_template(data) if has_params(data) else None
    marker = b'"params"' if isinstance(data, bytes) else '"params"'
    if marker not in data:  # type: ignore[operator]
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        return None  # parse_model reports malformed JSON
    return parse_template(parsed) if has_params(parsed) else None


def _not_json(text: str) -> FormatError:
    """A string that cannot be a request's JSON, most likely a file name."""
    shown = text if len(text) <= 80 else text[:77] + "..."
    msg = (
        f"expected a request as JSON text, a dict or a PlanRequest, got the string {shown!r}; "
        "a file is planned by its path (planner.plan('kernel.json'), planner plan kernel.json)"
    )
    return FormatError([{"loc": [], "msg": msg, "type": "json_invalid", "input": shown}])


def parse_plan(data: Plan | dict[str, Any] | str | bytes) -> Plan:
    """A plan from a model, a dict or JSON text, read strictly like a request; raises
    RequestError with loc under 'plan'."""
    if isinstance(data, Plan):
        return data
    return parse_model(Plan, data, prefix=("plan",))


def parse_model(
    model: type[M],
    data: dict[str, Any] | str | bytes,
    *,
    context: dict[str, Any] | None = None,
    prefix: tuple[str | int, ...] = (),
) -> M:
    """``data`` (a dict or JSON text) as ``model``, read strictly; raises FormatError for
    malformed JSON and RequestError, with every ``loc`` under ``prefix``, for the rest. The
    one place a pydantic error becomes a planner error."""
    try:
        if isinstance(data, str | bytes):
            return model.model_validate_json(data, strict=True, context=context)
        return model.model_validate(data, strict=True, context=context)
    except ValidationError as exc:
        # Malformed JSON is the one error pydantic reports: a bad request may have a hundred
        # thousand errors, whose conversion from_validation bounds; do not convert them here.
        errors = exc.errors(include_url=False) if exc.error_count() == 1 else []
        if errors and errors[0]["type"] == "json_invalid":
            assert isinstance(data, str | bytes)
            huge = _huge_integers(data, prefix)
            if huge:
                raise RequestError(huge) from None
            msg = errors[0].get("ctx", {}).get("error", errors[0]["msg"])
            raise FormatError(
                [{"loc": [*prefix], "msg": f"malformed JSON: {msg}", "type": "json_invalid"}]
            ) from None
        raise RequestError.from_validation(exc, prefix) from None


class _HugeInteger:
    """An integer literal too long to convert (``sys.get_int_max_str_digits``)."""

    def __init__(self, text: str) -> None:
        self.digits = len(text.lstrip("-"))


def _huge_integers(data: str | bytes, prefix: tuple[str | int, ...]) -> list[FieldError]:
    """An error naming each field that holds an integer of more digits than Python converts
    (4300 by default), which the JSON parser refuses without saying where; none when the
    text fails for another reason. Read again by the standard parser, on this failure only."""
    limit = sys.get_int_max_str_digits() or None

    def integer(text: str) -> int | _HugeInteger:
        if limit is not None and len(text.lstrip("-")) > limit:
            return _HugeInteger(text)
        return int(text)

    try:
        parsed = json.loads(data, parse_int=integer)
    except (ValueError, RecursionError):
        return []
    found: list[FieldError] = []
    stack: list[tuple[tuple[str | int, ...], Any]] = [(prefix, parsed)]
    while stack and len(found) < _HUGE_ERRORS_MAX:
        loc, value = stack.pop()
        if isinstance(value, _HugeInteger):
            found.append(
                {
                    "loc": list(loc),
                    "msg": f"an integer of {value.digits} digits is out of range",
                    "type": "int_parsing_size",
                    "input": f"an integer of {value.digits} digits",
                }
            )
        elif isinstance(value, dict):
            stack.extend(((*loc, k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*loc, k), v) for k, v in reversed(list(enumerate(value))))
    return found


def canonical_json(request: PlanRequest) -> bytes:
    """The request with defaults filled, fields in model order, no whitespace: what the hash
    covers. The input's key order and spacing do not change it."""
    return b"".join(canonical_chunks(request))


def canonical_chunks(request: PlanRequest, per_chunk: int = HASH_CHUNK) -> Iterator[bytes]:
    """``canonical_json`` in pieces of at most ``per_chunk`` buffers each: hashed piece by
    piece, a million-buffer request never holds its whole text (a hundred megabytes, twice
    over while the serializer grows its buffer)."""
    head = request.model_copy(update={"buffers": []}).model_dump_json().encode()
    # Inside a JSON string every quote is escaped, so this is the top level's key.
    before, empty, after = head.partition(b',"buffers":[]')
    assert empty, "the canonical request has a buffers key after its name"
    yield before + b',"buffers":['
    buffers = request.buffers
    for k in range(0, len(buffers), per_chunk):
        part = _buffer_list().dump_json(buffers[k : k + per_chunk])
        yield (b"," if k else b"") + part[1:-1]
    yield b"]" + after


@functools.cache
def _buffer_list() -> TypeAdapter[list[Buffer]]:
    """The serializer of a list of buffers, the one the request's ``buffers`` field uses."""
    return TypeAdapter(list[Buffer])


def request_sha256(request: PlanRequest) -> str:
    """Hex SHA-256 of the canonical request: equal requests plan to equal plans."""
    digest = hashlib.sha256()
    for chunk in canonical_chunks(request):
        digest.update(chunk)
    return digest.hexdigest()
