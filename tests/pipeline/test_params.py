"""Requests with parameters: binding, the checks over the declared ranges, and their errors in
the library, the service and the command line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.cli import main
from planner.core.params import parse_template
from tests.support.apps import threads_app

JSON = {"content-type": "application/json"}

TEMPLATE: dict[str, Any] = {
    "name": "matmul",
    "target": "sm_80",
    "alignment": 16,
    "barriers": [2],
    "params": {
        "BLOCK_M": {"values": [64, 128]},
        "BLOCK_K": {"values": [32, 64], "default": 64},
        "STAGES": {"min": 2, "max": 4},
    },
    "loops": [{"start": 0, "end": 1, "trips": "STAGES * 4"}],
    "buffers": [
        {"id": "A", "size": "STAGES * BLOCK_M * BLOCK_K * 2", "start": 0, "end": 2},
        {
            "id": "B",
            "size": "STAGES * BLOCK_K * 128 * 2",
            "start": 0,
            "end": 2,
            "alignment": "min(BLOCK_M, 128)",
        },
        {"id": "C", "size": "BLOCK_M * 128 * 4", "start": 2, "end": 4},
    ],
    "options": {"sync": "existing"},
}


def _with(path: tuple[Any, ...], value: Any, base: dict[str, Any] = TEMPLATE) -> dict[str, Any]:
    data = copy.deepcopy(base)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _error(data: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(planner.RequestError) as caught:
        planner.plan(data)
    first: dict[str, Any] = dict(caught.value.errors[0])
    return first


def test_binding_gives_an_ordinary_request() -> None:
    request = planner.bind(TEMPLATE, {"BLOCK_M": 128, "STAGES": 3})
    sizes = {b.id: b.size for b in request.buffers}
    assert sizes == {"A": 3 * 128 * 64 * 2, "B": 3 * 64 * 128 * 2, "C": 128 * 128 * 4}
    assert request.buffers[1].alignment == 128
    assert request.loops[0].trips == 12
    assert "params" not in request.model_dump()


def test_a_request_with_params_plans_its_default_configuration() -> None:
    plan = planner.plan(TEMPLATE)
    alone = planner.bind(TEMPLATE, {"BLOCK_M": 64, "BLOCK_K": 64, "STAGES": 2})
    assert plan == planner.plan(alone)
    assert planner.validate(alone, plan).valid


def test_a_request_without_params_reads_as_before() -> None:
    plain = planner.bind(TEMPLATE, {})
    data = plain.model_dump(mode="json")
    plan = planner.plan(plain)
    assert planner.validate(plain, plan).valid
    assert planner.plan(data) == planner.plan(json.dumps(data)) == plan


@pytest.mark.parametrize(
    ("path", "value", "loc", "words"),
    [
        (("buffers", 0, "size"), "BLOCK_M -", ["buffers", 0, "size"], "found the end"),
        (("buffers", 0, "size"), "BLOCK_M - 64", ["buffers", 0, "size"], "can be 0 (zero"),
        (("buffers", 0, "size"), "BLOCK_M - 128", ["buffers", 0, "size"], "can be -64 (negative"),
        (("buffers", 0, "size"), "BLOCK_M ** 2", ["buffers", 0, "size"], "expected a number"),
        (("buffers", 0, "size"), "WARPS * 2", ["buffers", 0, "size"], "unknown parameter 'WARPS'"),
        (("buffers", 0, "size"), "BLOCK_M // (STAGES - 3)", ["buffers", 0, "size"], "division"),
        (("buffers", 0, "size"), "BLOCK_M * " * 8 + "BLOCK_M", ["buffers", 0, "size"], "overflow"),
        (("buffers", 0, "size"), "BLOCK_M * 2**40", ["buffers", 0, "size"], "expected a number"),
        (("buffers", 0, "size"), "BLOCK_M * 1099511627776", ["buffers", 0, "size"], "too large"),
        (("buffers", 0, "size"), "__import__('os')", ["buffers", 0, "size"], "unexpected"),
        (("loops", 0, "trips"), "STAGES - 2", ["loops", 0, "trips"], "can be 0"),
        (("buffers", 1, "alignment"), "BLOCK_M - 16", ["buffers", 1, "alignment"], "not a power"),
        (("buffers", 0, "start"), "STAGES", ["buffers", 0, "start"], "valid integer"),
        (("params", "STAGES"), {"min": 4, "max": 2}, ["params", "STAGES", "max"], "less than min"),
        (("params", "STAGES"), {"values": [2], "min": 1}, ["params", "STAGES", "min"], "not both"),
        (("params", "STAGES"), {}, ["params", "STAGES"], "give values"),
        (
            ("params", "STAGES"),
            {"values": [2, 3], "default": 5},
            ["params", "STAGES", "default"],
            "not one",
        ),
        (
            ("params", "STAGES"),
            {"min": 1, "max": "4"},
            ["params", "STAGES", "max"],
            "valid integer",
        ),
        (("params", "min"), {"values": [1]}, ["params", "min"], "not an identifier"),
        (("params",), [1, 2], ["params"], "params is an object"),
    ],
)
def test_rejects_bad_parameters_naming_field_and_value(
    path: tuple[Any, ...], value: Any, loc: list[Any], words: str
) -> None:
    error = _error(_with(path, value))
    assert error["loc"] == loc
    assert words in error["msg"]


def test_an_alignment_that_is_no_power_of_two_names_the_configuration() -> None:
    data = _with(("params", "BLOCK_M"), {"values": [64, 96]})
    data["buffers"][1]["alignment"] = "BLOCK_M"
    plan = planner.plan(data)  # the default, 64, is fine
    assert plan.status == "optimal"
    assert planner.validate(planner.bind(data, {}), plan).valid
    with pytest.raises(planner.RequestError) as caught:
        planner.bind(data, {"BLOCK_M": 96})
    error = caught.value.errors[0]
    assert error["loc"] == ["buffers", 1, "alignment"]
    assert "96 is not a power of two" in error["msg"]
    assert "BLOCK_M=96" in error["msg"]


@pytest.mark.parametrize(
    ("config", "loc", "words"),
    [
        ({"BLOCK_N": 64}, ["config", "BLOCK_N"], "unknown parameter 'BLOCK_N'"),
        ({"BLOCK_M": 96}, ["config", "BLOCK_M"], "not one of its declared values (64, 128)"),
        ({"STAGES": 9}, ["config", "STAGES"], "not one of its declared values (2..4)"),
        ({"STAGES": "3"}, ["config", "STAGES"], "is not an integer"),
    ],
)
def test_rejects_bad_configurations(config: dict[str, Any], loc: list[Any], words: str) -> None:
    with pytest.raises(planner.RequestError) as caught:
        planner.bind(TEMPLATE, config)
    assert caught.value.errors[0]["loc"] == loc
    assert words in caught.value.errors[0]["msg"]


def test_ranges_with_steps() -> None:
    template = parse_template(_with(("params", "STAGES"), {"min": 2, "max": 9, "step": 3}))
    assert template.params["STAGES"].enumerate() == [2, 5, 8]
    assert template.params["STAGES"].bounds == (2, 8)
    with pytest.raises(planner.RequestError):
        template.bind({"STAGES": 3})


def test_service_answers_a_bad_expression_with_422() -> None:
    with TestClient(threads_app()) as client:
        bad = _with(("buffers", 0, "size"), "BLOCK_M - 128")
        response = client.post("/plan", content=json.dumps(bad), headers=JSON)
        assert response.status_code == 422
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "buffers", 0, "size"]
        assert "BLOCK_M - 128" in detail["msg"]
        ok = client.post("/plan", content=json.dumps(TEMPLATE), headers=JSON)
        assert ok.status_code == 200
        assert ok.json() == json.loads(planner.plan(TEMPLATE).model_dump_json())
        assert planner.validate(planner.bind(TEMPLATE, {}), ok.json()).valid


def test_command_line_reports_a_bad_expression_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_with(("loops", 0, "trips"), "STAGES - 2")))
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "loops.0.trips" in err[0]
    assert "'STAGES - 2' can be 0" in err[0]


def test_command_line_plans_one_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "family.json"
    path.write_text(json.dumps(TEMPLATE))
    assert main(["plan", str(path), "--param", "BLOCK_M=128", "--param", "STAGES=3", "-q"]) == 0
    plan = planner.Plan.model_validate_json(capsys.readouterr().out)
    bound = planner.bind(TEMPLATE, {"BLOCK_M": 128, "STAGES": 3})
    assert plan == planner.plan(bound)
    assert planner.validate(bound, plan).valid
    assert main(["plan", str(path), "--param", "STAGES=7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "STAGES = 7 is not one of its declared values (2..4)" in err[0]
