"""Python client of the planning service: ``planner.Client`` and ``planner.AsyncClient``.

They take and return the library's models (``PlanRequest`` in, ``Plan`` and
``ValidationReport`` out), so code moves between ``planner.plan`` (embedded, no server) and a
shared service by changing one line. Server errors become the planner's error tree
(``planner.core.errors``): 422 a ``RequestError`` (``FormatError`` for a body that is not
JSON), 413 a ``PayloadTooLargeError``, 500 an ``InternalError``; a ``ServiceError`` when the
service could not answer: ``ServiceUnavailableError`` (503 on every try),
``ServiceConnectionError`` (no connection or no response on every try) or
``UnexpectedResponseError`` (any other status, or a body not as promised).

503s and connection failures are retried with exponential backoff (``Retry-After`` wins when
the server sends it); a plan is a pure function of its request, so a retry is always safe.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from planner.core.errors import (
    FormatError,
    InternalError,
    PayloadTooLargeError,
    PlannerError,
    RequestError,
    ServiceConnectionError,
    ServiceError,
    ServiceUnavailableError,
    UnexpectedResponseError,
)
from planner.core.models import Plan, PlanRequest, ValidationReport
from planner.core.targets import DeviceProfile

if TYPE_CHECKING:  # httpx and asyncio load with the first client, not with planner
    import httpx

__all__ = [
    "AsyncClient",
    "CheckReport",
    "Client",
    "EmulatorReport",
    "EmulatorViolation",
    "emit",
    "error_for_status",
]

M = TypeVar("M", bound=BaseModel)
RequestLike = PlanRequest | Mapping[str, Any] | str | bytes
PlanLike = Plan | Mapping[str, Any] | str | bytes

DEFAULT_TIMEOUT = 60.0  # s; above the server's default solve-time cap of 30 s
MAX_BACKOFF = 10.0  # s; the longest wait between two tries, whatever Retry-After says


# --- wire models of POST /validate ------------------------------------------------------------


class EmulatorViolation(BaseModel):
    """One problem the emulator saw while running the kernel's accesses (a race, a stale
    read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str = Field(description='What kind: "race", "clobbered", "too_many_paths", ...')
    message: str = Field(description="The buffers, bytes, threads and points involved.")


class EmulatorReport(BaseModel):
    """What the CPU emulator found: every violation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    violations: list[EmulatorViolation] = Field(
        default_factory=list, description="Every problem the emulator saw; empty: none."
    )

    @property
    def valid(self) -> bool:
        """No violation."""
        return not self.violations


class CheckReport(BaseModel):
    """The answer of ``POST /validate``: the static check, and the emulator's when asked."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    valid: bool = Field(description="Every check that ran found nothing.")
    static: ValidationReport = Field(description="The static check's report.")
    emulator: EmulatorReport | None = Field(
        default=None, description="The CPU emulator's report; null when not asked for."
    )


# --- errors and retries -----------------------------------------------------------------------


def _field_errors(body: Any) -> list[dict[str, Any]] | None:
    """The ``detail`` list of an error body, ``loc`` without FastAPI's leading "body"."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, list) or not all(isinstance(e, dict) for e in detail):
        return None
    errors = []
    for err in detail:
        loc = list(err.get("loc") or [])
        errors.append({**err, "loc": loc[1:] if loc[:1] == ["body"] else loc})
    return errors


def error_for_status(status: int, content: bytes) -> PlannerError:
    """The planner error a non-2xx answer stands for."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    errors = _field_errors(body)
    text = content[:200].decode("utf-8", "replace")
    if status == 422 and errors is not None:
        if len(errors) == 1 and errors[0].get("type") == "json_invalid":
            return FormatError(errors)
        return RequestError(errors)
    if status == 413 and errors is not None:
        return PayloadTooLargeError(errors)
    if status == 500 and errors:
        return InternalError(str(errors[0].get("msg", text)))
    if status == 503:
        msg = str(errors[0].get("msg")) if errors else "service unavailable"
        return ServiceUnavailableError(msg)
    return UnexpectedResponseError(f"unexpected HTTP {status} from the service: {text}", status)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


# --- request building and response reading, shared by both clients -----------------------------


def _json_body(value: BaseModel | Mapping[str, Any] | str | bytes) -> Any:
    """A JSON-ready value: models dumped, mappings as they are, JSON text parsed."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError:
            raise FormatError(
                [{"loc": [], "msg": "malformed JSON given to the client", "type": "json_invalid"}]
            ) from None
    return dict(value)


def _plan_content(request: RequestLike) -> bytes:
    if isinstance(request, bytes):
        return request  # sent as is: the server reports any error in it
    if isinstance(request, str):
        return request.encode()
    if isinstance(request, PlanRequest):
        return request.model_dump_json().encode()
    return json.dumps(dict(request)).encode()


def _check_content(request: RequestLike, plan: PlanLike, emulate: bool) -> bytes:
    body = {"request": _json_body(request), "plan": _json_body(plan), "emulate": emulate}
    return json.dumps(body).encode()


def _read(response: httpx.Response, model: type[M]) -> M:
    if response.status_code != 200:
        raise error_for_status(response.status_code, response.content)
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise UnexpectedResponseError(
            f"the service's answer is not a valid {model.__name__}: {exc.errors()[0]['msg']}",
            response.status_code,
        ) from None


def _targets(response: httpx.Response) -> dict[str, DeviceProfile]:
    if response.status_code != 200:
        raise error_for_status(response.status_code, response.content)
    try:
        names = [f.name for f in dataclasses.fields(DeviceProfile)]
        return {t["name"]: DeviceProfile(**{k: t[k] for k in names}) for t in response.json()}
    except (ValueError, TypeError, KeyError) as exc:
        raise UnexpectedResponseError(f"the service's targets are malformed: {exc}", 200) from None


def _health(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise error_for_status(response.status_code, response.content)
    body = response.json()
    if not isinstance(body, dict):
        raise UnexpectedResponseError("the service's health answer is not an object", 200)
    return {str(k): v for k, v in body.items()}


class _Attempts:
    """The retry state machine of one call. After each try it says: this is the answer
    (a response other than 503), wait so many seconds and try again (``retries`` times at
    most, delays doubling from ``backoff``, a ``Retry-After`` winning), or give up with
    ``ServiceConnectionError`` or ``ServiceUnavailableError``."""

    def __init__(self, retries: int, backoff: float, target: str) -> None:
        self.left = retries
        self.delay = backoff  # s; the next wait unless the server names one
        self.target = target  # the URL tried, for the error

    def wait(self, attempt: httpx.Response | httpx.TransportError) -> float | None:
        """None when ``attempt`` is the answer; else the seconds to wait before the next try.
        Raises the call's error when no try is left."""
        import httpx

        if isinstance(attempt, httpx.Response):
            if attempt.status_code != 503:
                return None
            retry_after = _retry_after(attempt)
        else:
            retry_after = None
        if self.left <= 0:
            raise self._give_up(attempt) from None
        self.left -= 1
        delay = retry_after if retry_after is not None else self.delay
        self.delay *= 2
        return min(delay, MAX_BACKOFF)

    def _give_up(self, attempt: httpx.Response | httpx.TransportError) -> ServiceError:
        import httpx

        if isinstance(attempt, httpx.TransportError):
            return ServiceConnectionError(f"no answer from {self.target}: {attempt!r}")
        error = error_for_status(503, attempt.content)
        assert isinstance(error, ServiceUnavailableError)
        error.retry_after = _retry_after(attempt)
        return error


def _headers(content: bytes | None) -> dict[str, str] | None:
    return {"content-type": "application/json"} if content is not None else None


def _check_options(retries: int, backoff: float) -> None:
    if retries < 0:
        raise ValueError(f"Invalid 'retries' argument: {retries!r}; must be >= 0")
    if backoff < 0:
        raise ValueError(f"Invalid 'backoff' argument: {backoff!r}; must be >= 0")


# --- the clients ------------------------------------------------------------------------------


def emit(request: RequestLike, plan: PlanLike, kind: str = "cuda") -> str:
    """``plan`` as text, made here (no request to the service): ``"cuda"`` (a C++ snippet
    declaring the arena and a typed pointer per buffer), ``"mlir"``
    (``gpu.dynamic_shared_memory`` and a ``memref.view`` per buffer) or ``"svg"`` (the memory
    map). Raises RequestError for a bad request or plan, ValueError for an unknown kind."""
    from planner.core.io import parse_plan, parse_request
    from planner.emit import EMITTERS

    if kind not in EMITTERS:
        raise ValueError(f"unknown emitter {kind!r}; known: {', '.join(EMITTERS)}")
    data = dict(request) if isinstance(request, Mapping) else request
    shown = dict(plan) if isinstance(plan, Mapping) else plan
    return EMITTERS[kind](parse_request(data), parse_plan(shown))


class Client:
    """A blocking client: ``Client("http://planner:8000").plan(request) -> Plan``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.1,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        _check_options(retries, backoff)
        self.retries = retries
        self.backoff = backoff  # s before the first retry; doubles each time
        import httpx

        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, headers=headers
        )

    def plan(self, request: RequestLike) -> Plan:
        """The service's plan for ``request``, as ``planner.plan`` would give it."""
        return _read(self._send("POST", "/plan", _plan_content(request)), Plan)

    def validate(self, request: RequestLike, plan: PlanLike) -> ValidationReport:
        """The static check of ``plan``, as ``planner.validate`` would give it."""
        return self.check(request, plan).static

    def check(self, request: RequestLike, plan: PlanLike, *, emulate: bool = False) -> CheckReport:
        """The static check and, with ``emulate``, the emulator's report."""
        content = _check_content(request, plan, emulate)
        return _read(self._send("POST", "/validate", content), CheckReport)

    def health(self) -> dict[str, Any]:
        """The service's liveness answer: ``{"status": "ok", "version": ..., "extras": [...]}``."""
        return _health(self._send("GET", "/healthz"))

    def emit(self, request: RequestLike, plan: PlanLike, kind: str = "cuda") -> str:
        """``plan`` as CUDA, MLIR or SVG text (``emit``; made here, not by the service)."""
        return emit(request, plan, kind)

    def targets(self) -> dict[str, DeviceProfile]:
        """The device profiles the service knows, by name."""
        return _targets(self._send("GET", "/targets"))

    def _send(self, method: str, path: str, content: bytes | None = None) -> httpx.Response:
        import httpx

        attempts = _Attempts(self.retries, self.backoff, f"{self._http.base_url}{path}")
        headers = _headers(content)
        while True:
            attempt: httpx.Response | httpx.TransportError
            try:
                attempt = self._http.request(method, path, content=content, headers=headers)
            except httpx.TransportError as exc:
                attempt = exc
            delay = attempts.wait(attempt)
            if delay is None:
                assert isinstance(attempt, httpx.Response)
                return attempt
            time.sleep(delay)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """The asyncio client: ``await AsyncClient(url).plan(request) -> Plan``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.1,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        _check_options(retries, backoff)
        self.retries = retries
        self.backoff = backoff  # s before the first retry; doubles each time
        import httpx

        self._http = httpx.AsyncClient(
            base_url=base_url, timeout=timeout, transport=transport, headers=headers
        )

    async def plan(self, request: RequestLike) -> Plan:
        """The service's plan for ``request``, as ``planner.plan`` would give it."""
        return _read(await self._send("POST", "/plan", _plan_content(request)), Plan)

    async def validate(self, request: RequestLike, plan: PlanLike) -> ValidationReport:
        """The static check of ``plan``, as ``planner.validate`` would give it."""
        return (await self.check(request, plan)).static

    async def check(
        self, request: RequestLike, plan: PlanLike, *, emulate: bool = False
    ) -> CheckReport:
        """The static check and, with ``emulate``, the emulator's report."""
        content = _check_content(request, plan, emulate)
        return _read(await self._send("POST", "/validate", content), CheckReport)

    async def health(self) -> dict[str, Any]:
        """The service's liveness answer: ``{"status": "ok", "version": ..., "extras": [...]}``."""
        return _health(await self._send("GET", "/healthz"))

    def emit(self, request: RequestLike, plan: PlanLike, kind: str = "cuda") -> str:
        """``plan`` as CUDA, MLIR or SVG text (``emit``; made here, not by the service)."""
        return emit(request, plan, kind)

    async def targets(self) -> dict[str, DeviceProfile]:
        """The device profiles the service knows, by name."""
        return _targets(await self._send("GET", "/targets"))

    async def _send(self, method: str, path: str, content: bytes | None = None) -> httpx.Response:
        import asyncio

        import httpx

        attempts = _Attempts(self.retries, self.backoff, f"{self._http.base_url}{path}")
        headers = _headers(content)
        while True:
            attempt: httpx.Response | httpx.TransportError
            try:
                attempt = await self._http.request(method, path, content=content, headers=headers)
            except httpx.TransportError as exc:
                attempt = exc
            delay = attempts.wait(attempt)
            if delay is None:
                assert isinstance(attempt, httpx.Response)
                return attempt
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
