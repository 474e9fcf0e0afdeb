"""The code-figures script: function lengths over a package laid out with linked folders, numba
kernels marked, and the modules a warm plan passes through."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "code_figures.py"

TINY = '''"""A module."""


def short() -> int:
    return 1


@njit(borrows=True)
def kernel(x):
    y = x
    return y


class Box:
    def method(self) -> int:
        a = 1
        b = 2
        return a + b
'''


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_figures_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_figures_script"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


def test_longest_counts_each_linked_file_once_and_marks_kernels(tmp_path: Path) -> None:
    figures = _load()
    (tmp_path / "solvers").mkdir()
    (tmp_path / "solvers" / "tiny.py").write_text(TINY)
    (tmp_path / "planner").mkdir()
    (tmp_path / "planner" / "solvers").symlink_to("../solvers")
    (tmp_path / "planner" / "one.py").write_text("def one() -> None:\n    pass\n")
    rows = figures.longest(tmp_path, 10)
    assert [(f.path, f.name, f.lines, f.kernel) for f in rows] == [
        ("solvers/tiny.py", "Box.method", 4, False),
        ("solvers/tiny.py", "kernel", 3, True),
        ("planner/one.py", "one", 2, False),
        ("solvers/tiny.py", "short", 2, False),
    ]
    assert len(figures.longest(tmp_path, 1)) == 1


def test_trace_lists_the_facade_first_and_the_static_validator() -> None:
    figures = _load()
    request = json.loads((ROOT / "examples" / "loop_tiled_gemm.json").read_text())
    modules = figures.trace(request)
    assert modules[0] == "planner.pipeline.facade"
    assert "planner.validators.static" in modules
    assert len(modules) == len(set(modules))
    assert all(m.startswith("planner.") for m in modules)
