"""Every kind of bad request is one error list naming the field (loc) and the value."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from planner.core.dtypes import DTYPES
from planner.core.errors import RequestError
from planner.core.io import canonical_chunks, canonical_json, parse_request, request_sha256
from planner.core.models import PlanRequest
from planner.core.targets import TARGETS
from planner.generate import model_request

BASE: dict[str, Any] = {
    "name": "k",
    "block": [128],
    "grid": [4],
    "barriers": [2],
    "options": {},
    "buffers": [
        {"id": "A", "size": 256, "start": 0, "end": 3, "alignment": 16},
        {"id": "B", "size": 256, "start": 3, "end": 5},
    ],
}


def bad(path: list[Any], value: Any) -> dict[str, Any]:
    request = copy.deepcopy(BASE)
    node: Any = request
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return request


def errors_of(request: dict[str, Any] | str | bytes, **kwargs: Any) -> list[dict[str, Any]]:
    with pytest.raises(RequestError) as info:
        parse_request(request, **kwargs)
    return info.value.errors


ACCESS = {"op": "read", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}

CASES = [
    # (request, loc, type, text the message must contain)
    (bad(["buffers", 1, "end"], 2), ["buffers", 1, "end"], "empty_lifetime", "end (2)"),
    (bad(["buffers", 0, "size"], 0), ["buffers", 0, "size"], "greater_than_equal", "1"),
    (bad(["buffers", 0, "size"], 1 << 41), ["buffers", 0, "size"], "less_than_equal", ""),
    (bad(["buffers", 0, "start"], -1), ["buffers", 0, "start"], "greater_than_equal", ""),
    (
        bad(["buffers", 0, "alignment"], 24),
        ["buffers", 0, "alignment"],
        "alignment_not_power_of_two",
        "24",
    ),
    (bad(["alignment"], 3), ["alignment"], "alignment_not_power_of_two", "3"),
    (bad(["buffers", 1, "id"], "A"), ["buffers", 1, "id"], "duplicate_id", "'A'"),
    (
        bad(["buffers", 0, "offset"], 8),
        ["buffers", 0, "offset"],
        "misaligned_offset",
        "offset 8",
    ),
    (bad(["barriers"], [-1]), ["barriers", 0], "greater_than_equal", ""),
    (bad(["barriers"], [2, 9]), ["barriers", 1], "barrier_out_of_range", "point 9"),
    (
        bad(["options", "barrier_candidates"], [7]),
        ["options", "barrier_candidates", 0],
        "barrier_out_of_range",
        "7",
    ),
    (
        bad(["buffers", 0, "accesses"], [{**ACCESS, "at": 4}]),
        ["buffers", 0, "accesses", 0, "at"],
        "access_outside_lifetime",
        "point 4",
    ),
    (
        bad(["buffers", 0, "accesses"], [{**ACCESS, "bytes": 4, "offset": 1}]),
        ["buffers", 0, "accesses", 0, "index"],
        "access_outside_buffer",
        "[4, 516)",
    ),
    (
        bad(["buffers", 0, "accesses"], [{**ACCESS, "index": {"k": 1}}]),
        ["buffers", 0, "accesses", 0, "index", "k"],
        "unknown_index_variable",
        "'k'",
    ),
    (
        {**bad(["buffers", 0, "accesses"], [{**ACCESS, "index": {"blockIdx.x": 1}}]), "grid": None},
        ["buffers", 0, "accesses", 0, "index", "blockIdx.x"],
        "unknown_index_variable",
        "grid",
    ),
    (
        bad(
            ["buffers", 0],
            {
                **BASE["buffers"][0],
                "size": 8,
                "accesses": [{"op": "write", "at": 1, "bytes": 16, "threads": "all"}],
            },
        ),
        ["buffers", 0, "accesses", 0, "bytes"],
        "access_outside_buffer",
        "16-byte elements",
    ),
    (
        bad(["buffers", 0, "accesses"], [{"op": "read", "at": 1, "bytes": 4}]),
        ["buffers", 0, "accesses", 0, "index"],
        "missing_index",
        "threads",
    ),
    (
        bad(["buffers", 0, "accesses"], [{**ACCESS, "index": {"k" * 65: 1}, "loops": {"k": 1}}]),
        ["buffers", 0, "accesses", 0, "index", "k" * 65, "[key]"],
        "string_too_long",
        "64 characters",
    ),
    (
        bad(["buffers", 0, "accesses"], [{**ACCESS, "index": {"k": 1}, "loops": {"k" * 65: 1}}]),
        ["buffers", 0, "accesses", 0, "loops", "k" * 65, "[key]"],
        "string_too_long",
        "64 characters",
    ),
    (bad(["buffers", 0, "colour"], "red"), ["buffers", 0, "colour"], "extra_forbidden", ""),
    (bad(["target"], "sm_99"), ["target"], "unknown_target", "'sm_99'"),
    (bad(["block"], [2048]), ["block"], "block_too_large", "2048"),
    (bad(["options", "sync"], "sometimes"), ["options", "sync"], "literal_error", ""),
    (bad(["options", "time_limit"], 0), ["options", "time_limit"], "greater_than", ""),
    (bad(["options", "overflow"], "later"), ["options", "overflow"], "literal_error", ""),
    (
        bad(
            ["buffers"],
            [
                {**BASE["buffers"][0], "offset": 0},
                {"id": "B", "size": 8, "start": 1, "end": 5, "offset": 128},
            ],
        ),
        ["buffers", 1, "offset"],
        "pinned_overlap",
        "'A'",
    ),
]


@pytest.mark.parametrize(("request_", "loc", "type_", "text"), CASES)
def test_rejects_bad_input(request_: dict[str, Any], loc: list[Any], type_: str, text: str) -> None:
    errors = errors_of(request_)
    assert [e["loc"] for e in errors] == [loc]
    assert errors[0]["type"] == type_
    assert text in errors[0]["msg"]


def test_rejects_too_many_buffers() -> None:
    errors = errors_of(BASE, max_buffers=1)
    assert errors[0]["loc"] == ["buffers"]
    assert errors[0]["type"] == "too_many_buffers"
    assert "2 buffers" in errors[0]["msg"]


def test_rejects_malformed_json() -> None:
    with pytest.raises(RequestError) as info:
        parse_request(b'{"buffers": [')
    assert info.value.errors[0]["type"] == "json_invalid"
    assert "malformed JSON" in str(info.value)


def test_reports_every_error_at_once() -> None:
    request = copy.deepcopy(BASE)
    request["buffers"][1]["id"] = "A"
    request["barriers"] = [99]
    errors = errors_of(request)
    assert sorted(e["type"] for e in errors) == ["barrier_out_of_range", "duplicate_id"]


def test_summary_names_the_field() -> None:
    with pytest.raises(RequestError) as info:
        parse_request(bad(["buffers", 1, "end"], 2))
    assert str(info.value).startswith("buffers.1.end: end (2) must be greater")


def test_valid_request_normalizes_dims_and_capacity() -> None:
    request = parse_request({**BASE, "target": "sm_75"})
    assert request.block == [128, 1, 1]
    assert request.effective_capacity == 65536
    assert parse_request({**BASE, "target": "sm_75", "capacity": 1000}).effective_capacity == 1000
    assert request.alignment_of(request.buffers[0]) == 16
    assert request.alignment_of(request.buffers[1]) == 1


def test_shrink_and_pareto_options_are_accepted() -> None:
    request = parse_request({**BASE, "options": {"shrink": True, "pareto": True}})
    assert request.options.shrink
    assert request.options.pareto
    with pytest.raises(RequestError) as info:
        parse_request({**BASE, "options": {"pareto": "sometimes"}})
    assert info.value.errors[0]["loc"] == ["options", "pareto"]


@pytest.mark.parametrize("per_chunk", [1, 2, 7, 10_000])
def test_canonical_chunks_join_to_the_model_dump(per_chunk: int) -> None:
    # The hash is taken piece by piece; the pieces must be the request's JSON exactly, even
    # when a string holds the text of the key the pieces are cut at.
    tricky = parse_request(
        {
            "name": 'k","buffers":[]',
            "buffers": [{"id": f"b{i}", "size": 16, "start": i, "end": i + 3} for i in range(9)],
        }
    )
    for request in (tricky, model_request(40), parse_request({"buffers": []})):
        text = request.model_dump_json().encode()
        assert b"".join(canonical_chunks(request, per_chunk)) == text
        assert canonical_json(request) == text
        assert request_sha256(request) == hashlib.sha256(text).hexdigest()


def test_a_variable_name_of_64_characters_is_accepted() -> None:
    name = "k" * 64
    access = {**ACCESS, "index": {name: 1}, "loops": {name: 4}}
    request = parse_request(bad(["buffers", 0, "accesses"], [access]))
    assert request.buffers[0].accesses[0].loops == {name: 4}


@pytest.mark.parametrize(
    ("path", "loc"),
    [
        (["buffers", 0, "size"], ["buffers", 0, "size"]),
        (["options", "time_limit"], ["options", "time_limit"]),
        (["barriers", 0], ["barriers", 0]),
    ],
)
def test_an_integer_too_long_to_read_is_refused_naming_its_field(
    path: list[Any], loc: list[Any]
) -> None:
    # More digits than Python converts (4300): the JSON parser refuses the number without
    # saying where; the error names the field.
    marker = 123454321
    text = json.dumps(bad(path, marker)).replace(str(marker), "9" * 5000)
    for body in (text, text.encode()):
        errors = errors_of(body)
        assert [e["loc"] for e in errors] == [loc]
        assert errors[0]["type"] == "int_parsing_size"
        assert "5000 digits" in errors[0]["msg"]
        assert len(errors[0]["input"]) < 100


def test_schema_lists_targets_and_dtypes_and_limits_variable_names() -> None:
    schema = PlanRequest.model_json_schema()
    target = schema["properties"]["target"]["anyOf"]
    assert {"enum": [*TARGETS], "type": "string"} in target
    dtype = schema["$defs"]["Buffer"]["properties"]["dtype"]["anyOf"]
    assert {"enum": [*DTYPES], "type": "string"} in dtype
    access = schema["$defs"]["Access"]["properties"]
    assert access["loops"]["propertyNames"] == {"maxLength": 64}
    assert {"maxLength": 64} in [o.get("propertyNames") for o in access["index"]["anyOf"]]
