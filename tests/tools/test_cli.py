"""The ``planner`` command, run in-process: outputs, files and exit codes."""

from __future__ import annotations

import importlib
import io
import json
import sys
from pathlib import Path

import pytest

import planner
from planner.cli import main
from planner.core.csvio import load_request, read_csv
from planner.core.io import parse_plan, parse_request
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
CSV = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n"
REQUEST = {
    "name": "two_phase",
    "alignment": 16,
    "barriers": [2],
    "buffers": [
        {"id": "a", "size": 256, "start": 0, "end": 2},
        {"id": "b", "size": 128, "start": 0, "end": 2},
        {"id": "c", "size": 384, "start": 2, "end": 4},
    ],
    "options": {"sync": "existing"},
}

Capture = pytest.CaptureFixture[str]


@pytest.fixture
def request_json(tmp_path: Path) -> Path:
    path = tmp_path / "two_phase.json"
    path.write_text(json.dumps(REQUEST))
    return path


@pytest.fixture
def request_csv(tmp_path: Path) -> Path:
    path = tmp_path / "example.12.csv"
    path.write_text(CSV)
    return path


def _checked(request_path: Path | str, plan_text: str) -> planner.Plan:
    """The plan parses and the static validator accepts it for its request."""
    plan = parse_plan(plan_text)
    request = load_request(str(request_path))
    assert planner.validate(request, plan).valid
    return plan


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("planner: error: ")
    return lines[0]


# --- plan ----------------------------------------------------------------------------------


def test_plan_json_to_stdout(request_json: Path, capsys: Capture) -> None:
    assert main(["plan", str(request_json)]) == 0
    out, err = capsys.readouterr()
    plan = _checked(request_json, out)
    assert plan.arena_bytes == 384  # c reuses a and b after the barrier at 2
    summary = err.strip().splitlines()[-1]  # after a compile notice, on a first run
    assert summary.startswith("two_phase: optimal, arena 384 B, lower bound 384 B, gap 0.00 %")
    assert f"winner {plan.solver.name}" in summary
    assert f", {len(plan.barriers.inserted)} barrier" in summary
    assert summary.endswith(" ms")


def test_plan_csv_with_capacity_and_output_file(
    request_csv: Path, tmp_path: Path, capsys: Capture
) -> None:
    out_path = tmp_path / "plan.json"
    assert main(["plan", str(request_csv), "--capacity", "12", "-o", str(out_path)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("example.12: ")
    plan = _checked(request_csv, out_path.read_text())
    assert plan.capacity == 12
    assert plan.arena_bytes <= 12


def test_plan_reads_stdin(capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(REQUEST)))
    assert main(["plan", "-"]) == 0
    plan = parse_plan(capsys.readouterr().out)
    assert planner.validate(parse_request(REQUEST), plan).valid


def test_plan_options_override_the_request(request_json: Path, capsys: Capture) -> None:
    argv = ["plan", str(request_json), "--sync", "none", "--solver", "greedy", "--time-limit", "2"]
    assert main(argv) == 0
    plan = parse_plan(capsys.readouterr().out)
    overridden = parse_request({**REQUEST, "options": {"sync": "none", "solver": "greedy"}})
    assert planner.validate(overridden, plan).valid


def test_plan_infeasible_exits_1(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps({**REQUEST, "capacity": 256}))
    assert main(["plan", str(path)]) == 1
    out, err = capsys.readouterr()
    plan = parse_plan(out)
    assert plan.status == "infeasible"
    assert plan.certificate is not None
    assert planner.validate(load_request(str(path)), plan).valid
    assert "infeasible" in err
    assert "> capacity 256 B" in err


def test_plan_example_infeasible_on_sm75(capsys: Capture) -> None:
    assert main(["plan", str(EXAMPLES / "too_big_for_sm75.json")]) == 1
    assert "98304 B live" in capsys.readouterr().err


# --- bad input: exit 2, one line naming the field, no traceback ----------------------------


def test_missing_file_exits_2(tmp_path: Path, capsys: Capture) -> None:
    missing = tmp_path / "nope.json"
    assert main(["plan", str(missing)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"planner: error: {missing}: no such file"


def test_malformed_json_exits_2(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"buffers": [}')
    assert main(["plan", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"planner: error: {path}: malformed JSON")


def test_bad_csv_exits_2_naming_line_and_column(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,lower,upper,size\na,0,2,8\nb,0,2,abc\n")
    assert main(["plan", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"planner: error: {path}: line 3, column size: 'abc' is not an integer"


def test_bad_request_exits_2_naming_the_field(tmp_path: Path, capsys: Capture) -> None:
    bad = json.loads(json.dumps(REQUEST))
    bad["buffers"][1]["end"] = 0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["plan", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("planner: error: buffers.1.end: ")
    assert "end (0) must be greater than start (0)" in line


def test_pydantic_messages_get_the_value(tmp_path: Path, capsys: Capture) -> None:
    bad = json.loads(json.dumps(REQUEST))
    bad["buffers"][0]["size"] = -3
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["plan", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("planner: error: buffers.0.size: ")
    assert line.endswith(", got -3")


def test_json_array_on_stdin_exits_2(capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("[1, 2]"))
    assert main(["plan", "-"]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("planner: error: stdin: ")


def test_unknown_field_exits_2(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**REQUEST, "colour": "red"}))
    assert main(["plan", str(path)]) == 2
    assert _one_error_line(capsys.readouterr().err).startswith("planner: error: colour: ")


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--capacity", "abc"], "--capacity"),
        (["--capacity", "0"], "--capacity"),
        (["--time-limit", "-1"], "--time-limit"),
        (["--sync", "sometimes"], "--sync"),
    ],
)
def test_bad_flag_exits_2(
    request_json: Path, capsys: Capture, flags: list[str], field: str
) -> None:
    assert main(["plan", str(request_json), *flags]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert field in line


def test_no_command_exits_2(capsys: Capture) -> None:
    assert main([]) == 2
    _one_error_line(capsys.readouterr().err)


def test_help_exits_0(capsys: Capture) -> None:
    assert main(["--help"]) == 0
    assert "plan" in capsys.readouterr().out


def test_keyboard_interrupt_exits_130(
    request_json: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(planner, "plan", interrupted)
    assert main(["plan", str(request_json)]) == 130
    assert capsys.readouterr().err == ""


# --- validate ------------------------------------------------------------------------------


def test_validate_valid_plan_exits_0(request_json: Path, tmp_path: Path, capsys: Capture) -> None:
    plan_path = tmp_path / "plan.json"
    assert main(["plan", str(request_json), "-o", str(plan_path)]) == 0
    capsys.readouterr()
    assert main(["validate", str(request_json), str(plan_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("valid: 3 placements")


def test_validate_invalid_plan_exits_1(request_json: Path, tmp_path: Path, capsys: Capture) -> None:
    plan = planner.plan(parse_request(REQUEST))
    assert planner.validate(parse_request(REQUEST), plan).valid
    data = plan.model_dump()
    for p in data["placements"]:
        p["offset"] = 0  # a and b are live together: now they share bytes
    data["arena_bytes"] = max(p["size"] for p in data["placements"])
    plan_path = tmp_path / "broken.json"
    plan_path.write_text(json.dumps(data))
    assert main(["validate", str(request_json), str(plan_path)]) == 1
    out = capsys.readouterr().out
    assert "overlap" in out
    assert out.strip().splitlines()[-1].startswith("invalid: ")


def test_validate_bad_plan_file_exits_2(
    request_json: Path, tmp_path: Path, capsys: Capture
) -> None:
    plan_path = tmp_path / "plan.json"
    plan_path.write_text('{"name": "x"}')
    assert main(["validate", str(request_json), str(plan_path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()  # every missing field, one line each
    assert "planner: error: plan.arena_bytes: Field required" in lines
    assert "planner: error: plan.placements: Field required" in lines
    assert all(line.startswith("planner: error: plan.") for line in lines)


# --- convert -------------------------------------------------------------------------------


def test_convert_csv_to_json_and_back(request_csv: Path, tmp_path: Path, capsys: Capture) -> None:
    json_path = tmp_path / "k.json"
    back = tmp_path / "back.csv"
    assert main(["convert", str(request_csv), str(json_path), "--capacity", "12"]) == 0
    request = parse_request(json_path.read_text())
    assert request.capacity == 12
    assert request.options.sync == "none"
    assert request == read_csv(CSV, capacity=12, name="example.12")
    assert main(["convert", str(json_path), str(back)]) == 0
    assert back.read_text() == CSV
    # The capacity has no CSV column: the user is told.
    assert "capacity 12" in capsys.readouterr().err


def test_convert_json_to_csv_with_plan_offsets(
    request_json: Path, tmp_path: Path, capsys: Capture
) -> None:
    plan_path = tmp_path / "plan.json"
    out_csv = tmp_path / "out.csv"
    assert main(["plan", str(request_json), "-o", str(plan_path)]) == 0
    plan = _checked(request_json, plan_path.read_text())
    assert main(["convert", str(request_json), str(out_csv), "--plan", str(plan_path)]) == 0
    err = capsys.readouterr().err
    assert "planner: warning: the CSV drops 1 barriers" in err
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "id,lower,upper,size,alignment,offset"
    offsets = {p.id: p.offset for p in plan.placements}
    assert {line.split(",")[0]: int(line.split(",")[-1]) for line in lines[1:]} == offsets


def test_convert_unknown_extension_exits_2(
    request_json: Path, tmp_path: Path, capsys: Capture
) -> None:
    assert main(["convert", str(request_json), str(tmp_path / "out.txt")]) == 2
    assert "out.txt" in _one_error_line(capsys.readouterr().err)


def test_convert_plan_needs_csv_output(request_json: Path, tmp_path: Path, capsys: Capture) -> None:
    argv = ["convert", str(request_json), str(tmp_path / "o.json"), "--plan", "p.json"]
    assert main(argv) == 2
    assert "--plan" in _one_error_line(capsys.readouterr().err)


# --- serve ---------------------------------------------------------------------------------


def test_serve_without_fastapi_exits_2(capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "planner.api", None)  # import api -> ModuleNotFoundError
    assert main(["serve", "--port", "0"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "pip install" in line
    assert "[server]'" in line


def test_serve_calls_the_api(capsys: Capture, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    # The port check reads the service's settings module; it stays the real one.
    importlib.import_module("planner.api.settings")
    fake = type(sys)("planner.api")
    vars(fake).update(serve=lambda host, port: calls.append((host, port)))
    monkeypatch.setitem(sys.modules, "planner.api", fake)
    assert main(["serve", "--host", "0.0.0.0", "--port", "9000"]) == 0
    assert calls == [("0.0.0.0", 9000)]


# --- bench ---------------------------------------------------------------------------------


def test_bench_table_on_a_csv_and_random(request_csv: Path, capsys: Capture) -> None:
    argv = ["bench", str(request_csv), "--random", "200", "--repeat", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    header = lines[0].split()
    assert header[:2] == ["instance", "buffers"]
    for column in ("arena", "status", "winner", "valid"):
        assert column in header
    assert lines[1].split()[:2] == ["example.12.csv", "5"]
    assert lines[2].split()[:2] == ["random-200", "200"]
    assert all(line.split()[-1] == "yes" for line in lines[1:3])
    assert "2/2 planned" in lines[3]
    assert "mean gap" in lines[3]
    assert "peak memory" in lines[3]


def test_bench_compares_solvers_side_by_side(request_csv: Path, capsys: Capture) -> None:
    argv = ["bench", str(request_csv), "--solver", "greedy", "--solver", "start/first-fit"]
    assert main([*argv, "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert "greedy arena" in lines[0]
    assert "start/first-fit arena" in lines[0]
    cells = lines[1].split()
    assert cells[:3] == ["example.12.csv", "5", "12"]
    assert cells[3] == "12"  # the greedy portfolio meets the lower bound
    assert cells[6] == "yes"  # and so is proved optimal
    assert lines[2].startswith("greedy: 1/1 planned")
    assert lines[3].startswith("start/first-fit: 1/1 planned")


def test_bench_a_directory(request_csv: Path, request_json: Path, capsys: Capture) -> None:
    assert main(["bench", str(request_csv.parent), "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["example.12.csv", "two_phase.json"]


def test_bench_json(request_csv: Path, capsys: Capture) -> None:
    assert main(["bench", str(request_csv), "--json", "--repeat", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["rows"]
    assert row["instance"] == "example.12.csv"
    assert row["valid"] is True
    assert row["arena_bytes"] >= row["lower_bound"]
    assert data["summary"]["planned"] == 1
    assert data["summary"]["peak_memory_bytes"] > 0


def test_bench_infeasible_exits_1(request_csv: Path, capsys: Capture) -> None:
    assert main(["bench", str(request_csv), "--capacity", "4", "--repeat", "1"]) == 1
    assert "infeasible" in capsys.readouterr().out


def test_bench_bad_file_exits_2(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,lower,upper,size\na,3,1,8\n")
    assert main(["bench", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"planner: error: {path}: buffers.0.end: line 2, column upper")


def test_bench_needs_something_to_run(capsys: Capture) -> None:
    assert main(["bench"]) == 2
    _one_error_line(capsys.readouterr().err)


def test_bench_rejects_bad_overlap(capsys: Capture) -> None:
    assert main(["bench", "--random", "10", "--overlap", "2"]) == 2
    assert "--overlap" in _one_error_line(capsys.readouterr().err)


# --- long values and memory: still one line ------------------------------------------------


@pytest.mark.parametrize("field", ["id", "dtype"])
def test_a_long_value_is_cut_in_the_error_line(tmp_path: Path, capsys: Capture, field: str) -> None:
    request = json.loads(json.dumps(REQUEST))
    request["buffers"][0][field] = "x\n" * 500_000  # 1 MB, with line breaks
    path = tmp_path / "long.json"
    path.write_text(json.dumps(request))
    assert main(["plan", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"buffers.0.{field}" in line
    assert "(1000000 characters)" in line
    assert len(line) < 1000


def test_out_of_memory_is_one_line(
    request_json: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exhausted(*args: object, **kwargs: object) -> planner.Plan:
        raise MemoryError

    monkeypatch.setattr(planner, "plan", exhausted)
    assert main(["plan", str(request_json)]) == 1
    err = capsys.readouterr().err
    assert err == "planner: error: out of memory\n"


def test_quiet_plan_prints_the_plan_and_no_summary(request_json: Path, capsys: Capture) -> None:
    assert main(["plan", "-q", str(request_json)]) == 0
    out, err = capsys.readouterr()
    _checked(request_json, out)
    assert "arena" not in err


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("serve", ["address to listen on", "default 8000", "example: planner serve"]),
        ("schema", ["default request", "example: planner schema plan"]),
        ("bench", ["seed of the generated instances"]),
        ("selftest", ["seed of the random requests and faults"]),
        ("generate", ["the first request's seed", "examples:"]),
    ],
)
def test_commands_explain_their_flags(command: str, expected: list[str], capsys: Capture) -> None:
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in expected:
        assert words in text, words
