"""POST /plan with an asynchronous access that no sync of the request completes: the plan
inserts its wait under sync "insert"; under "existing" it is a 422 naming the access."""

from __future__ import annotations

from fastapi.testclient import TestClient

from planner.api import create_app
from planner.api.settings import Settings
from planner.core.io import parse_request
from planner.core.models import Plan
from tests.support.async_requests import codes
from tests.support.uncovered_async import uncovered


def test_the_service_plans_the_wait_and_refuses_under_existing() -> None:
    with TestClient(create_app(Settings(solver_pool="threads"))) as client:
        data = uncovered("wgmma", "insert")
        response = client.post("/plan", json=data)
        assert response.status_code == 200, response.text
        plan = Plan.model_validate_json(response.content)
        assert [(w.kind, w.at, w.origin) for w in plan.waits] == [("wgmma", 2, "inserted")]
        assert codes(parse_request(data), plan) == (set(), set())
        response = client.post("/plan", json=uncovered("wgmma", "existing"))
        assert response.status_code == 422
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", "buffers", 0, "accesses", 1, "agent"]
        assert error["type"] == "uncovered_async_access"
        assert error["input"] == "mma"
