"""Random requests over the whole wire format (``tests.wire``): every one gets a plan the
static validator accepts, or a ``RequestError`` whose every error names a field; never an
``InternalError``, a bare exception or an error without a ``loc``.

The examples are derandomized (the same ones on every run) and each plans within a small
time limit, so the property costs tens of seconds in the suite. Run it longer with
``WIRE_FUZZ_EXAMPLES=5000`` (and ``WIRE_FUZZ_SEED`` to draw others).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.validators import validate_plan
from tests.support.wire import wire_requests

EXAMPLES = int(os.environ.get("WIRE_FUZZ_EXAMPLES", "600"))
SEED = int(os.environ.get("WIRE_FUZZ_SEED", "0"))


def _plan_or_field_errors(data: dict[str, Any]) -> None:
    refused: RequestError | None
    try:
        plan = planner.plan(data)
    except RequestError as exc:
        refused = exc
    else:
        refused = None
    if refused is not None:
        named = [e for e in refused.errors if e["loc"] and e["msg"] and e["type"]]
        assert named, str(refused)
        assert named == refused.errors, refused.errors
        return
    report = validate_plan(parse_request(data), plan)
    assert report.valid, report.violations[:3]
    for option in plan.pareto:
        assert validate_plan(parse_request(data), option.plan).valid


@seed(SEED)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=SEED == 0,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(wire_requests())
def test_every_request_plans_or_names_a_field(data: dict[str, Any]) -> None:
    _plan_or_field_errors(data)
