"""Reading a POST body: the content type and encoding, then the bytes, refused as soon as they
pass the size limit. Every route that takes a body reads it here.

A client that goes away while its body is arriving raises ``ClientDisconnect`` (starlette's),
which ``api.middleware`` counts and logs as a disconnect, not as a failure of the service.
"""

from __future__ import annotations

from typing import NoReturn

from fastapi import Request

from planner.core.errors import (
    PayloadTooLargeError,
    RequestError,
    UnsupportedMediaTypeError,
    shorten,
)

__all__ = ["is_json", "read_body"]


def is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/<anything>+json``, with any parameters."""
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


async def read_body(request: Request, limit: int) -> bytes:
    """The raw JSON body: ``UnsupportedMediaTypeError`` (415) unless it is declared JSON and
    sent as it is (a ``Content-Encoding`` such as gzip is refused, not read as JSON),
    ``PayloadTooLargeError`` (413) as soon as it passes ``limit`` bytes (streamed: a body
    without Content-Length cannot fill memory before it is refused).

    Demanding a JSON content type keeps a web page from using a developer's local service:
    a cross-site form or ``no-cors`` fetch can only send form types or ``text/plain``.
    """
    content_type = request.headers.get("content-type")
    if not is_json(content_type):
        _refuse_type(content_type)
    encoding = request.headers.get("content-encoding")
    if encoding is not None and encoding.strip().lower() not in ("", "identity"):
        _refuse_encoding(encoding)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        _refuse_size(int(declared), limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            _refuse_size(len(body), limit)
    if not body or body.isspace():
        # An empty body is a missing request, not malformed JSON: say so plainly.
        raise RequestError.field((), "request body is empty; send JSON", "missing", None)
    return bytes(body)


def _refuse_type(content_type: str | None) -> NoReturn:
    given = "no Content-Type" if content_type is None else f"Content-Type {content_type!r}"
    msg = shorten(f"{given}: send the body as application/json", 400)
    raise UnsupportedMediaTypeError(
        [
            {
                "loc": ["header", "content-type"],
                "msg": msg,
                "type": "unsupported_media_type",
                "input": None if content_type is None else shorten(content_type),
            }
        ]
    )


def _refuse_encoding(encoding: str) -> NoReturn:
    msg = shorten(f"Content-Encoding {encoding!r}: send the body unencoded", 400)
    raise UnsupportedMediaTypeError(
        [
            {
                "loc": ["header", "content-encoding"],
                "msg": msg,
                "type": "unsupported_content_encoding",
                "input": shorten(encoding),
            }
        ]
    )


def _refuse_size(size: int, limit: int) -> NoReturn:
    msg = f"request body of at least {size} bytes exceeds the limit of {limit} bytes"
    raise PayloadTooLargeError([{"loc": [], "msg": msg, "type": "body_too_large", "input": None}])
