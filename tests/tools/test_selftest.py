"""``planner selftest``: planted faults are caught, correct plans pass, and a validator that
rejects a correct plan, a CPU validator that misses any planted fault, or any validator that
misses an overlap fails the run."""

from __future__ import annotations

import pytest

import planner
from planner.cli import main
from planner.core.models import Plan, PlanRequest
from planner.selftest import CORRECT, EXAMPLES, Subject, Tally, run_selftest, subjects, validators
from planner.validators.cuda import gpu_available
from planner.validators.faults import FAULT_KINDS

Capture = pytest.CaptureFixture[str]


@pytest.fixture(scope="module")
def cases() -> list[Subject]:
    return subjects(3, seed=7, examples=EXAMPLES)


@pytest.fixture(scope="module")
def tally(cases: list[Subject]) -> Tally:
    return run_selftest(cases, validators(), seed=7)


def test_subjects_are_correct_plans_of_examples_and_random_requests(cases: list[Subject]) -> None:
    names = [c.name for c in cases]
    assert "tvm_tiled_gemm.json" in names
    assert "too_big_for_sm75.json" not in names  # infeasible: nothing to break
    assert sum(n.startswith("random-") for n in names) == 3
    assert sum(n.startswith("random-program-") for n in names) == 2  # the first and third
    for case in cases:
        assert planner.validate(case.request, case.plan).valid
        if case.name.startswith("random-"):
            assert case.request.block == [64, 1, 1]


def test_correct_plans_pass_and_overlaps_are_caught(tally: Tally, cases: list[Subject]) -> None:
    assert tally.planted[CORRECT] == len(cases)
    assert tally.caught[(CORRECT, "static")] == len(cases)
    assert tally.caught[(CORRECT, "emulator")] == len(cases)
    assert not tally.false_alarms
    assert not tally.misses
    assert not tally.failed
    overlaps = tally.planted["overlap"]
    # Every plan with two buffers live together on some path gets one (the same live range
    # in different arms of a branch is not together).
    assert overlaps >= sum(_two_live(c.request) for c in cases) - 1
    assert tally.caught[("overlap", "static")] == overlaps
    assert tally.caught[("overlap", "emulator")] == overlaps


def _two_live(request: PlanRequest) -> bool:
    spans = [
        (
            b.id,
            s,
            e,
            [
                k
                for br in request.branches
                for k, a in enumerate(br.arms)
                if a[0] <= s and e <= a[1]
            ],
        )
        for b in request.buffers
        for s, e in b.lifetimes
    ]
    return any(
        x[0] != y[0] and x[1] < y[2] and y[1] < x[2] and not (x[3] and y[3] and x[3] != y[3])
        for x in spans
        for y in spans
    )


def test_static_check_catches_every_kind(tally: Tally) -> None:
    for kind in FAULT_KINDS:
        assert tally.caught.get((kind, "static"), 0) == tally.planted[kind], kind
    assert tally.planted["drop_barrier"] > 0
    assert tally.planted["misalign"] > 0


def test_every_kind_is_planted(tally: Tally) -> None:
    assert tally.unplanted == []
    assert all(tally.planted[kind] > 0 for kind in FAULT_KINDS), tally.planted


def test_a_kind_planted_nowhere_fails_the_run(cases: list[Subject]) -> None:
    straight = [c for c in cases if c.name.startswith("random-straight-")]
    assert straight
    assert not straight[0].request.has_control_flow
    result = run_selftest(straight[:1], validators(), seed=7, kinds=["overlap", "range_overlap"])
    assert result.planted["range_overlap"] == 0
    assert result.unplanted == ["range_overlap"]
    assert result.failed
    assert not result.misses
    assert not result.false_alarms


def test_emulator_catches_dropped_barriers(tally: Tally) -> None:
    assert tally.caught[("drop_barrier", "emulator")] == tally.planted["drop_barrier"]


def _lenient(request: PlanRequest, plan: Plan) -> tuple[bool, str]:
    return True, ""


def _strict(request: PlanRequest, plan: Plan) -> tuple[bool, str]:
    return False, "rejects everything"


def test_a_validator_that_misses_overlaps_fails_the_run(cases: list[Subject]) -> None:
    result = run_selftest(cases[:2], {"lenient": _lenient}, seed=7, kinds=["overlap"])
    assert result.failed
    assert result.misses[0].startswith("lenient missed overlap in ")
    assert not result.false_alarms


def test_a_cpu_validator_that_misses_any_fault_fails_the_run(cases: list[Subject]) -> None:
    """The static check and the emulator must catch every kind planted; another check (the
    GPU harness) must catch overlaps only."""
    as_cpu = run_selftest(cases[:2], {"static": _lenient}, seed=7, kinds=["misalign"])
    assert as_cpu.planted["misalign"] > 0
    assert as_cpu.failed
    assert as_cpu.misses[0].startswith("static missed misalign in ")
    other = run_selftest(cases[:2], {"gpu": _lenient}, seed=7, kinds=["misalign"])
    assert not other.failed
    assert other.other_misses
    assert not other.misses


def test_a_validator_that_rejects_correct_plans_fails_the_run(cases: list[Subject]) -> None:
    result = run_selftest(cases[:2], {"strict": _strict}, seed=7, kinds=["overlap"])
    assert result.failed
    assert len(result.false_alarms) == 2
    assert "rejects everything" in result.false_alarms[0]
    assert result.caught[("overlap", "strict")] == result.planted["overlap"]


def test_a_validator_that_raises_counts_against_it(cases: list[Subject]) -> None:
    def broken(request: PlanRequest, plan: Plan) -> tuple[bool, str]:
        raise RuntimeError("boom")

    result = run_selftest(cases[:1], {"broken": broken}, seed=7, kinds=["overlap"])
    assert "raised RuntimeError: boom" in result.false_alarms[0]
    assert result.misses  # the planted overlap went uncaught


def test_unknown_fault_kind_is_an_error(cases: list[Subject]) -> None:
    with pytest.raises(ValueError, match="unknown fault kind 'typo'"):
        run_selftest(cases[:1], validators(), kinds=["typo"])


def test_cli_prints_the_table_and_passes(capsys: Capture) -> None:
    assert main(["selftest", "--random", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header == ["plans", "planted", "static", "emulator"]
    assert "(correct plans)" in out
    assert "selftest ok:" in out


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_cli_gpu_flag_without_a_gpu_is_bad_usage(capsys: Capture) -> None:
    assert main(["selftest", "--gpu"]) == 2
    assert "CuPy or a CUDA device is missing" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="CuPy or a CUDA device is missing")
def test_gpu_selftest(capsys: Capture) -> None:
    assert main(["selftest", "--gpu", "--random", "6"]) == 0, capsys.readouterr().out
