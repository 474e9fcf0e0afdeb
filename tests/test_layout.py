"""The test tree's layout: test modules share code only through helper modules (samples,
strategies, plans, browser, ...), never by importing one another, so each runs on its own
and moving a test never breaks another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.name


def _test_module(dotted: str, level: int = 0) -> str | None:
    """The test module (``test_*``, in this package) that ``dotted`` names, if any.

    ``level`` counts the leading dots of a relative import: 1 is this package, more is
    above it.
    """
    parts = dotted.split(".") if dotted else []
    if level == 0:
        if parts[:1] != [PACKAGE]:
            return None
        parts = parts[1:]
    elif level > 1:
        return None
    return parts[0] if parts and parts[0].startswith("test_") else None


def _imported_test_modules(tree: ast.AST) -> set[str]:
    """Every test module the code imports, at any depth (inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str | None] = []
        if isinstance(node, ast.Import):
            names = [_test_module(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [_test_module(base, node.level)]
            # ``from tests import test_x`` and ``from . import test_x`` name the module last.
            names += [
                _test_module(f"{base}.{alias.name}" if base else alias.name, node.level)
                for alias in node.names
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [_test_module(node.args[0].value)]
        found.update(name for name in names if name is not None)
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from tests.test_svg import TEN",
        "from .test_svg import TEN",
        "from tests.test_svg.sub import x",
        "from . import samples, test_svg",
        "from tests import test_svg",
        "import tests.test_svg",
        "import planner, tests.test_svg as svg",
        "def f():\n    from tests.test_svg import TEN",
        "importlib.import_module('tests.test_svg')",
        "import_module('tests.test_svg')",
    ],
)
def test_every_form_of_import_is_seen(source: str) -> None:
    assert _imported_test_modules(ast.parse(source)) == {"test_svg"}


@pytest.mark.parametrize(
    "source",
    [
        "from tests.samples import TEN",
        "from .samples import TEN",
        "from . import samples",
        "import tests.strategies",
        "from planner.core import test_data",
        "from ..test_svg import TEN",
        "import test_svg",
        "x = 'tests.test_svg'",
    ],
)
def test_imports_of_other_modules_pass(source: str) -> None:
    assert _imported_test_modules(ast.parse(source)) == set()


def test_no_module_in_tests_imports_a_test_module() -> None:
    modules = sorted(TESTS.glob("*.py"))
    assert TESTS / "test_layout.py" in modules
    offenders = {
        path.name: sorted(found)
        for path in modules
        if (found := _imported_test_modules(ast.parse(path.read_text(), str(path))))
    }
    assert offenders == {}, "move what they share into a helper module"
