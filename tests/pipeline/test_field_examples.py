"""The kernels from the field in examples/ plan as their README says.

Outcomes are worked out by hand from the request (sizes, lifetimes, thread mappings) and
every plan also goes through the static validator.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import planner
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def _plan(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    return request, plan


def _span(plan: Plan, ident: str) -> range:
    p = next(p for p in plan.placements if p.id == ident)
    return range(p.offset, p.offset + p.size)


def _share(plan: Plan, a: str, b: str) -> bool:
    x, y = _span(plan, a), _span(plan, b)
    return x.start < y.stop and y.start < x.stop


def test_nvfuser_epilogue_reuses_tiles_with_one_inserted_barrier() -> None:
    data = _data("nvfuser_matmul_epilogue.json")
    _, plan = _plan(data)
    # T9_s (16 KB) takes the bytes of the operand tiles T4_s and T5_s (8 KB each), whose last
    # reads are at 3 and 4: one barrier in [5, 6] makes it safe.
    assert plan.arena_bytes == 16384 == plan.lower_bound
    assert plan.naive_bytes == 32768
    assert _share(plan, "T9_s", "T4_s")
    assert _share(plan, "T9_s", "T5_s")
    assert len(plan.barriers.inserted) == 1
    assert 5 <= plan.barriers.inserted[0] <= 6
    assert plan.aliases == []  # the mma reads and the epilogue writes use other threads
    # Under "existing" the tiles are only freed at the barrier at 7, after T9_s starts.
    _, existing = _plan({**data, "options": {"sync": "existing"}})
    assert existing.arena_bytes == 32768


def test_nvfuser_epilogue_uses_a_barrier_that_already_stands() -> None:
    data = _data("nvfuser_matmul_epilogue.json")
    _, plan = _plan({**data, "barriers": [2, 5, 7]})
    assert plan.arena_bytes == 16384
    assert plan.barriers.inserted == []
    assert 5 in plan.barriers.required


def test_nvfuser_inner_alias_needs_no_barrier() -> None:
    _, plan = _plan(_data("nvfuser_inner_alias.json"))
    # Same index, same thread: T3_s sits exactly on T2_s with no barrier between them.
    assert plan.arena_bytes == 4096
    assert _span(plan, "T2_s") == _span(plan, "T3_s")
    assert plan.barriers.inserted == []
    assert plan.barriers.required == []
    assert plan.aliases == [["T2_s", "T3_s"]]


def test_inner_alias_breaks_when_the_threads_differ() -> None:
    data = _data("nvfuser_inner_alias.json")
    data["buffers"][1]["accesses"][0]["index"] = {"threadIdx.x": 4, "i": 1}  # a transpose
    _, plan = _plan(data)
    assert plan.aliases == []
    assert plan.arena_bytes == 4096
    assert len(plan.barriers.inserted) == 1  # sharing is only safe after a barrier
    _, existing = _plan({**data, "options": {"sync": "existing"}})
    assert existing.arena_bytes == 8192
    assert not _share(existing, "T2_s", "T3_s")


def test_tvm_tiled_gemm_csub_over_asub_and_bsub() -> None:
    _, plan = _plan(_data("tvm_tiled_gemm.json"))
    assert plan.arena_bytes == 4096 == plan.lower_bound
    assert _share(plan, "Csub", "Asub")
    assert _share(plan, "Csub", "Bsub")
    assert plan.barriers.required == [4]


def test_tvm_persistent_rnn_plans_one_blocks_rows() -> None:
    data = _data("tvm_persistent_rnn.json")
    request, plan = _plan(data)
    m, n, k = 256, 128, 16  # rows, columns (floats), blocks
    rows = m // k * n * 4  # bytes of the m/k rows one block reads
    assert [f.id for f in plan.footprints] == ["w_i2h", "w_h2h"]
    for f in plan.footprints:
        assert (f.declared, f.planned) == (m * n * 4, rows)
        assert f.index_base == {"blockIdx.x": rows, "constant": 0}
    sizes = {p.id: p.size for p in plan.placements}
    assert sizes == {"w_i2h": rows, "w_h2h": rows, "h_s": 512}
    assert plan.arena_bytes == 2 * rows + 512
    assert plan.status == "optimal"
    # Whole matrices do not fit an A100's 166912 bytes; the diagnostic names the waste.
    _, whole = _plan({**data, "options": {"sync": "existing"}})
    assert request.effective_capacity == 166912
    assert whole.status == "infeasible"
    untouched = [d for d in whole.diagnostics if d.code == "untouched_bytes"]
    assert len(untouched) == 2
    assert str(m * n * 4 - rows) in untouched[0].message


def test_double_buffered_stages_never_share() -> None:
    data = _data("double_buffered_pipeline.json")
    for sync in ("insert", "existing", "none"):
        _, plan = _plan({**data, "options": {"sync": sync}})
        assert not _share(plan, "A_stage0", "A_stage1"), sync
        assert plan.arena_bytes == 16384, sync
        assert plan.aliases == []
    _, plan = _plan(data)
    assert _share(plan, "C_s", "A_stage0")
    assert plan.barriers.inserted == []  # the barrier at 6 already protects the epilogue


def _script() -> ModuleType:
    path = EXAMPLES.parent / "scripts" / "field_examples.py"
    spec = importlib.util.spec_from_file_location("field_examples", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_script_reports_bytes_and_barriers_saved() -> None:
    script = _script()
    matmul = script.savings(EXAMPLES / "nvfuser_matmul_epilogue.json")
    assert (matmul.arena, matmul.existing_arena, matmul.bytes_saved) == (16384, 32768, 16384)
    assert (matmul.inserted, matmul.one_per_reuse, matmul.barriers_saved) == (1, 1, 0)
    alias = script.savings(EXAMPLES / "nvfuser_inner_alias.json")
    assert (alias.inserted, alias.one_per_reuse, alias.barriers_saved) == (0, 1, 1)
