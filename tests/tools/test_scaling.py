"""``planner bench --scaling``: fitted exponents, the table, and an end-to-end run."""

from __future__ import annotations

import math

import pytest

from planner.cli import main
from planner.families import family_instance
from planner.generate import model_request
from planner.scaling import ScalingRow, exponent, format_scaling, request_for


def test_exponent_fits_a_power_law() -> None:
    sizes = [1e3, 1e4, 1e5]
    exp = exponent(sizes, [2.0 * n**1.5 for n in sizes])
    assert exp is not None
    assert math.isclose(exp, 1.5, rel_tol=1e-9)
    assert exponent([1e3], [1.0]) is None  # one size: no slope
    assert exponent([1e3, 1e4], [1.0, 0.0]) is None  # a value that is not positive


def test_table_lists_rows_failures_and_exponents() -> None:
    rows = [
        ScalingRow("model", 1000, 0.5, 100 * 2**20, 120, 100, "feasible", True, "greedy:x"),
        ScalingRow("model", 10000, 5.0, 200 * 2**20, 1100, 1000, "feasible", True, "greedy:x"),
        ScalingRow("random", 10, math.nan, 0, 0, 0, "error", False, "-", "MemoryError"),
    ]
    text = format_scaling(rows)
    assert "20.00" in text  # the gap of the first row, in %
    assert "failed: MemoryError" in text
    assert "model: time ~ n^1.00, peak memory ~ n^0.30" in text
    assert "random: time ~ n^?" in text


def test_request_for_sets_options_and_names_a_bad_kind() -> None:
    request = request_for("model", 300, "greedy", 3.0)
    assert request.options.solver == "greedy"
    assert request.options.time_limit == 3.0
    assert request.buffers == model_request(300).buffers
    with pytest.raises(ValueError, match="kind must be one of"):
        request_for("spiral", 10, None, None)


def test_model_family_is_model_request() -> None:
    inst = family_instance("model", 5000, 3)
    assert inst.request == model_request(5000, seed=3)
    with pytest.raises(ValueError, match="buffers must be in"):
        family_instance("guillotine", 5000, 3)


@pytest.mark.slow
def test_cli_scaling_runs_each_size(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--scaling", "model", "--sizes", "60", "120", "--solver", "greedy"])
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("model ")]
    assert [line.split()[1] for line in lines] == ["60", "120"]
    assert all(" yes " in line for line in lines)  # each plan validated
    assert "model: time ~ n^" in out
