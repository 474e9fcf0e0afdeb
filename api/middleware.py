"""Per-request bookkeeping around the app: a request id echoed in ``X-Request-ID``, request
metrics, one structured JSON access-log line, and a JSON 500 in the ``detail`` shape for an
exception no handler took (then re-raised, so the server logs its traceback).

A client that went away while its body was arriving is no failure of the service: nothing is
answered (nobody would read it), no traceback is logged, and it is counted and logged with
status 499 (nginx's "client closed request") and in ``planner_client_disconnects``.

A plain ASGI middleware (not ``BaseHTTPMiddleware``): it adds a few microseconds per request,
which matters for cached answers.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from planner.api.errors import error_body
from planner.api.metrics import Metrics

__all__ = ["ACCESS_LOGGER", "RequestMiddleware", "configure_access_log"]

ACCESS_LOGGER = "planner.core.access"
CLIENT_CLOSED = 499  # the status logged and counted for a client gone mid-request
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")  # ids taken as given; others replaced


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


class _JsonFormatter(logging.Formatter):
    """The record's ``access`` dict as one JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "access", None) or {"message": record.getMessage()}
        return json.dumps(fields, separators=(",", ":"))


def configure_access_log(enabled: bool) -> logging.Logger:
    """The access logger, writing JSON lines to stderr when ``enabled``, silent otherwise."""
    logger = logging.getLogger(ACCESS_LOGGER)
    logger.propagate = False
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_JsonFormatter())
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if enabled else logging.CRITICAL + 1)
    return logger


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


async def _server_error(send: Send) -> None:
    body = error_body("server_error", "the service failed to answer this request")
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 500, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestMiddleware:
    """Request id, metrics and access log for every HTTP request."""

    def __init__(self, app: ASGIApp, metrics: Metrics, logger: logging.Logger) -> None:
        self.app = app
        self.metrics = metrics
        self.logger = logger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = _header(scope, b"x-request-id")
        request_id = given if given and _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500  # unless the app starts a response
        started_response = False
        extra: dict[str, str] = {}

        async def send_with_id(message: Message) -> None:
            nonlocal status, started_response
            if message["type"] == "http.response.start":
                started_response = True
                status = message["status"]
                headers = list(message.get("headers", ()))
                headers.append((b"x-request-id", request_id.encode()))
                for key, value in headers:
                    if key.lower() == b"x-plan-cache":
                        extra["cache"] = value.decode()
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except ClientDisconnect:
            if not started_response:
                status = CLIENT_CLOSED
                self.metrics.client_disconnects.inc()
        except Exception:
            if not started_response:
                await _server_error(send_with_id)
            raise
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"  # bounded label values
            method = scope.get("method", "")
            self.metrics.requests.labels(template, method, str(status)).inc()
            self.metrics.latency.labels(template).observe(elapsed)
            if self.logger.isEnabledFor(logging.INFO):
                self._log(scope, request_id, status, elapsed, extra)

    def _log(
        self, scope: Scope, request_id: str, status: int, elapsed: float, extra: dict[str, str]
    ) -> None:
        client = scope.get("client")
        access: dict[str, Any] = {
            "ts": round(time.time(), 3),
            "request_id": request_id,
            "method": scope.get("method"),
            "path": scope.get("path"),
            "status": status,
            "duration_ms": round(elapsed * 1e3, 3),
            "client": f"{client[0]}:{client[1]}" if client else None,
            **extra,
        }
        self.logger.info("access", extra={"access": access})
