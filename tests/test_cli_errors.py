"""The one-line bad-input message of ``planner``, ``planner batch`` and ``planner selftest``."""

from __future__ import annotations

import pytest

from planner.cli_errors import EXIT_BAD_INPUT, describe, fail
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
