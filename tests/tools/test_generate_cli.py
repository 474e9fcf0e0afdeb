"""``planner generate``: requests to try the planner on, to stdout or as a corpus of files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.bench import expand_paths
from planner.cli import main
from planner.core.io import parse_request

Capture = pytest.CaptureFixture[str]


@pytest.mark.parametrize("kind", ["random", "kernel", "program"])
def test_one_request_to_stdout_plans(kind: str, capsys: Capture) -> None:
    assert main(["generate", kind, "--buffers", "20", "--seed", "3"]) == 0
    request = parse_request(capsys.readouterr().out)
    assert len(request.buffers) >= 16
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    if kind == "program":
        assert request.loops
        assert request.branches
    # The same arguments give the same request.
    assert main(["generate", kind, "--buffers", "20", "--seed", "3"]) == 0
    assert parse_request(capsys.readouterr().out) == request


def test_a_corpus_of_family_instances(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "corpus"
    assert main(["generate", "family", "--family", "pinwheel", "--buffers", "15",
                 "--count", "3", "-o", str(out)]) == 0  # fmt: skip
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"pinwheel-15-s{k}.json" for k in range(3)]
    names = {json.loads(f.read_text())["name"] for f in files}
    assert len(names) == 3
    assert "wrote 3 requests" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate", "family"], "give --family NAME"),
        (["generate", "random", "--count", "2"], "give -o DIR"),
        (["generate", "family", "--family", "pinwheel", "--buffers", "2"], "buffers must be in"),
    ],
)
def test_bad_arguments_are_one_line(argv: list[str], message: str, capsys: Capture) -> None:
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("planner: error: ")
    assert message in line


def test_plans_and_expectations_beside_requests_are_not_benched(tmp_path: Path) -> None:
    for name in ("a.json", "a.plan.json", "a.expect.json", "b.csv"):
        (tmp_path / name).write_text("{}")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "a.json"), str(tmp_path / "b.csv")]
    globbed = [str(tmp_path / n) for n in ("a.json", "a.expect.json", "a.plan.json")]
    assert expand_paths(globbed) == [str(tmp_path / "a.json")]
