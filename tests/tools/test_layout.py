"""The test tree's layout: tests sit in one folder per area, share code only through the
helper modules of tests/support, and never import one another, so each runs on its own and
moving a test never breaks another."""

from __future__ import annotations

import ast

import pytest

from tests.support.paths import TESTS

PACKAGE = TESTS.name
AREAS = {"core", "solvers", "validators", "pipeline", "api", "bridges", "tools"}


def _test_module(dotted: str, level: int = 0) -> str | None:
    """The test module (``test_*``, in this package) that ``dotted`` names, if any.

    ``level`` counts the leading dots of a relative import; an absolute name must start
    with this package.
    """
    parts = dotted.split(".") if dotted else []
    if level == 0:
        if parts[:1] != [PACKAGE]:
            return None
        parts = parts[1:]
    return next((part for part in parts if part.startswith("test_")), None)


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
            # ``from tests.api import test_x`` and ``from . import test_x`` name it last.
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
        "from tests.api.test_svg import TEN",
        "from tests.tools.test_svg.sub import x",
        "from . import samples, test_svg",
        "from ..tools import test_svg",
        "from ..tools.test_svg import TEN",
        "from tests.tools import test_svg",
        "import tests.tools.test_svg",
        "import planner, tests.tools.test_svg as svg",
        "def f():\n    from tests.tools.test_svg import TEN",
        "importlib.import_module('tests.tools.test_svg')",
        "import_module('tests.tools.test_svg')",
    ],
)
def test_every_form_of_import_is_seen(source: str) -> None:
    assert _imported_test_modules(ast.parse(source)) == {"test_svg"}


@pytest.mark.parametrize(
    "source",
    [
        "from tests.support.samples import TEN",
        "from ..support import samples",
        "import tests.support.strategies",
        "from planner.core import test_data",
        "import test_svg",
        "x = 'tests.tools.test_svg'",
    ],
)
def test_imports_of_other_modules_pass(source: str) -> None:
    assert _imported_test_modules(ast.parse(source)) == set()


def test_no_module_in_tests_imports_a_test_module() -> None:
    modules = sorted(TESTS.rglob("*.py"))
    assert TESTS / "tools" / "test_layout.py" in modules
    offenders = {
        str(path.relative_to(TESTS)): sorted(found)
        for path in modules
        if (found := _imported_test_modules(ast.parse(path.read_text(), str(path))))
    }
    assert offenders == {}, "move what they share into tests/support"


def test_tests_sit_in_their_areas_and_helpers_in_support() -> None:
    loose = sorted(
        p.name for p in TESTS.glob("*.py") if p.name not in ("__init__.py", "conftest.py")
    )
    assert loose == []
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= AREAS | {"support"}
    assert not list((TESTS / "support").glob("test_*.py"))
    for area in folders - {"support"}:
        assert list((TESTS / area).glob("test_*.py")), area
        extra = [p.name for p in (TESTS / area).glob("*.py") if not p.name.startswith("test_")]
        assert extra == ["__init__.py"], (area, extra)
