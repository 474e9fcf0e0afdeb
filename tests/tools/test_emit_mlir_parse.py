"""The MLIR output of every example parses and verifies with the ``mlir`` extra's bindings
(``iree.compiler.ir``), where they are installed."""

from __future__ import annotations

from pathlib import Path

import pytest

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.emit.mlir import emit_mlir
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


@pytest.mark.parametrize("path", request_files(EXAMPLES), ids=lambda p: p.name)
def test_example_mlir_parses_and_verifies(path: Path) -> None:
    ir = pytest.importorskip("iree.compiler.ir")
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    with ir.Context():
        module = ir.Module.parse(emit_mlir(request, plan))
        assert module.operation.verify()


def test_a_broken_module_does_not_parse() -> None:
    ir = pytest.importorskip("iree.compiler.ir")
    with ir.Context(), pytest.raises(Exception, match="memref"):
        ir.Module.parse("func.func @f() {\n  %0 = memref.viewx\n  return\n}\n")
