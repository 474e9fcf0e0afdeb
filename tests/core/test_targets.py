"""Device profiles, occupancy figures and ``planner targets``, against hand-computed values."""

from __future__ import annotations

import json

import pytest

import planner
from planner.cli import main
from planner.core.targets import TARGETS, blocks_per_sm, launch_figures

Capture = pytest.CaptureFixture[str]

# docs/design.md, Device profiles, typed in by hand: (max smem per block, smem per SM,
# reserved, max blocks).
DESIGN_TABLE = {
    "sm_70": (98304, 98304, 0, 32),
    "sm_75": (65536, 65536, 0, 16),
    "sm_80": (166912, 167936, 1024, 32),
    "sm_86": (101376, 102400, 1024, 16),
    "sm_89": (101376, 102400, 1024, 24),
    "sm_90": (232448, 233472, 1024, 32),
}


def test_profiles_match_the_design_table() -> None:
    got = {
        name: (p.max_smem_per_block, p.smem_per_sm, p.reserved_per_block, p.max_blocks_per_sm)
        for name, p in TARGETS.items()
    }
    assert got == DESIGN_TABLE


@pytest.mark.parametrize(
    ("target", "smem", "blocks"),
    [
        ("sm_90", 16384, 13),  # 233472 // 17408 = 13.4
        ("sm_90", 24576, 9),  # 233472 // 25600 = 9.1
        ("sm_90", 232448, 1),  # the opt-in maximum: one block
        ("sm_90", 232449, 0),  # over the per-block maximum: none
        ("sm_80", 4096, 32),  # 167936 // 5120 = 32.8, capped at 32
        ("sm_80", 8192, 18),  # 167936 // 9216 = 18.2
        ("sm_75", 65536, 1),
        ("sm_75", 32768, 2),
        ("sm_75", 1, 16),  # 65536 // 1 capped at 16
        ("sm_70", 0, 32),  # no shared memory at all: the block cap
        ("sm_89", 50000, 2),  # 102400 // 51024 = 2.007
        ("sm_86", 50176, 2),  # 102400 // 51200 = 2 exactly
        ("sm_86", 50177, 1),
    ],
)
def test_blocks_per_sm(target: str, smem: int, blocks: int) -> None:
    assert blocks_per_sm(TARGETS[target], smem) == blocks


def test_opt_in_starts_above_48k() -> None:
    assert not launch_figures("sm_90", 49152, 49152)["requires_opt_in"]
    assert launch_figures("sm_90", 49153, 49153)["requires_opt_in"]
    assert launch_figures(None, 10, 20) == {
        "dynamic_smem_bytes": 10,
        "requires_opt_in": False,
        "blocks_per_sm": None,
        "naive_blocks_per_sm": None,
    }


def test_plan_reports_the_occupancy_reuse_wins() -> None:
    # The example of docs/design.md, Wire format: A_s (8192 B) and C_s (16384 B) share bytes
    # after the barrier at 4, so the arena is 16384 where the naive sum is 24576.
    request = {
        "name": "gemm_smem_epilogue",
        "target": "sm_90",
        "alignment": 16,
        "barriers": [4, 9],
        "buffers": [
            {"id": "A_s", "size": 8192, "start": 0, "end": 4, "alignment": 128},
            {"id": "C_s", "size": 16384, "start": 6, "end": 9},
        ],
    }
    plan = planner.plan(request)
    assert (plan.arena_bytes, plan.naive_bytes) == (16384, 24576)
    assert plan.launch.model_dump() == {
        "dynamic_smem_bytes": 16384,
        "requires_opt_in": False,
        "blocks_per_sm": 13,
        "naive_blocks_per_sm": 9,
    }
    assert planner.validate(request, plan).valid


def test_cli_targets_table(capsys: Capture) -> None:
    assert main(["targets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["target", "devices"]
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.startswith("sm_")}
    assert set(rows) == set(DESIGN_TABLE)
    for name, figures in DESIGN_TABLE.items():
        assert [int(x) for x in rows[name][-4:]] == list(figures)


def test_cli_targets_json(capsys: Capture) -> None:
    assert main(["targets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {
        r["name"]: (
            r["max_smem_per_block"],
            r["smem_per_sm"],
            r["reserved_per_block"],
            r["max_blocks_per_sm"],
        )
        for r in rows
    }
    assert got == DESIGN_TABLE
    assert rows[-1]["devices"] == "H100, H200"
