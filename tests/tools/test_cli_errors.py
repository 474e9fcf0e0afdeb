"""The one-line bad-input message of ``planner``, ``planner batch`` and ``planner selftest``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from planner.cli import main
from planner.cli_errors import EXIT_BAD_INPUT, MAX_SHOWN, describe, describe_all, fail
from planner.core.errors import FormatError, RequestError

_SIZE = {"loc": ["buffers", 2, "size"], "msg": "Input should be greater than 0", "type": "t"}


def test_a_field_error_names_the_field_and_the_value() -> None:
    exc = RequestError([{**_SIZE, "input": -3}])
    assert describe(exc, "req.json") == "buffers.2.size: Input should be greater than 0, got -3"
    assert describe(exc, "req.json", always=True) == (
        "req.json: buffers.2.size: Input should be greater than 0, got -3"
    )


def test_a_value_the_message_already_names_is_not_repeated() -> None:
    exc = RequestError([{"loc": ["target"], "msg": "unknown target 'sm_99'", "input": "sm_99"}])
    assert describe(exc, None) == "target: unknown target 'sm_99'"


def test_a_format_error_names_the_file() -> None:
    exc = FormatError([{"loc": ["plan"], "msg": "malformed JSON: EOF", "type": "json_invalid"}])
    assert describe(exc, "p.json") == "p.json: plan: malformed JSON: EOF"
    assert describe(FormatError([{"loc": [], "msg": "bad"}]), None) == "input: bad"


def test_further_errors_are_counted() -> None:
    one_more = RequestError([_SIZE, _SIZE])
    assert describe(one_more, None).endswith(" (and 1 more error)")
    assert describe(RequestError([_SIZE] * 3), None).endswith(" (and 2 more errors)")


def test_fail_writes_one_line_and_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert fail("x: bad") == EXIT_BAD_INPUT == 2
    assert capsys.readouterr().err == "planner: error: x: bad\n"


def test_every_error_is_listed_with_the_nearest_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "field.json"
    path.write_text('{"buffers": [{"id": "a", "sz": 4, "start": 0, "end": 1}], "option": {}}')
    assert main(["plan", str(path)]) == EXIT_BAD_INPUT
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "planner: error: buffers.0.size: Field required",
        "planner: error: buffers.0.sz: Extra inputs are not permitted, got 4; did you mean 'size'?",
        "planner: error: option: Extra inputs are not permitted; did you mean 'options'?",
    ]


def test_a_long_list_of_errors_is_cut_with_a_count() -> None:
    lines = describe_all(RequestError([_SIZE] * (MAX_SHOWN + 5)), None)
    assert len(lines) == MAX_SHOWN + 1
    assert lines[-1] == "... and 5 more errors"


def test_a_misspelt_solver_gets_the_nearest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "solver.json"
    path.write_text('{"buffers": [], "options": {"solver": "cp-sat"}}')
    assert main(["plan", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "unknown solver 'cp-sat'; did you mean 'cpsat'?" in err


@pytest.mark.parametrize(
    ("argv", "expected", "guess"),
    [
        (["plna", "x.json"], "invalid choice: 'plna'", "plan"),
        (["plan", "--capasity", "3", "x.json"], "unrecognized argument '--capasity'", "--capacity"),
        (["--verison"], "unrecognized argument '--verison'", "--version"),
        (["plan", "--sync", "inset", "x.json"], "invalid choice: 'inset'", "insert"),
    ],
)
def test_a_misspelt_command_or_flag_gets_the_nearest(
    argv: list[str], expected: str, guess: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    (line,) = err.strip().splitlines()
    assert expected in line
    assert f"did you mean {guess!r}?" in line


@pytest.mark.parametrize("text", ["", "  \n\n"])
def test_empty_input_says_so_for_a_file_and_for_stdin(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(text)
    assert main(["plan", str(empty)]) == EXIT_BAD_INPUT
    said = capsys.readouterr().err.strip()
    assert (
        said == f"planner: error: {empty}: empty input; expected a JSON request or a MiniMalloc CSV"
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    assert main(["plan", "-"]) == EXIT_BAD_INPUT
    said = capsys.readouterr().err.strip()
    assert said == "planner: error: stdin: empty input; expected a JSON request or a MiniMalloc CSV"
    assert "header" not in said
