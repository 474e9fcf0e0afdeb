"""The ``Host`` header a request may carry: the loopback names, and the names an operator adds
(``PLANNER_ALLOWED_HOSTS``). Anything else is a 400 before the app sees the request.

A web page a developer visits can make their browser send requests to a name it controls
that resolves to 127.0.0.1 (DNS rebinding); the browser then sends that name as ``Host``.
Answering only the names the service is meant to be reached by closes that door.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from planner.api.errors import ErrorDetail, ErrorResponse
from planner.core.errors import shorten

__all__ = ["LOOPBACK_HOSTS", "HostGuard", "host_name"]

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})
ANY_HOST = "*"  # in the allowed names: every Host is answered (behind a proxy that checks it)


def host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port, in lower case."""
    host = header.strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostGuard:
    """Answer 400 to an HTTP request whose ``Host`` names none of the allowed hosts; a
    request without ``Host`` (HTTP/1.0) is let through: no browser sends one."""

    def __init__(self, app: ASGIApp, allowed: Iterable[str]) -> None:
        self.app = app
        names = {name.strip().lower() for name in allowed if name.strip()}
        self.any = ANY_HOST in names
        self.allowed = LOOPBACK_HOSTS | names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.any:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", ()) if k == b"host"), None)
        if header is None or host_name(header.decode("latin-1")) in self.allowed:
            await self.app(scope, receive, send)
            return
        given = header.decode("latin-1")
        names = ", ".join(sorted(self.allowed - {"::1"}))
        detail = ErrorDetail(
            loc=["header", "host"],
            msg=shorten(
                f"Host {given!r} is not a name this service answers to ({names}); "
                "PLANNER_ALLOWED_HOSTS adds names",
                400,
            ),
            type="host_not_allowed",
            input=shorten(given),
        )
        body = ErrorResponse(detail=[detail]).model_dump_json().encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})
