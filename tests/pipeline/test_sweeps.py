"""Sweeps: each configuration's answer is what planning it alone says, every plan passes the
static validator, and the autotuner hook keeps exactly the configurations that fit."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
from planner.cli import main
from planner.core.params import parse_template
from planner.core.targets import TARGETS, blocks_per_sm
from planner.sweeps import sweep, triton_prune
from tests.support.apps import threads_app
from tests.support.paths import ROOT

JSON = {"content-type": "application/json"}


def kernel(seed: int, buffers: int = 12) -> dict[str, Any]:
    """A random straight-line kernel whose sizes depend on three parameters."""
    rng = random.Random(seed)
    terms = [
        "BM * BK * 2",
        "BK * BN * 2",
        "BM * BN * 4",
        "BM * 4",
        "BN * 4",
        "max(BM, BN) * 8",
        "(BM + BN) * 2",
        "BM * BK * S",
        "BK * 64 // S",
    ]
    out = []
    for k in range(buffers):
        start = rng.randrange(0, 10)
        out.append(
            {
                "id": f"b{k}",
                "size": rng.choice(terms),
                "start": start,
                "end": start + rng.randrange(1, 5),
                "alignment": rng.choice([16, 128, 1024]),
            }
        )
    return {
        "name": f"kernel{seed}",
        "barriers": sorted(rng.sample(range(1, 10), 4)),
        "params": {
            "BM": {"values": [32, 64, 128]},
            "BN": {"values": [64, 128, 256]},
            "BK": {"values": [16, 32]},
            "S": {"min": 1, "max": 4},
        },
        "buffers": out,
        "options": {"sync": rng.choice(["existing", "insert"])},
    }


TARGET_NAMES = ["sm_75", "sm_86", "sm_90"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_answers_equal_planning_each_configuration_alone(seed: int) -> None:
    request = kernel(seed)
    rng = random.Random(seed)
    template = parse_template(request)
    configs = rng.sample(list(template.configurations()), 12)
    refined = sweep(request, configs, targets=TARGET_NAMES, refine="all", plans="all")
    gap = sweep(request, configs, targets=TARGET_NAMES)
    assert refined.shared_graph
    assert gap.shared_graph
    for config, a, g in zip(configs, refined.answers, gap.answers, strict=True):
        alone_request = template.bind(config)
        alone = planner.plan(alone_request)
        assert planner.validate(alone_request, alone).valid
        assert a.config == g.config == config
        assert a.lower_bound == g.lower_bound == alone.lower_bound
        assert a.naive_bytes == g.naive_bytes == alone.naive_bytes
        assert a.arena_bytes == alone.arena_bytes
        assert g.arena_bytes is not None
        assert g.arena_bytes >= alone.arena_bytes
        if g.proved_optimal:
            assert g.arena_bytes == alone.arena_bytes
        for t, fa, fg in zip(TARGET_NAMES, a.targets, g.targets, strict=True):
            cap = TARGETS[t].max_smem_per_block
            assert fa.fits == fg.fits == (alone.arena_bytes <= cap), (config, t)
            assert fa.blocks_per_sm == blocks_per_sm(TARGETS[t], alone.arena_bytes)
        assert a.plan is not None
        assert planner.validate(alone_request, a.plan).valid


@pytest.mark.parametrize("seed", [4, 5])
def test_every_fitting_plan_passes_the_static_validator(seed: int) -> None:
    request = kernel(seed, buffers=16)
    result = sweep(request, targets=["sm_86"], plans="fitting")
    template = parse_template(request)
    assert len(result.answers) == 3 * 3 * 2 * 4
    sample = random.Random(seed).sample(result.answers, 24)
    checked = 0
    for a in sample:
        if a.targets[0].fits:
            assert a.plan is not None
            assert a.plan.arena_bytes == a.arena_bytes
            bound = template.bind(a.config)
            assert [p.size for p in a.plan.placements] == [b.size for b in bound.buffers]
            assert planner.validate(bound, a.plan).valid
            checked += 1
        else:
            assert a.plan is None
    assert checked


def test_occupancy_and_verdicts() -> None:
    request = {
        "params": {"N": {"values": [1, 2, 4]}},
        "alignment": 1024,
        "buffers": [
            {"id": "a", "size": "N * 40000", "start": 0, "end": 2},
            {"id": "b", "size": "N * 40000", "start": 1, "end": 3},
        ],
    }
    result = sweep(request, targets=["sm_80", "sm_86"])
    by_n = {a.config["N"]: a for a in result.answers}
    one = by_n[1].targets
    assert [f.verdict for f in one] == ["fits", "fits"]
    assert one[0].blocks_per_sm == 167936 // (80896 + 1024)
    assert [f.verdict for f in by_n[2].targets] == ["fits", "cannot_fit"]
    assert [f.verdict for f in by_n[4].targets] == ["cannot_fit", "cannot_fit"]
    assert result.fitting == [2, 1]


def test_a_plan_too_big_is_told_apart_from_no_plan_fitting() -> None:
    # Two live 1-byte buffers aligned to 64: the bound is 2 bytes, every plan takes 65.
    request = {
        "params": {"C": {"values": [1, 64, 65]}},
        "capacity": "C",
        "buffers": [
            {"id": "a", "size": 1, "start": 0, "end": 1, "alignment": 64},
            {"id": "b", "size": 1, "start": 0, "end": 1, "alignment": 64},
        ],
    }
    result = sweep(request)
    assert [a.targets[0].verdict for a in result.answers] == ["cannot_fit", "plan_too_big", "fits"]
    assert result.refined == 1  # the gap configuration was replanned alone
    assert all(a.lower_bound == 2 and a.arena_bytes == 65 for a in result.answers)


def test_an_invalid_configuration_is_answered_with_its_error() -> None:
    request = {
        "params": {"A": {"values": [16, 24, 32]}},
        "buffers": [{"id": "x", "size": 64, "start": 0, "end": 1, "alignment": "A"}],
    }
    result = sweep(request)
    assert [a.error is None for a in result.answers] == [True, False, True]
    bad = result.answers[1]
    assert bad.arena_bytes is None
    assert not bad.targets[0].fits
    assert bad.error is not None
    assert "buffers.0.alignment" in bad.error
    assert "A=24" in bad.error


def test_control_flow_is_planned_configuration_by_configuration() -> None:
    request = {
        "params": {"S": {"min": 1, "max": 3}, "T": {"values": [2, 8]}},
        "barriers": [1, 3],
        "loops": [{"start": 1, "end": 3, "trips": "T"}],
        "buffers": [
            {"id": "ring", "size": "S * 4096", "start": 0, "end": 4},
            {"id": "tile", "size": 2048, "start": 1, "end": 2},
            {"id": "out", "size": "S * 1024", "start": 3, "end": 4},
        ],
        "options": {"sync": "existing"},
    }
    result = sweep(request, targets=["sm_75"], plans="all")
    assert not result.shared_graph
    template = parse_template(request)
    for a in result.answers:
        bound = template.bind(a.config)
        alone = planner.plan(bound)
        assert a.plan == alone
        assert a.arena_bytes == alone.arena_bytes
        assert planner.validate(bound, alone).valid


def test_product_and_default_values() -> None:
    request = kernel(7)
    result = sweep(request, product={"BM": [64], "S": [2, 3]})
    assert [(a.config["BM"], a.config["S"]) for a in result.answers][:4] == [
        (64, 2),
        (64, 3),
        (64, 2),
        (64, 3),
    ]
    assert len(result.answers) == 1 * 3 * 2 * 2
    assert result.targets == [None]


@pytest.mark.parametrize(
    ("body", "loc", "words"),
    [
        ({"targets": ["sm_99"]}, ["targets", 0], "unknown target 'sm_99'"),
        ({"configs": [{"BM": 48}]}, ["configs", 0, "BM"], "not one of its declared values"),
        ({"configs": [{"XX": 1}]}, ["configs", 0, "XX"], "unknown parameter"),
        ({"product": {"BM": [7]}}, ["product", "BM", 0], "not one of its declared values"),
        ({"plans": "some"}, ["plans"], "Input should be"),
    ],
)
def test_rejects_bad_sweeps(body: dict[str, Any], loc: list[Any], words: str) -> None:
    with pytest.raises(planner.RequestError) as caught:
        sweep(kernel(1), **body)
    assert caught.value.errors[0]["loc"] == loc
    assert words in caught.value.errors[0]["msg"]


def test_a_bad_request_is_named_under_request() -> None:
    request = kernel(1)
    request["buffers"][2]["size"] = "BM - 32"
    with pytest.raises(planner.RequestError) as caught:
        sweep(request)
    assert caught.value.errors[0]["loc"] == ["request", "buffers", 2, "size"]


def test_too_many_configurations() -> None:
    request = {
        "params": {"A": {"min": 1, "max": 1000}, "B": {"min": 1, "max": 1000}},
        "buffers": [{"id": "x", "size": "A + B", "start": 0, "end": 1}],
    }
    with pytest.raises(planner.RequestError, match="1000000 configurations"):
        sweep(request)


@dataclass
class FakeConfig:
    """What triton.Config looks like to the hook."""

    kwargs: dict[str, int]
    num_stages: int
    num_warps: int = 4
    extra: dict[str, Any] = field(default_factory=dict)


MATMUL: dict[str, Any] = {
    "name": "matmul",
    "alignment": 128,
    "params": {
        "BLOCK_SIZE_M": {"values": [32, 64, 128, 256]},
        "BLOCK_SIZE_N": {"values": [32, 64, 128, 256]},
        "BLOCK_SIZE_K": {"values": [32, 64, 128]},
        "STAGES": {"min": 1, "max": 8},
    },
    "barriers": [1],
    "buffers": [
        {"id": "a", "size": "STAGES * BLOCK_SIZE_M * BLOCK_SIZE_K * 2", "start": 0, "end": 1},
        {"id": "b", "size": "STAGES * BLOCK_SIZE_K * BLOCK_SIZE_N * 2", "start": 0, "end": 1},
        {"id": "c", "size": "BLOCK_SIZE_M * BLOCK_SIZE_N * 2", "start": 1, "end": 2},
    ],
    "options": {"sync": "existing"},
}


def test_triton_hook_keeps_the_configurations_that_fit() -> None:
    configs = [
        FakeConfig({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64}, 3),
        FakeConfig({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64}, 4),
        FakeConfig({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 32}, 4),
        FakeConfig({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128}, 4),
    ]
    for target, fitting in (("sm_86", [2]), ("sm_90", [0, 1, 2])):
        kept = triton_prune(MATMUL, target=target)(configs, {"M": 4096})
        expected = []
        for c in configs:
            bound = planner.bind(MATMUL, {**c.kwargs, "STAGES": c.num_stages})
            plan = planner.plan(bound)
            assert planner.validate(bound, plan).valid
            if plan.arena_bytes <= TARGETS[target].max_smem_per_block:
                expected.append(c)
        assert kept == expected == [configs[k] for k in fitting]


def test_triton_hook_keeps_the_smallest_when_none_fits() -> None:
    big = [
        FakeConfig({"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128}, s)
        for s in (8, 7)
    ]
    assert triton_prune(MATMUL, target="sm_75")(big, {}) == [big[1]]


def test_triton_hook_maps_names() -> None:
    template = copy.deepcopy(MATMUL)
    prune = triton_prune(template, target="sm_86", stages=None, names={"STAGES": "num_buffers"})
    config = FakeConfig(
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "num_buffers": 2}, 9
    )
    assert prune([config], {}) == [config]


def test_service_sweep_matches_the_library() -> None:
    body = {"request": kernel(2), "targets": ["sm_80"], "product": {"BM": [64]}}
    with TestClient(threads_app()) as client:
        response = client.post("/sweep", content=json.dumps(body), headers=JSON)
        assert response.status_code == 200, response.text
        assert response.json() == json.loads(
            sweep(kernel(2), targets=["sm_80"], product={"BM": [64]}).model_dump_json()
        )
        bad = client.post("/sweep", content=json.dumps({**body, "targets": ["sm_1"]}), headers=JSON)
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "targets", 0]
    with TestClient(threads_app(max_buffers=8)) as client:
        response = client.post("/sweep", content=json.dumps(body), headers=JSON)
        assert response.status_code == 422
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "request", "buffers"]
        assert "12 buffers exceed the limit of 8" in detail["msg"]


def test_command_line_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matmul.json"
    path.write_text(json.dumps(MATMUL))
    args = ["sweep", str(path), "--product", "BLOCK_SIZE_M=128", "--product", "BLOCK_SIZE_N=256"]
    assert (
        main(
            [
                *args,
                "--product",
                "STAGES=4,5",
                "--product",
                "BLOCK_SIZE_K=64",
                "--target",
                "sm_90",
                "--json",
            ]
        )
        == 0
    )
    answers = json.loads(capsys.readouterr().out)["answers"]
    assert [a["targets"][0]["verdict"] for a in answers] == ["fits", "cannot_fit"]
    assert main([*args, "--config", "STAGES=8,BLOCK_SIZE_K=128", "--target", "sm_75"]) == 1
    table = capsys.readouterr().out
    assert "cannot_fit" in table
    assert "STAGES" in table
    assert main([*args, "--config", "STAGES=9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "configs.0.STAGES" in err[0]


def _bench_request() -> dict[str, Any]:
    import importlib.util

    path = ROOT / "scripts" / "sweep_bench.py"
    spec = importlib.util.spec_from_file_location("sweep_bench", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    request: dict[str, Any] = module.bench_request()
    return request


def test_benchmark_kernel_sampled_against_planning_alone() -> None:
    request = _bench_request()
    template = parse_template(request)
    assert len(request["buffers"]) == 32
    assert template.product_size() == 10_000
    configs = random.Random(11).sample(list(template.configurations()), 40)
    result = sweep(request, configs, targets=TARGET_NAMES, plans="fitting")
    assert result.shared_graph
    for config, answer in zip(configs, result.answers, strict=True):
        bound = template.bind(config)
        alone = planner.plan(bound)
        assert planner.validate(bound, alone).valid
        assert answer.lower_bound == alone.lower_bound
        for t, fit in zip(TARGET_NAMES, answer.targets, strict=True):
            assert fit.fits == (alone.arena_bytes <= TARGETS[t].max_smem_per_block)
        if answer.plan is not None:
            assert answer.plan.arena_bytes == answer.arena_bytes
            assert planner.validate(bound, answer.plan).valid
