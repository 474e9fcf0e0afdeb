"""The families in examples/ answer as examples/README.md says, checked from first
principles and through the static validator."""

from __future__ import annotations

import json
from typing import Any

import planner
from planner.core.params import parse_template
from planner.core.targets import TARGETS
from planner.sweeps import sweep
from planner.symbolic import check_symbolic, evaluate, sample_points, symbolic_plan
from tests.support.paths import ROOT
from tests.support.rings import brute_force

EXAMPLES = ROOT / "examples"

# The autotune configurations of Triton's matmul tutorial: BLOCK_SIZE_M, _N, _K, num_stages
# (the last eight are its fp8 configurations, planned here as fp16 like the rest).
TUTORIAL = [
    (128, 256, 64, 3), (64, 256, 32, 4), (128, 128, 32, 4), (128, 64, 32, 4),
    (64, 128, 32, 4), (128, 32, 32, 4), (64, 32, 32, 5), (32, 64, 32, 5),
    (128, 256, 128, 3), (256, 128, 128, 3), (256, 64, 128, 4), (64, 256, 128, 4),
    (128, 128, 128, 4), (128, 64, 64, 4), (64, 128, 64, 4), (128, 32, 64, 4),
]  # fmt: skip
TARGET_NAMES = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_120"]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def test_triton_autotune_configurations_per_target() -> None:
    request = _load("triton_matmul_autotune.json")
    configs = [
        {"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "STAGES": s}
        for m, n, k, s in TUTORIAL
    ]
    result = sweep(request, configs, targets=TARGET_NAMES, plans="fitting")
    template = parse_template(request)
    naive_fits = [0] * len(TARGET_NAMES)
    for (m, n, k, s), answer in zip(TUTORIAL, result.answers, strict=True):
        rings = s * (m * k + k * n) * 2  # live together in the main loop
        epilogue = m * n * 2  # after the barrier, over the rings
        assert answer.arena_bytes == answer.lower_bound == max(rings, epilogue)
        assert answer.naive_bytes == rings + epilogue
        for t, fit in enumerate(answer.targets):
            cap = TARGETS[TARGET_NAMES[t]].max_smem_per_block
            assert fit.fits == (max(rings, epilogue) <= cap)
            naive_fits[t] += rings + epilogue <= cap
        if answer.plan is not None:
            assert planner.validate(template.bind(answer.config), answer.plan).valid
    assert result.fitting == [11, 10, 10, 11, 10]
    assert naive_fits == [10, 7, 7, 11, 7]


def test_persistent_rnn_offsets_hold_for_every_runtime_length() -> None:
    request = _load("persistent_rnn_ndyn.json")
    plan = symbolic_plan(request)
    template = parse_template(request)
    points = sample_points(template, 8)
    check_symbolic(request, plan, points)
    for corner in plan.corners:
        assert corner.arena_bytes == corner.lower_bound
    default = planner.plan(request)
    assert planner.validate(template.bind({}), default).valid
    assert default.arena_bytes == default.lower_bound == 37888
    assert evaluate(plan, template.default_config())[1] == 37888


def test_warp_specialised_ring_depths_under_227_kb() -> None:
    request = _load("ws_gemm_ring_depth.json")
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert plan.rings is not None
    chosen = {r.id: r.copies for r in plan.rings}
    # A stage is an A tile (128x64 fp16) and a B tile (64x256 fp16), consumed together: the
    # depth a hand-tuned kernel derives, (227 KB - epilogue - mbarriers) // 48 KB, is 3.
    capacity = TARGETS["sm_90"].max_smem_per_block
    assert capacity == 232448
    assert chosen == {"AB_stage": (capacity - 65536 - 256) // 49152} == {"AB_stage": 3}
    assert plan.arena_bytes == 3 * 49152 + 65536 + 256 <= capacity
    assert brute_force(request) == (chosen, plan.arena_bytes)
