"""MiniMalloc CSV in and out, and loading requests from files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import planner
from planner.core.csvio import csv_losses, load_request, read_csv, with_overrides, write_csv
from planner.core.errors import FormatError, RequestError
from planner.core.models import PlanRequest
from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks" / "minimalloc"

SIMPLE = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\n"


def _benchmark_files() -> list[Path]:
    files = sorted(BENCHMARKS.glob("*.csv"))
    assert len(files) == 7, f"the MiniMalloc instances are missing from {BENCHMARKS}"
    return files


def _format_error(text: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_csv(text)
    return info.value


# --- reading -------------------------------------------------------------------------------


def test_reads_buffers_as_plain_dsa() -> None:
    request = read_csv(SIMPLE, capacity=12, name="example")
    assert request.name == "example"
    assert request.capacity == 12
    assert request.options.sync == "none"
    assert request.barriers == []
    assert [(b.id, b.start, b.end, b.size) for b in request.buffers] == [
        ("b1", 0, 3, 4),
        ("b2", 3, 9, 4),
        ("b3", 0, 9, 4),
    ]
    assert all(b.alignment is None and b.offset is None for b in request.buffers)
    assert request.alignment == 1


def test_reads_optional_columns_absent_or_empty_per_row() -> None:
    text = "id,lower,upper,size,alignment,offset\na,0,2,8,16,32\nb,0,2,8,,\nc,2,4,8\n"
    a, b, c = read_csv(text).buffers
    assert (a.alignment, a.offset) == (16, 32)
    assert (b.alignment, b.offset) == (None, None)
    assert (c.alignment, c.offset) == (None, None)


def test_columns_in_any_order_with_minimalloc_aliases() -> None:
    # MiniMalloc's old format: "start"/"end" with an inclusive end.
    request = read_csv("size,buffer_id,start,end\n4,x,0,2\n")
    (b,) = request.buffers
    assert (b.id, b.start, b.end, b.size) == ("x", 0, 3, 4)


def test_tolerates_bom_crlf_blank_lines_and_spaces() -> None:
    text = "\ufeffid, lower ,upper,SIZE\r\n\r\n a , 0 , 2 , 8 \r\n"
    (b,) = read_csv(text).buffers
    assert (b.id, b.start, b.end, b.size) == ("a", 0, 2, 8)


def test_header_only_is_an_empty_request() -> None:
    assert read_csv("id,lower,upper,size\n").buffers == []


# --- writing and round trips ---------------------------------------------------------------


def test_round_trip_is_lossless() -> None:
    request = read_csv(SIMPLE)
    assert write_csv(request) == SIMPLE
    assert read_csv(write_csv(request)) == request


def test_round_trip_with_alignment_offsets_and_awkward_ids() -> None:
    text = 'id,lower,upper,size,alignment,offset\n"a,1",0,2,8,16,0\n"q""t",1,3,8,1,16\n'
    request = read_csv(text)
    assert [b.id for b in request.buffers] == ["a,1", 'q"t']
    assert write_csv(request) == text
    assert read_csv(write_csv(request)) == request


def test_alignment_column_only_when_some_alignment_is_not_one() -> None:
    ones = read_csv("id,lower,upper,size,alignment\na,0,2,8,1\n")
    assert write_csv(ones).splitlines()[0] == "id,lower,upper,size"
    request = PlanRequest.model_validate(
        {"alignment": 16, "buffers": [{"id": "a", "size": 8, "start": 0, "end": 2}]}
    )
    assert write_csv(request) == "id,lower,upper,size,alignment\na,0,2,8,16\n"
    assert read_csv(write_csv(request)).alignment_of(read_csv(write_csv(request)).buffers[0]) == 16


def test_offset_column_from_pins_only_where_pinned() -> None:
    request = read_csv("id,lower,upper,size,offset\na,0,2,8,8\nb,0,2,8,\n")
    assert write_csv(request) == "id,lower,upper,size,offset\na,0,2,8,8\nb,0,2,8,\n"


def test_offset_column_from_a_plan() -> None:
    request = read_csv(SIMPLE, capacity=12)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    out = read_csv(write_csv(request, plan))
    offsets = {p.id: p.offset for p in plan.placements}
    assert {b.id: b.offset for b in out.buffers} == offsets
    # Pinned at the plan's offsets, the request plans to the same arena.
    replanned = planner.plan(out)
    assert planner.validate(out, replanned).valid
    assert replanned.arena_bytes == plan.arena_bytes


def test_write_rejects_a_plan_for_other_buffers() -> None:
    request = read_csv(SIMPLE)
    other = read_csv("id,lower,upper,size\nb1,0,3,4\n")
    plan = planner.plan(other)
    assert planner.validate(other, plan).valid
    with pytest.raises(RequestError, match="no placement for buffer 'b2'"):
        write_csv(request, plan)


def test_csv_losses_names_what_a_csv_cannot_carry() -> None:
    assert csv_losses(read_csv(SIMPLE)) == []
    request = PlanRequest.model_validate(
        {
            "target": "sm_90",
            "barriers": [1],
            "buffers": [{"id": "a", "size": 8, "start": 0, "end": 2}],
        }
    )
    losses = " ".join(csv_losses(request))
    assert "1 barriers" in losses
    assert "'insert'" in losses
    assert "sm_90" in losses


# --- bad CSV: one test per kind, each naming the line, the column and the value -----------


def test_rejects_non_integer() -> None:
    exc = _format_error("id,lower,upper,size\na,0,2,8\nb,0,2,abc\n")
    assert str(exc) == "line 3, column size: 'abc' is not an integer"
    assert exc.errors[0]["input"] == "abc"
    assert exc.errors[0]["type"] == "csv_not_integer"


@pytest.mark.parametrize("value", ["1.5", "1e3", "0x10", "1_000", "9" * 40])
def test_rejects_non_integer_spellings(value: str) -> None:
    exc = _format_error(f"id,lower,upper,size\na,0,{value},8\n")
    assert str(exc).startswith("line 2, column upper: ")
    assert repr(value) in str(exc)


def test_rejects_missing_value() -> None:
    exc = _format_error("id,lower,upper,size\na,0,,8\n")
    assert str(exc) == "line 2, column upper: missing value"


def test_rejects_too_many_fields() -> None:
    exc = _format_error("id,lower,upper,size\na,0,2,8,9\n")
    assert str(exc).startswith("line 2: 5 fields but the header names 4 columns")


def test_rejects_unknown_column() -> None:
    exc = _format_error("id,lower,upper,size,colour\na,0,2,8,red\n")
    assert str(exc).startswith("line 1, column colour: unknown column 'colour'")


def test_rejects_duplicate_column() -> None:
    exc = _format_error("id,lower,upper,size,start\n")
    assert str(exc) == "line 1, column lower: column 'lower' appears twice"


def test_rejects_missing_required_column() -> None:
    exc = _format_error("id,lower,size\na,0,8\n")
    assert str(exc).startswith("line 1: the header has no 'upper' column")


def test_rejects_empty_file() -> None:
    exc = _format_error("\n\n")
    assert "empty file" in str(exc)


def test_rejects_gaps() -> None:
    exc = _format_error("id,lower,upper,size,gaps\na,0,9,8,2-4\n")
    assert str(exc) == "line 1, column gaps: lifetimes with gaps are not supported"


def test_rejects_malformed_quoting() -> None:
    with pytest.raises(FormatError, match="line 2"):
        read_csv('id,lower,upper,size\n"a"x,0,2,8\n', name="q")


# --- model errors keep the field's loc and name the CSV line --------------------------------


def _request_error(text: str, capacity: int | None = None) -> RequestError:
    with pytest.raises(RequestError) as info:
        read_csv(text, capacity=capacity)
    assert not isinstance(info.value, FormatError)
    return info.value


def test_rejects_empty_lifetime() -> None:
    exc = _request_error("id,lower,upper,size\na,0,2,8\nb,5,5,8\n")
    err = exc.errors[0]
    assert err["loc"] == ["buffers", 1, "end"]
    assert err["msg"].startswith("line 3, column upper: ")
    assert str(exc).startswith("buffers.1.end: line 3, column upper: end (5)")


def test_rejects_duplicate_id() -> None:
    exc = _request_error("id,lower,upper,size\na,0,2,8\na,2,4,8\n")
    assert exc.errors[0]["loc"] == ["buffers", 1, "id"]
    assert "line 3, column id" in str(exc)
    assert "already used" in str(exc)


def test_rejects_bad_alignment() -> None:
    exc = _request_error("id,lower,upper,size,alignment\na,0,2,8,3\n")
    assert exc.errors[0]["loc"] == ["buffers", 0, "alignment"]
    assert "line 2, column alignment: alignment 3 is not a power of two" in str(exc)


def test_rejects_zero_size_and_negative_lower() -> None:
    exc = _request_error("id,lower,upper,size\na,-1,2,0\n")
    locs = [e["loc"] for e in exc.errors]
    assert ["buffers", 0, "size"] in locs
    assert ["buffers", 0, "start"] in locs
    assert all(e["msg"].startswith("line 2, column ") for e in exc.errors)


def test_rejects_misaligned_pin() -> None:
    exc = _request_error("id,lower,upper,size,alignment,offset\na,0,2,8,16,8\n")
    assert exc.errors[0]["loc"] == ["buffers", 0, "offset"]


def test_rejects_bad_capacity() -> None:
    exc = _request_error(SIMPLE, capacity=0)
    assert exc.errors[0]["loc"] == ["capacity"]


def test_rejects_too_many_buffers() -> None:
    with pytest.raises(RequestError, match="more than 2 buffers"):
        read_csv(SIMPLE, max_buffers=2)


# --- loading files -------------------------------------------------------------------------


def test_load_request_by_extension(tmp_path: Path) -> None:
    csv_path = tmp_path / "k.csv"
    csv_path.write_text(SIMPLE)
    json_path = tmp_path / "k.json"
    json_path.write_text(read_csv(SIMPLE, name="k").model_dump_json())
    from_csv = load_request(str(csv_path), capacity=64)
    assert from_csv.name == "k"
    assert from_csv.capacity == 64
    from_json = load_request(str(json_path), capacity=64)
    assert from_json == from_csv


def test_load_request_from_stdin_sniffs_the_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(SIMPLE))
    assert len(load_request("-").buffers) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO(read_csv(SIMPLE).model_dump_json()))
    assert load_request("-") == read_csv(SIMPLE)


def test_load_request_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no such file") as info:
        load_request(str(tmp_path / "nope.json"))
    assert info.value.errors[0]["loc"] == []


def test_load_request_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.csv"
    path.write_bytes(b"id,lower,upper,size\n\xff\xfe,0,1,2\n")
    with pytest.raises(FormatError, match="not UTF-8"):
        load_request(str(path))


def test_load_request_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"buffers": [')
    with pytest.raises(FormatError, match="malformed JSON"):
        load_request(str(path))


def test_with_overrides_rechecks() -> None:
    request = read_csv(SIMPLE)
    assert with_overrides(request) is request
    changed = with_overrides(request, capacity=100, solver="greedy", sync="insert", time_limit=2)
    assert changed.capacity == 100
    assert (changed.options.solver, changed.options.sync) == ("greedy", "insert")
    assert changed.options.time_limit == 2.0
    with pytest.raises(RequestError) as info:
        with_overrides(request, time_limit=-1)
    assert info.value.errors[0]["loc"] == ["options", "time_limit"]


# --- the shared MiniMalloc benchmarks ------------------------------------------------------


def test_benchmark_files_parse_and_round_trip() -> None:
    for path in _benchmark_files():
        text = path.read_text()
        request = read_csv(text, capacity=1048576, name=path.stem)
        rows = [line for line in text.splitlines()[1:] if line.strip()]
        assert len(request.buffers) == len(rows), path.name
        assert request.options.sync == "none"
        assert write_csv(request) == text, path.name


def test_minimalloc_example_plans_to_its_capacity() -> None:
    path = BENCHMARKS / "example.12.csv"
    request = read_csv(path.read_text(), capacity=12)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert plan.status in ("optimal", "feasible")
    assert plan.arena_bytes <= 12
