"""The request and plan schemas document every field (units and defaults in words), and the
request schema's example is a request that plans."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.api.app import create_app
from planner.api.settings import Settings
from planner.core.models import Plan, PlanRequest
from planner.core.models.request import EXAMPLE


def _undocumented(schema: dict[str, Any]) -> list[str]:
    """Every property, in the schema and its definitions, without a description (its own,
    or, for a bare reference to a model, the model's)."""
    defs = schema.get("$defs", {})
    missing = []
    for name, model in [("(root)", schema), *defs.items()]:
        for prop, spec in model.get("properties", {}).items():
            target = defs.get(str(spec.get("$ref", "")).rsplit("/", 1)[-1], {})
            if not spec.get("description") and not target.get("description"):
                missing.append(f"{name}.{prop}")
    return missing


@pytest.mark.parametrize("model", [PlanRequest, Plan], ids=["request", "plan"])
def test_every_field_has_a_description(model: type[PlanRequest] | type[Plan]) -> None:
    schema = model.model_json_schema()
    assert _undocumented(schema) == []


def _objects(node: object) -> list[dict[str, Any]]:
    """Every schema object with properties, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            found.append(node)
        for value in node.values():
            found += _objects(value)
    elif isinstance(node, list):
        for value in node:
            found += _objects(value)
    return found


def test_openapi_documents_the_request_fields() -> None:
    app = create_app(Settings(solver_pool="threads", solver_workers=1))
    with TestClient(app) as client:
        spec = client.get("/openapi.json").json()
    body = spec["paths"]["/plan"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/PlanRequest"}  # a named component
    components = spec["components"]["schemas"]
    names = {name for obj in _objects(components["PlanRequest"]) for name in obj["properties"]}
    names |= {n for k in ("Buffer", "Access", "Options") for n in components[k]["properties"]}
    assert {"buffers", "time_limit", "accesses", "threads"} <= names
    # Every field of every component says what it is (a bare reference: its component's
    # description); every reference resolves.
    for component, schema in components.items():
        for obj in _objects(schema):
            for name, prop in obj["properties"].items():
                referred = set(prop) == {"$ref"} and components[prop["$ref"].rsplit("/")[-1]]
                assert prop.get("description") or referred, f"{component}.{name}"
    refs = re.findall(r"#/components/schemas/([\w.-]+)", json.dumps(spec))
    assert refs
    assert set(refs) <= set(components)


def test_the_schema_example_plans() -> None:
    (example,) = PlanRequest.model_json_schema()["examples"]
    assert example == EXAMPLE
    plan = planner.plan(example)
    assert planner.validate(example, plan).valid
    assert plan.status == "optimal"
    assert plan.arena_bytes == 16384  # C_s over A_s and B_s after the barrier at 4
