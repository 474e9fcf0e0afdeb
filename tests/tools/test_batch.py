"""``planner batch``: a directory of requests (and given plans) checked as a CI job would."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import planner
from planner.batch import CaseResult, Progress, find_cases, run_batch
from planner.cli import main
from planner.core.io import parse_request
from planner.validators.cuda import gpu_available
from tests.support.paths import ROOT
from tests.support.samples import TWO_PHASE

EXAMPLES = ROOT / "examples"
Capture = pytest.CaptureFixture[str]


def _write(path: Path, data: object) -> None:
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def _overlapping_plan() -> str:
    """TWO_PHASE's plan with ``c`` moved onto ``a`` while both are live."""
    plan = planner.plan(TWO_PHASE)
    offsets = {p.id: p.offset for p in plan.placements}
    placements = [
        p.model_copy(update={"offset": offsets["a"]}) if p.id == "c" else p for p in plan.placements
    ]
    arena = max(p.offset + p.size for p in placements)
    broken = plan.model_copy(update={"placements": placements, "arena_bytes": arena})
    return broken.model_dump_json()


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """One request of each kind: planned here, given a good plan, given a broken plan, bad
    JSON, a bad field, and one that cannot fit."""
    _write(tmp_path / "a_planned.json", TWO_PHASE)
    _write(tmp_path / "b_given.json", TWO_PHASE)
    _write(tmp_path / "b_given.plan.json", planner.plan(TWO_PHASE).model_dump_json())
    _write(tmp_path / "c_broken.json", TWO_PHASE)
    _write(tmp_path / "c_broken.plan.json", _overlapping_plan())
    _write(tmp_path / "d_malformed.json", "{not json")
    bad = json.loads(json.dumps(TWO_PHASE))
    bad["buffers"][0]["size"] = -4
    _write(tmp_path / "e_bad_field.json", bad)
    _write(tmp_path / "f_too_big.json", {**TWO_PHASE, "capacity": 64})
    _write(tmp_path / "notes.txt", "not a request")
    return tmp_path


def _junit(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return {tc.attrib["name"]: tc for tc in suites[0].findall("testcase")}


def test_find_cases_pairs_plans_and_skips_other_files(mixed: Path) -> None:
    cases = {c.name: c for c in find_cases(mixed)}
    assert sorted(cases) == [
        "a_planned.json",
        "b_given.json",
        "c_broken.json",
        "d_malformed.json",
        "e_bad_field.json",
        "f_too_big.json",
    ]
    assert cases["a_planned.json"].plan is None
    assert cases["b_given.json"].plan == mixed / "b_given.plan.json"


def test_batch_reports_each_case_in_junit(mixed: Path, tmp_path: Path, capsys: Capture) -> None:
    report = tmp_path / "report.xml"
    code = main(["batch", str(mixed), "--emulate", "--junit", str(report)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out + err
    cases = _junit(report)
    assert sorted(cases) == [c.name for c in find_cases(mixed)]
    passed = {name for name, tc in cases.items() if tc.find("failure") is None}
    assert passed == {"a_planned.json", "b_given.json"}
    for name in passed:
        text = cases[name].findtext("system-out") or ""
        assert "static pass, emulator pass" in text

    def failure(name: str) -> ET.Element:
        element = cases[name].find("failure")
        assert element is not None
        return element

    broken = failure("c_broken.json")
    assert broken.attrib["message"].startswith("static: overlap")
    assert "emulator: " in (broken.text or "")  # both validators caught it
    assert "malformed JSON" in failure("d_malformed.json").attrib["message"]
    bad_field = failure("e_bad_field.json").attrib["message"]
    assert "buffers.0.size" in bad_field
    assert "-4" in bad_field
    assert "infeasible" in failure("f_too_big.json").attrib["message"]
    root = ET.parse(report).getroot()
    assert root.attrib["tests"] == "6"
    assert root.attrib["failures"] == "4"
    assert "2 passed, 4 failed" in out


def test_batch_of_good_requests_passes(tmp_path: Path, capsys: Capture) -> None:
    for name in ("tvm_tiled_gemm.json", "pipelined_gemm.json", "fits_sm90_not_sm75.json"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    assert main(["batch", str(tmp_path), "--emulate"]) == 0
    out, err = capsys.readouterr()
    assert "3 passed, 0 failed" in out
    assert "3/3, 0 failed" in err  # the progress bar


def test_given_plans_are_validated_not_replanned(tmp_path: Path) -> None:
    _write(tmp_path / "k.json", TWO_PHASE)
    _write(tmp_path / "k.plan.json", _overlapping_plan())
    [result] = run_batch(find_cases(tmp_path))
    assert not result.planned
    assert dict(result.checks) == {"static": "FAIL"}
    assert not result.ok


def test_parallel_jobs_give_the_same_results(tmp_path: Path) -> None:
    for k in range(3):
        _write(tmp_path / f"r{k}.json", {**TWO_PHASE, "name": f"r{k}"})
    _write(tmp_path / "s.json", "[]")
    one = run_batch(find_cases(tmp_path), emulate=True)
    two = run_batch(find_cases(tmp_path), emulate=True, jobs=2)

    def strip(results: list[CaseResult]) -> list[tuple[object, ...]]:
        return [(r.name, r.status, r.arena_bytes, r.checks, r.failures) for r in results]

    assert strip(one) == strip(two)
    for r in one:
        if r.ok:
            request = parse_request((tmp_path / r.name).read_text())
            assert planner.plan(request).arena_bytes == r.arena_bytes


def test_progress_prints_a_line_per_tenth_off_a_terminal() -> None:
    stream = io.StringIO()
    progress = Progress(20, stream)
    ok = CaseResult("x", 1, "optimal", 16, (), (), 0.0, True)
    for _ in range(20):
        progress.advance(ok)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11  # 1/20 opens the first tenth, then one line per tenth
    assert lines[-1].startswith("[" + "#" * 30 + "] 20/20, 0 failed")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["batch", "/no/such/dir"], "/no/such/dir: not a directory"),
        (["batch", "--jobs", "0", "."], "--jobs: must be at least 1, got 0"),
        (["batch", ".", "--junit", "/no/such/dir/r.xml"], "--junit /no/such/dir/r.xml: no such"),
    ],
)
def test_bad_usage_is_one_line(argv: list[str], message: str, capsys: Capture) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("planner: error: ")
    assert err.count("\n") == 1


def test_empty_directory_is_bad_usage(tmp_path: Path, capsys: Capture) -> None:
    assert main(["batch", str(tmp_path)]) == 2
    assert "no request files" in capsys.readouterr().err


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_gpu_flag_without_a_gpu_is_bad_usage(tmp_path: Path, capsys: Capture) -> None:
    _write(tmp_path / "k.json", TWO_PHASE)
    assert main(["batch", str(tmp_path), "--gpu"]) == 2
    assert "CuPy or a CUDA device is missing" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="CuPy or a CUDA device is missing")
def test_gpu_batch_of_examples(tmp_path: Path, capsys: Capture) -> None:
    for name in ("tvm_tiled_gemm.json", "pipelined_gemm.json", "fits_sm90_not_sm75.json"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    _write(tmp_path / "c_broken.json", TWO_PHASE)
    _write(tmp_path / "c_broken.plan.json", _overlapping_plan())
    report = tmp_path / "report.xml"
    assert main(["batch", str(tmp_path), "--gpu", "--junit", str(report)]) == 1
    cases = _junit(report)
    assert "gpu pass" in (cases["tvm_tiled_gemm.json"].findtext("system-out") or "")
    failure = cases["c_broken.json"].find("failure")
    assert failure is not None
    assert "gpu: " in (failure.text or "")


# --- expectations and quiet logs -------------------------------------------------------

TOO_BIG = json.loads((EXAMPLES / "too_big_for_sm75.json").read_text())


def test_project_examples_pass_as_a_batch(capsys: Capture) -> None:
    assert main(["batch", str(EXAMPLES), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "too_big_for_sm75.json" in out
    assert "infeasible" in out
    assert "expect.json" not in out  # an expectation is not a request


def test_expect_inline_and_beside(tmp_path: Path, capsys: Capture) -> None:
    _write(tmp_path / "inline.json", {**TOO_BIG, "expect": {"status": "infeasible"}})
    _write(tmp_path / "beside.json", TOO_BIG)
    _write(tmp_path / "beside.expect.json", {"status": ["infeasible", "unknown"]})
    _write(tmp_path / "wrong.json", {**TOO_BIG, "expect": {"status": "optimal"}})
    fits = {**TWO_PHASE, "expect": {"status": "optimal", "arena_bytes": 1}}
    _write(tmp_path / "arena.json", fits)
    results = {r.name: r for r in run_batch(find_cases(tmp_path))}
    assert results["inline.json"].ok
    assert results["beside.json"].ok
    assert results["wrong.json"].failures == ("expect: status optimal expected, got infeasible",)
    (failure,) = results["arena.json"].failures
    assert failure.startswith("expect: arena 1 B expected, got ")
    for r in results.values():
        assert ("static", "pass") in r.checks  # the plan is still validated


def test_without_expect_an_infeasible_plan_fails(tmp_path: Path) -> None:
    _write(tmp_path / "too_big.json", TOO_BIG)
    (result,) = run_batch(find_cases(tmp_path))
    assert not result.ok


@pytest.mark.parametrize(
    ("expect", "field"),
    [
        ({"status": "fits"}, "expect.status"),
        ({"status": []}, "expect.status"),
        ({"arena_bytes": -1}, "expect.arena_bytes"),
        ({"arena_bytes": True}, "expect.arena_bytes"),
        ({"stat": "optimal"}, "expect"),
        ("infeasible", "expect"),
    ],
)
def test_bad_expect_is_the_case_failure(tmp_path: Path, expect: object, field: str) -> None:
    _write(tmp_path / "k.json", {**TOO_BIG, "expect": expect})
    (result,) = run_batch(find_cases(tmp_path))
    assert result.status == "bad input"
    (failure,) = result.failures
    assert failure.startswith(f"input: k.json: {field}: "), failure


def test_bad_expect_file_names_it(tmp_path: Path) -> None:
    _write(tmp_path / "k.json", TOO_BIG)
    _write(tmp_path / "k.expect.json", {"status": "nope"})
    (result,) = run_batch(find_cases(tmp_path))
    assert result.failures[0].startswith("input: k.json: k.expect.json.status: ")
    _write(tmp_path / "k.json", {**TOO_BIG, "expect": {"status": "infeasible"}})
    (result,) = run_batch(find_cases(tmp_path))
    assert "keep one" in result.failures[0]


def test_quiet_prints_no_progress(tmp_path: Path, capsys: Capture) -> None:
    _write(tmp_path / "a.json", TWO_PHASE)
    assert main(["batch", str(tmp_path), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "1 passed, 0 failed" in captured.out
    assert "[" not in captured.err  # no progress bar or per-tenth lines
    assert main(["batch", str(tmp_path)]) == 0
    assert "1/1" in capsys.readouterr().err


def test_json_lists_every_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "k.json").write_text(json.dumps(TWO_PHASE))
    (tmp_path / "bad.json").write_text('{"buffers": [{"id": "a"}]}')
    assert main(["batch", str(tmp_path), "--json", "--quiet"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["passed"], data["failed"]) == (1, 1)
    by_name = {case["name"]: case for case in data["cases"]}
    assert by_name["k.json"]["checks"] == {"static": "pass"}
    assert by_name["k.json"]["arena_bytes"] == planner.plan(TWO_PHASE).arena_bytes
    assert by_name["bad.json"]["status"] == "bad input"
    assert by_name["bad.json"]["failures"]
