"""Device profiles, occupancy figures and ``planner targets``, against hand-computed values."""

from __future__ import annotations

import json

import pytest

import planner
from planner.cli import main
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.targets import TARGETS, blocks_per_sm, launch_figures

Capture = pytest.CaptureFixture[str]

# docs/design.md, Device profiles, typed in by hand: (max smem per block, smem per SM,
# reserved, max blocks, base alignment, TMA).
DESIGN_TABLE = {
    "sm_70": (98304, 98304, 0, 32, 16, False),
    "sm_75": (65536, 65536, 0, 16, 16, False),
    "sm_80": (166912, 167936, 1024, 32, 16, False),
    "sm_86": (101376, 102400, 1024, 16, 16, False),
    "sm_87": (166912, 167936, 1024, 16, 16, False),
    "sm_89": (101376, 102400, 1024, 24, 16, False),
    "sm_90": (232448, 233472, 1024, 32, 1024, True),
    "sm_100": (232448, 233472, 1024, 32, 1024, True),
    "sm_103": (232448, 233472, 1024, 32, 1024, True),
    "sm_120": (101376, 102400, 1024, 32, 1024, True),
    "gfx90a": (65536, 65536, 0, 32, 16, False),
    "gfx942": (65536, 65536, 0, 32, 16, False),
    "gfx950": (163840, 163840, 0, 32, 16, False),
}


def test_profiles_match_the_design_table() -> None:
    got = {
        name: (
            p.max_smem_per_block,
            p.smem_per_sm,
            p.reserved_per_block,
            p.max_blocks_per_sm,
            p.base_alignment,
            p.tma,
        )
        for name, p in TARGETS.items()
    }
    assert got == DESIGN_TABLE


def test_every_nvidia_profile_from_sm_80_reserves_1_kb_and_amd_none() -> None:
    for p in TARGETS.values():
        if p.vendor == "amd":
            assert p.reserved_per_block == 0
        elif p.name not in ("sm_70", "sm_75"):
            assert p.reserved_per_block == 1024, p.name
            assert p.smem_per_sm - p.max_smem_per_block == 1024, p.name


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
        ("sm_100", 16384, 13),  # as sm_90
        ("sm_120", 50176, 2),  # 102400 // 51200
        ("sm_87", 8192, 16),  # 167936 // 9216 = 18.2, capped at 16
        ("gfx942", 16384, 4),  # 65536 // 16384, nothing reserved
        ("gfx950", 40960, 4),  # 163840 // 40960
        ("gfx90a", 65537, 0),
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
    rows = {line.split()[0]: line.split() for line in lines[1:] if line[:2] in ("sm", "gf")}
    assert set(rows) == set(DESIGN_TABLE)
    for name, figures in DESIGN_TABLE.items():
        assert [int(x) for x in rows[name][-6:-1]] == list(figures[:5])
        assert rows[name][-1] == ("yes" if figures[5] else "no")


def test_cli_targets_json(capsys: Capture) -> None:
    assert main(["targets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {
        r["name"]: (
            r["max_smem_per_block"],
            r["smem_per_sm"],
            r["reserved_per_block"],
            r["max_blocks_per_sm"],
            r["base_alignment"],
            r["tma"],
        )
        for r in rows
    }
    assert got == DESIGN_TABLE
    assert rows[-1]["devices"] == "MI350X, MI355X"


# --- a target given as figures --------------------------------------------------------------

FIGURES = {"name": "npu_x", "capacity": 65536, "reserved": 512, "blocks_per_sm": 8}


def test_a_target_given_as_figures_sets_capacity_and_launch_figures() -> None:
    request = {
        "target": FIGURES,
        "buffers": [
            {"id": "a", "size": 8192, "start": 0, "end": 2},
            {"id": "b", "size": 8192, "start": 1, "end": 3},
        ],
    }
    plan = planner.plan(request)
    assert plan.capacity == 65536
    # smem per SM defaults to capacity + reserved: 66048 // (16384 + 512) = 3
    assert plan.launch.blocks_per_sm == 3
    assert plan.launch.base_alignment == 1  # stated for a target given as figures
    assert planner.validate(request, plan).valid


def test_figures_profile_defaults() -> None:
    profile = parse_request({"target": FIGURES, "buffers": []}).profile
    assert profile is not None
    assert (profile.smem_per_sm, profile.reserved_per_block, profile.base_alignment) == (
        66048,
        512,
        16,
    )
    assert not profile.tma


@pytest.mark.parametrize(
    ("target", "loc", "kind"),
    [
        ({**FIGURES, "smem_per_sm": 1000}, ["target", "TargetFigures", "smem_per_sm"], None),
        ({**FIGURES, "base_alignment": 48}, ["target", "TargetFigures", "base_alignment"], None),
        ({"capacity": 1024}, ["target", "TargetFigures", "blocks_per_sm"], "missing"),
        ({**FIGURES, "colour": "red"}, ["target", "TargetFigures", "colour"], "extra_forbidden"),
    ],
)
def test_bad_figures_name_the_field(target: dict[str, object], loc: list[str], kind: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request({"target": target, "buffers": []})
    found = [e for e in info.value.errors if e["loc"][-1] == loc[-1]]
    assert found, info.value.errors
    if kind is not None:
        assert found[0]["type"] == kind


def test_an_alignment_beyond_the_figures_guarantee_is_refused() -> None:
    request = {
        "target": {**FIGURES, "base_alignment": 128},
        "buffers": [{"id": "t", "size": 4096, "start": 0, "end": 2, "alignment": 256}],
    }
    with pytest.raises(RequestError) as info:
        parse_request(request)
    (error,) = info.value.errors
    assert error["loc"] == ["buffers", 0, "alignment"]
    assert error["type"] == "alignment_beyond_target"
    assert "256" in error["msg"]
    assert "128" in error["msg"]
