"""``planner selftest``: do the validators catch broken plans, and pass correct ones?

Correct plans of the examples and of random requests are broken on purpose, one fault at a
time (``validators.faults``: an overlap of live buffers, a dropped barrier, a misaligned
offset, a broken alias where the plan has one, a misaligned TMA tile, a barrier moved before
an asynchronous access's covering sync, a dropped proxy fence, wait, mbarrier inval or cluster
barrier), and every validator judges every plan: the static check always, the CPU emulator
always, the CUDA harness with ``--gpu``. The table says, per fault kind and validator, how many
planted faults were caught.

The static check and the emulator are meant to catch every fault; the GPU catches a
misaligned offset only where the width of an access makes the hardware fault. The command
fails (exit 1) when a validator passes a plan with an overlap of live buffers, rejects a
correct plan, or when a fault kind it lists was planted nowhere (the random requests alternate
kernels with loops, a branch and two-range buffers with straight-line ones, so that every kind
has a place).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import planner
from planner.batch import request_files
from planner.cli_errors import fail
from planner.core.errors import RequestError
from planner.core.install import install_hint
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.generate import random_program, random_request
from planner.tables import format_columns

if TYPE_CHECKING:
    from planner.validators.cuda import GpuOptions

__all__ = [
    "CORRECT",
    "CPU_CHECKS",
    "MUST_CATCH",
    "Subject",
    "Tally",
    "command",
    "format_table",
    "run_selftest",
    "subjects",
    "validators",
]

CORRECT = "(correct plans)"
MUST_CATCH = ("overlap",)  # fault kinds every validator must catch, the GPU harness too
CPU_CHECKS = ("static", "emulator")  # these must catch every kind of fault planted
EXAMPLES = Path(__file__).resolve().parent / "examples"  # shipped in the wheel too
RANDOM_BLOCK = [64, 1, 1]  # threads: more than one, so cross-thread hazards are real
RANDOM_BUFFERS = (12, 24, 40)  # buffers per random request, in turn (half in a program)
PROGRAM_MIN_BUFFERS = 6  # a random program has one buffer of each shape, and one more
_SYNCS = ("insert", "none", "existing")  # sync policy per random request, in turn
_NOTES = 5  # misses of faults a validator need not catch, listed before "... and N more"

Verdict = tuple[bool, str]  # (passed, why not)
Check = Callable[[PlanRequest, Plan], Verdict]


@dataclass(frozen=True)
class Subject:
    """A request and its correct plan."""

    name: str
    request: PlanRequest
    plan: Plan


@dataclass
class Tally:
    """Counts per fault kind (and ``CORRECT``) and validator."""

    planted: dict[str, int] = field(default_factory=dict)
    caught: dict[tuple[str, str], int] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)  # lines: a must-catch fault passed
    false_alarms: list[str] = field(default_factory=list)  # lines: a correct plan rejected
    other_misses: list[str] = field(default_factory=list)  # faults a validator may miss

    def count(self, kind: str, validator: str, caught: bool) -> None:
        """One verdict on one plan of ``kind``."""
        key = (kind, validator)
        self.caught[key] = self.caught.get(key, 0) + caught

    @property
    def unplanted(self) -> list[str]:
        """Fault kinds no plan had a place for: the run says nothing about them."""
        return sorted(kind for kind, n in self.planted.items() if kind != CORRECT and n == 0)

    @property
    def failed(self) -> bool:
        """A must-catch fault passed, a correct plan was rejected, or a kind was never
        planted."""
        return bool(self.misses or self.false_alarms or self.unplanted)


def subjects(random: int, seed: int, examples: Path | None = EXAMPLES) -> list[Subject]:
    """Correct plans: every example that fits, then ``random`` random requests."""
    out: list[Subject] = []
    if examples is not None and examples.is_dir():
        for path in request_files(examples):
            request = parse_request(path.read_text(encoding="utf-8"))
            plan = planner.plan(request)
            if plan.status in ("optimal", "feasible"):
                out.append(Subject(path.name, request, plan))
    for k in range(random):
        n = RANDOM_BUFFERS[k % len(RANDOM_BUFFERS)]
        sync = _SYNCS[k % len(_SYNCS)]
        if k % 2 == 0:  # loops, a branch and two-range buffers: every fault kind has a place
            # Existing barriers would leave a buffer's reuse across its own back edge
            # unprotected: the program's policy is "none" instead.
            policy = "none" if sync == "existing" else sync
            request = random_program(max(PROGRAM_MIN_BUFFERS, n // 2), seed=seed + k, sync=policy)
            kind = "program"
        else:
            request = random_request(n, overlap=0.2, seed=seed + k, sync=sync)
            kind = "straight"
        existing = sync == "existing" and kind == "straight"
        barriers = sorted({b.end for b in request.buffers})[::3] if existing else []
        request = parse_request(
            {
                **request.model_dump(exclude_defaults=True),
                "name": f"random-{kind}-{n}-{sync}-seed{seed + k}",
                "block": RANDOM_BLOCK,
                "barriers": barriers,
            }
        )
        plan = planner.plan(request)
        out.append(Subject(request.name, request, plan))
    return out


def _static(request: PlanRequest, plan: Plan) -> Verdict:
    report = planner.validate(request, plan)
    first = report.violations[0] if report.violations else None
    return report.valid, f"{first.code}: {first.message}" if first else ""


def _emulator(request: PlanRequest, plan: Plan) -> Verdict:
    from planner.validators.emulator import emulate

    report = emulate(request, plan)
    first = report.violations[0] if report.violations else None
    return report.valid, f"{first.code}: {first.message}" if first else ""


def _gpu(options: GpuOptions) -> Check:
    from planner.validators.cuda import check_plan

    def check(request: PlanRequest, plan: Plan) -> Verdict:
        report = check_plan(request, plan, options)
        return report.ok, f"{report.status}: {report.message}"

    return check


def validators(gpu: GpuOptions | None = None) -> dict[str, Check]:
    """The validators to judge with, by name, in the table's order."""
    checks: dict[str, Check] = {"static": _static, "emulator": _emulator}
    if gpu is not None:
        checks["gpu"] = _gpu(gpu)
    return checks


def _fault_kinds() -> tuple[str, ...]:
    from planner.validators.faults import FAULT_KINDS

    return tuple(FAULT_KINDS)


def _plant(subject: Subject, kind: str, rng: np.random.Generator) -> Subject | None:
    """``subject`` with one fault of ``kind`` (the request changes for some kinds)."""
    from planner.validators.faults import FAULT_KINDS, plant_fault

    known = {k: k for k in FAULT_KINDS}
    if kind not in known:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    fault = plant_fault(subject.request, subject.plan, known[kind], rng)
    if fault is None:
        return None
    return Subject(f"{subject.name} ({fault.description})", fault.request, fault.plan)


def run_selftest(
    cases: Sequence[Subject],
    checks: dict[str, Check],
    *,
    seed: int = 0,
    kinds: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Tally:
    """Judge every correct plan, and each of its planted faults, with every check."""
    kinds = tuple(kinds) if kinds is not None else _fault_kinds()
    tally = Tally(planted=dict.fromkeys((CORRECT, *kinds), 0))
    rng = np.random.default_rng(seed)
    for subject in cases:
        if progress is not None:
            progress(subject.name)
        _judge(subject, CORRECT, checks, tally)
        for kind in kinds:
            planted = _plant(subject, kind, rng)
            if planted is not None:
                _judge(planted, kind, checks, tally)
    return tally


def _judge(subject: Subject, kind: str, checks: dict[str, Check], tally: Tally) -> None:
    tally.planted[kind] = tally.planted.get(kind, 0) + 1
    for name, check in checks.items():
        try:
            passed, why = check(subject.request, subject.plan)
        except Exception as exc:  # a validator must never raise: count it against it
            passed, why = kind != CORRECT, f"raised {type(exc).__name__}: {exc}"
        if kind == CORRECT:
            tally.count(kind, name, passed)
            if not passed:
                tally.false_alarms.append(
                    f"{name} rejected the correct plan of {subject.name}: {why}"
                )
            continue
        tally.count(kind, name, not passed)
        if passed:
            line = f"{name} missed {kind} in {subject.name}"
            must = kind in MUST_CATCH or name in CPU_CHECKS
            (tally.misses if must else tally.other_misses).append(line)


def format_table(tally: Tally, names: Sequence[str]) -> str:
    """Rows: correct plans (passed), then each fault kind (caught); a column per validator."""
    columns = [("plans", "<"), ("planted", ">"), *((name, ">") for name in names)]
    rows: list[list[str]] = []
    for kind in sorted(tally.planted, key=lambda k: (k != CORRECT, k)):
        n = tally.planted[kind]
        verb = "passed" if kind == CORRECT else "caught"
        cells = [f"{tally.caught.get((kind, v), 0)}/{n} {verb}" if n else "-" for v in names]
        rows.append([kind, str(n), *cells])
    return format_columns(columns, rows)


# --- the command -----------------------------------------------------------------------


def command(args: argparse.Namespace) -> int:
    """Run ``planner selftest``: 0 when every validator passed the correct plans, the CPU
    validators caught every planted fault and the GPU harness every overlap; 1 otherwise, 2
    for bad usage."""
    gpu_options = None
    if args.gpu:
        from planner.validators.cuda import GpuOptions, gpu_available

        if not gpu_available():
            return fail(f"--gpu: CuPy or a CUDA device is missing; {install_hint('gpu')}")
        gpu_options = GpuOptions(trials=args.trials, seed=args.seed)
    t0 = time.perf_counter()
    try:
        cases = subjects(args.random, args.seed)
    except RequestError as exc:  # an example file that no longer parses
        return fail(exc.summary())
    checks = validators(gpu_options)
    done = [0]

    def progress(name: str) -> None:
        done[0] += 1
        print(f"\r\x1b[K[{done[0]}/{len(cases)}] {name}"[:120], end="", file=sys.stderr)

    tally = run_selftest(
        cases, checks, seed=args.seed, progress=progress if sys.stderr.isatty() else None
    )
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(format_table(tally, list(checks)))
    for line in tally.other_misses[:_NOTES]:
        print(f"  note: {line}")
    if len(tally.other_misses) > _NOTES:
        print(f"  note: ... and {len(tally.other_misses) - _NOTES} more")
    for line in tally.false_alarms + tally.misses:
        print(f"  FAIL: {line}")
    for kind in tally.unplanted:
        print(f"  FAIL: no plan had a place for a {kind} fault: none was planted (more --random)")
    seconds = time.perf_counter() - t0
    verdict = "FAILED" if tally.failed else "ok"
    faults = sum(n for kind, n in tally.planted.items() if kind != CORRECT)
    print(f"selftest {verdict}: {len(cases)} correct plans, {faults} faults, {seconds:.1f} s")
    return 1 if tally.failed else 0
