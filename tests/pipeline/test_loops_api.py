"""Loops, branches and live ranges through POST /plan: a plan, and one 422 per new kind of
bad input, each naming the field and the value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.api import create_app
from planner.api.settings import Settings
from planner.core.io import parse_request
from planner.core.models import Plan


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(Settings(solver_pool="threads"))) as c:
        yield c


def _request(**changes: Any) -> dict[str, Any]:
    """A loop over [2, 6) with a branch in its body, and a buffer of two ranges."""
    request: dict[str, Any] = {
        "name": "loop_branch",
        "barriers": [2],
        "loops": [{"start": 2, "end": 6, "trips": 4}],
        "branches": [{"arms": [[3, 4], [4, 5]]}],
        "buffers": [
            {"id": "w", "size": 64, "start": 0, "end": 8},
            {"id": "x", "size": 32, "start": 3, "end": 4},
            {"id": "y", "size": 32, "start": 4, "end": 5},
            {"id": "z", "size": 32, "ranges": [[0, 2], [6, 8]]},
        ],
        "options": {"sync": "insert", "time_limit": 2.0},
    }
    request.update(changes)
    return request


def _rejected(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/plan", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert len(detail) == 1, detail
    error: dict[str, Any] = detail[0]
    return error


def test_plans_loops_branches_and_ranges(client: TestClient) -> None:
    request = _request()
    response = client.post("/plan", json=request)
    assert response.status_code == 200, response.text
    plan = Plan.model_validate_json(response.content)
    assert planner.validate(request, plan).valid
    # x and y are in different arms: one offset. z's ranges sit around the loop, beside w.
    offsets = {p.id: p.offset for p in plan.placements}
    assert offsets["x"] == offsets["y"]
    assert plan.arena_bytes == 64 + 32
    assert plan.barriers.static is not None
    assert plan.barriers.executions is not None


def _buffers(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [*_request()["buffers"], *extra]


CASES: list[tuple[str, dict[str, Any], list[Any], str, str]] = [
    (
        "ranges_and_start_end",
        {"buffers": _buffers({"id": "v", "size": 8, "start": 0, "ranges": [[0, 1]]})},
        ["body", "buffers", 4, "start"],
        "ranges_and_start_end",
        "not both",
    ),
    (
        "ranges_overlap",
        {"buffers": _buffers({"id": "v", "size": 8, "ranges": [[0, 3], [2, 4]]})},
        ["body", "buffers", 4, "ranges", 1],
        "ranges_overlap",
        "[2, 4)",
    ),
    (
        "empty_range",
        {"buffers": _buffers({"id": "v", "size": 8, "ranges": [[0, 3], [5, 5]]})},
        ["body", "buffers", 4, "ranges", 1],
        "empty_lifetime",
        "[5, 5)",
    ),
    (
        "access_in_gap",
        {
            "buffers": _buffers(
                {
                    "id": "v",
                    "size": 8,
                    "ranges": [[0, 2], [6, 8]],
                    "accesses": [{"op": "read", "at": 4, "bytes": 4, "threads": "all"}],
                }
            )
        },
        ["body", "buffers", 4, "accesses", 0, "at"],
        "access_outside_lifetime",
        "point 4",
    ),
    (
        "empty_loop",
        {"loops": [{"start": 2, "end": 6}, {"start": 7, "end": 7}]},
        ["body", "loops", 1, "end"],
        "empty_loop",
        "(7)",
    ),
    (
        "trips_below_one",
        {"loops": [{"start": 2, "end": 6, "trips": 0}]},
        ["body", "loops", 0, "trips"],
        "greater_than_equal",
        "1",
    ),
    (
        "loops_overlap",
        {"loops": [{"start": 2, "end": 6}, {"start": 5, "end": 8}]},
        ["body", "loops", 1],
        "loops_overlap",
        "loops.0 [2, 6) and loops.1 [5, 8)",
    ),
    (
        "duplicate_loop",
        {"loops": [{"start": 2, "end": 6}, {"start": 2, "end": 6}]},
        ["body", "loops", 1],
        "duplicate_loop",
        "loops.0",
    ),
    (
        "too_deep",
        {"loops": [{"start": k, "end": 20 - k} for k in range(9)], "branches": []},
        ["body", "loops", 8],
        "program_too_large",
        "limit is 8",
    ),
    (
        "too_many_paths",
        {
            "loops": [],
            "branches": [{"arms": [[2 * k, 2 * k + 1], [2 * k + 1, 2 * k + 2]]} for k in range(13)],
            "buffers": [{"id": "w", "size": 8, "start": 0, "end": 30}],
        },
        ["body", "branches"],
        "program_too_large",
        "4096",
    ),
    (
        "empty_arm",
        {"branches": [{"arms": [[3, 3], [3, 5]]}]},
        ["body", "branches", 0, "arms", 0],
        "empty_arm",
        "[3, 3)",
    ),
    (
        "arms_overlap",
        {"branches": [{"arms": [[3, 5], [4, 5]]}]},
        ["body", "branches", 0, "arms", 1],
        "arms_overlap",
        "[4, 5)",
    ),
    (
        "arms_not_contiguous",
        {"branches": [{"arms": [[3, 4], [5, 6]]}]},
        ["body", "branches", 0, "arms", 1],
        "arms_not_contiguous",
        "[5, 6)",
    ),
    (
        "branches_overlap",
        {"loops": [], "branches": [{"arms": [[3, 4], [4, 5]]}, {"arms": [[4, 6], [6, 7]]}]},
        ["body", "branches", 1],
        "branches_overlap",
        "branches.0",
    ),
    (
        "loop_crosses_arm",
        {"loops": [{"start": 4, "end": 7}]},
        ["body", "loops", 0],
        "loop_crosses_arm",
        "branches.0",
    ),
    (
        "range_crosses_arm",
        {"buffers": _buffers({"id": "v", "size": 8, "start": 2, "end": 4})},
        ["body", "buffers", 4, "end"],
        "range_crosses_arm",
        "[2, 4)",
    ),
    (
        "ranges_live_at_once",
        {"buffers": _buffers({"id": "v", "size": 8, "ranges": [[0, 3], [5, 7]]})},
        ["body", "buffers", 4, "ranges"],
        "ranges_overlap",
        "ranges [0, 3) and [5, 7) of buffer 'v' are live at once: a range that enters or "
        "leaves loops.0 [2, 6)",
    ),
    (
        "unprotected_reuse",
        {"options": {"sync": "existing"}, "barriers": []},
        ["body", "barriers"],
        "unprotected_reuse",
        "own bytes",
    ),
    (
        "too_few_barriers",
        {
            # The loop needs one barrier in its body, u's second range one after point 8.
            "options": {"sync": "insert", "max_new_barriers": 1},
            "barriers": [],
            "buffers": _buffers({"id": "u", "size": 8, "ranges": [[8, 9], [10, 11]]}),
        },
        ["body", "options", "max_new_barriers"],
        "too_few_barriers",
        "max_new_barriers is 1",
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "loc", "kind", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_rejects(
    client: TestClient, name: str, change: dict[str, Any], loc: list[Any], kind: str, fragment: str
) -> None:
    error = _rejected(client, _request(**change))
    assert error["loc"] == loc, name
    assert error["type"] == kind
    assert fragment in error["msg"]


def test_spills_a_loop_request_over_capacity(client: TestClient) -> None:
    body = _request(capacity=64, options={"sync": "insert", "overflow": "spill"})
    response = client.post("/plan", json=body)
    assert response.status_code == 200, response.text
    plan = Plan.model_validate(response.json())
    assert plan.spilled == ["w"]
    assert plan.arena_bytes <= 64
    assert planner.validate(parse_request(body), plan).valid
