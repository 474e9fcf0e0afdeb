"""Figures quoted about the code: the longest functions, and the modules a request passes through.

    python scripts/code_figures.py [--top 5]
    python scripts/code_figures.py --trace examples/loop_tiled_gemm.json

- the ``--top`` longest functions and methods of the package (``planner`` and the directories
  it links to: ``api``, ``solvers``, ``validators``; each file counted once), in lines from
  ``def`` to the last line of the body, numba kernels marked;
- with ``--trace``, the project modules that ``planner.plan`` calls into on a second, warm call
  of the request, in the order each is first entered.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "planner"


@dataclass(frozen=True)
class Function:
    """One function or method: where it is, its name and its length."""

    path: str  # relative to the root, as the file really lies
    name: str  # qualified within the module: ``Class.method``, ``outer.inner``
    lines: int  # from ``def`` to the last line of the body, decorators excluded
    kernel: bool  # compiled by numba (``@njit`` or ``@jit``)


def package_files(root: Path) -> list[Path]:
    """The package's Python files, links followed once: each real file appears once."""
    seen: dict[Path, None] = {}
    for top, _dirs, files in os.walk(root / PACKAGE, followlinks=True):
        for name in sorted(files):
            if name.endswith(".py"):
                seen.setdefault((Path(top) / name).resolve(), None)
    return sorted(seen)


def _is_kernel(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("njit", "jit"):
            return True
    return False


def _functions(
    node: ast.AST, prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def functions(path: Path, root: Path) -> list[Function]:
    """Every function and method of one file, nested ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    relative = path.relative_to(root.resolve()).as_posix()
    return [
        Function(
            relative, name, (node.end_lineno or node.lineno) - node.lineno + 1, _is_kernel(node)
        )
        for name, node in _functions(tree, "")
    ]


def longest(root: Path, top: int) -> list[Function]:
    """The ``top`` longest functions of the package, longest first (ties by path and name)."""
    every = [function for path in package_files(root) for function in functions(path, root)]
    return sorted(every, key=lambda f: (-f.lines, f.path, f.name))[:top]


def trace(request: dict[str, Any]) -> list[str]:
    """The project modules a warm ``planner.plan(request)`` enters, in first-entered order."""
    import planner

    planner.plan(request)  # the first call warms every cache the second one uses
    entered: dict[str, None] = {}

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module == PACKAGE or module.startswith(PACKAGE + "."):
                entered.setdefault(module, None)

    sys.setprofile(profile)
    try:
        planner.plan(request)
    finally:
        sys.setprofile(None)
    return list(entered)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5, help="how many functions to list")
    parser.add_argument(
        "--trace", type=Path, help="a request file: list the modules it passes through"
    )
    args = parser.parse_args(argv)
    if args.trace is not None:
        modules = trace(json.loads(args.trace.read_text()))
        print(
            f"{len(modules)} modules: "
            + " -> ".join(m.removeprefix(PACKAGE + ".") for m in modules)
        )
        return
    for function in longest(ROOT, args.top):
        mark = "  (numba kernel)" if function.kernel else ""
        print(f"{function.lines:5d}  {function.path}::{function.name}{mark}")


if __name__ == "__main__":
    main()
