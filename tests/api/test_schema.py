"""The OpenAPI schema against the service: generated requests, valid and invalid, to every
operation; no answer is a 500, and every answer matches what the schema promises."""

from __future__ import annotations

from typing import TYPE_CHECKING

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from planner.api import create_app
from planner.api.settings import Settings

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase

CASES = 500  # generated requests, at least
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
OPERATIONS = [
    ("/plan", "POST"),
    ("/validate", "POST"),
    ("/healthz", "GET"),
    ("/targets", "GET"),
    ("/metrics", "GET"),
    ("/examples", "GET"),
    ("/examples/{name}", "GET"),
]

# Small limits keep each generated request cheap: the solve-time cap bounds every plan, the
# access budget every emulation, whatever the generated time_limit, block or loops.
APP = create_app(
    Settings(
        solver_pool="threads",  # fast to start; tests/test_api_service.py covers processes
        max_time_limit=0.02,
        max_buffers=16,
        max_access_instances=10_000,
        access_log=False,
    )
)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)


def _cases() -> st.SearchStrategy[OpenApiCase]:
    strategies = [
        SCHEMA[path][method].as_strategy(generation_mode=mode)
        for path, method in OPERATIONS
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    ]
    return st.one_of(strategies)


def test_generated_requests_match_the_schema() -> None:
    seen: dict[tuple[str, str], int] = {}

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,  # the same cases on every run
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_cases())
    def check(case: OpenApiCase) -> None:
        key = (case.operation.path, case.method.upper())
        seen[key] = seen.get(key, 0) + 1
        response = case.call()
        case.validate_response(response, checks=CHECKS)

    check()
    assert sum(seen.values()) >= CASES
    assert set(seen) == set(OPERATIONS)
