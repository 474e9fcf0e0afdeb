"""The one-way layers (pyproject.toml, [tool.importlinter]) hold, and the contract catches an
import that points up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

ROOT = ROOT
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_tree_keeps_the_layers() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


@pytest.mark.slow
def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    # The links under planner/ (solvers, validators, api, examples) are copied as folders.
    shutil.copytree(
        ROOT / "planner", tmp_path / "planner", ignore=shutil.ignore_patterns("__pycache__")
    )
    graph = tmp_path / "planner" / "core" / "graph.py"
    graph.write_text(graph.read_text() + "\nfrom planner.solvers import greedy  # noqa\n")
    done = _lint(tmp_path)
    assert done.returncode != 0
    assert "planner.core is not allowed to import planner.solvers" in done.stdout
