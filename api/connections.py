"""How ``planner serve`` holds connections: uvicorn's httptools protocol with a deadline for a
request's head and for its body, and a bound on the connections open at once.

uvicorn itself times out only an idle keep-alive connection after an answer: a connection that
never sends a byte, or sends its head a byte a minute, stays open for ever, and enough of them
use up the server's file descriptors (then nothing, ``/healthz`` included, is answered). Here:

- a request's head must be complete ``header_timeout`` s after the connection opened (or, on
  a kept-alive connection, after its first byte), and its body ``body_timeout`` s after the
  head; past either the connection is closed (a request being read sees its client gone);
- past ``max_connections`` open connections, the one idle longest (no request in progress) is
  closed for each new one, so a crowd of idle connections cannot keep new clients out; when
  every connection is busy the new one is closed instead. Either is logged, at most once a
  second per kind, with how many connections it closed since the last line.

The limits are the settings of the environment (``PLANNER_*``), read when the first
connection is made in each uvicorn process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from planner.api.settings import environment_settings

__all__ = ["PROTOCOL", "GuardedHttpToolsProtocol"]

PROTOCOL = "planner.api.connections:GuardedHttpToolsProtocol"  # uvicorn's ``http`` option
LOG_EVERY = 1.0  # s between two log lines of one kind
_logger = logging.getLogger("uvicorn.error")
_last_logged: dict[str, float] = {}
_unlogged: dict[str, int] = {}


def _log(kind: str, message: str) -> None:
    """``message`` (with ``{count}``, the events of this kind since the last line), at most
    once every ``LOG_EVERY`` s per kind."""
    _unlogged[kind] = _unlogged.get(kind, 0) + 1
    now = time.monotonic()
    if now - _last_logged.get(kind, -LOG_EVERY) >= LOG_EVERY:
        _logger.warning(message.format(count=_unlogged.pop(kind)))
        _last_logged[kind] = now


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with head and body deadlines and a connection bound."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = environment_settings()
        self.header_timeout = settings.header_timeout
        self.body_timeout = settings.body_timeout
        self.max_connections = settings.max_connections
        self.idle_since = time.monotonic()  # when it last had no request in progress
        self.deadline: asyncio.TimerHandle | None = None

    def busy(self) -> bool:
        """Whether a request's head has arrived and its answer has not gone yet: a connection
        that is only sending a head may be closed to make room."""
        return self.cycle is not None and not self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.header_timeout, "request head")
        if len(self.connections) > self.max_connections:
            self._make_room()

    def _make_room(self) -> None:
        idle = [c for c in self.connections if c is not self and not _busy(c)]
        if idle:
            oldest = min(idle, key=lambda c: getattr(c, "idle_since", 0.0))
            _log(
                "evicted",
                f"connection limit of {self.max_connections} reached: closed {{count}} idle "
                "connection(s) to admit new ones",
            )
            oldest.transport.close()
        else:
            _log(
                "refused",
                f"connection limit of {self.max_connections} reached with every connection "
                "busy: refused {count} new connection(s)",
            )
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.deadline is None:  # a kept-alive connection's next request: from its first byte
            self._arm(self.header_timeout, "request head")

    def on_headers_complete(self) -> None:
        self._disarm()
        self._arm(self.body_timeout, "request body")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self.idle_since = time.monotonic()
        super().on_response_complete()

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self.deadline = self.loop.call_later(seconds, self._expired, seconds, what)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _expired(self, seconds: float, what: str) -> None:
        self.deadline = None
        if self.transport is not None and not self.transport.is_closing():
            _log(
                "timeout",
                f"closed {{count}} connection(s) whose {what} took more than {seconds:g} s",
            )
            self.transport.close()
            # A request whose body was arriving sees its client gone (uvicorn tells it so
            # only when the transport reports the loss, which a close does later).
            if self.cycle is not None and not self.cycle.response_complete:
                self.cycle.disconnected = True
                self.cycle.message_event.set()


def _busy(connection: object) -> bool:
    busy = getattr(connection, "busy", None)
    return bool(busy()) if busy is not None else True
