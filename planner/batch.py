"""``planner batch``: plan and validate every request in a directory, as a CI job does.

Each ``NAME.json`` (or MiniMalloc ``NAME.csv``) is one test case. The plan is
``NAME.plan.json`` beside it when there is one, else planned here. Every plan goes through
the static validator; with ``emulate`` through the CPU emulator and with ``gpu`` through the
CUDA harness too. A case fails when its file is bad, its plan does not fit (infeasible or
unknown) or a validator rejects it; the failure is one line, never a traceback.

An MLIR module (``NAME.mlir``, or bytecode ``NAME.mlirbc``) is planned and rewritten by the
MLIR bridge and the rewritten module read back and judged; a Triton TTGIR file
(``NAME.ttgir``, its target from the module's ``ttg.target``) has Triton's own plan judged
(docs/bridges.md). Both need their extra; without it the case is bad input naming the extra.

A case may say what is expected of it, in an ``"expect"`` object beside the request's fields
or in ``NAME.expect.json``: ``{"status": "infeasible"}`` (or a list of statuses), and
optionally ``"arena_bytes"``. Then the case passes when the plan has that status (and arena)
and every validator accepts it, and fails otherwise.

Planning and the CPU checks run in ``jobs`` worker processes; the GPU checks run in this
process, one at a time, so one CUDA context serves them all and compiled kernels are reused.
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import planner
from planner.catalog import EXPECT_SUFFIX, PLAN_SUFFIX, is_request_file
from planner.cli_errors import describe, fail
from planner.core.csvio import load_request
from planner.core.errors import RequestError
from planner.core.install import install_hint
from planner.core.io import parse_plan, parse_request
from planner.core.models import Plan, PlanRequest
from planner.tables import format_columns

if TYPE_CHECKING:
    from planner.bridges._plans import Verdict
    from planner.validators.cuda import GpuOptions

__all__ = [
    "EXPECT_SUFFIX",
    "PLAN_SUFFIX",
    "Case",
    "CaseResult",
    "Expectation",
    "Progress",
    "check_case",
    "command",
    "find_cases",
    "format_table",
    "gpu_check",
    "junit_xml",
    "parse_expectation",
    "request_files",
    "run_batch",
]

_STATUSES = ("optimal", "feasible", "infeasible", "unknown")
IR_SUFFIXES = (".mlir", ".mlirbc", ".ttgir")  # compiler IR, read by the bridges
VALIDATORS = ("static", "emulator", "gpu")
_FITTING = ("optimal", "feasible")


@dataclass(frozen=True)
class Case:
    """One request file and the plan file beside it, if any."""

    name: str  # file name, e.g. "gemm.json"
    request: Path
    plan: Path | None
    expect: Path | None = None  # NAME.expect.json


@dataclass(frozen=True)
class Expectation:
    """What a case's plan must be: one of ``statuses``, and ``arena_bytes`` if given."""

    statuses: tuple[str, ...] = ("optimal", "feasible")
    arena_bytes: int | None = None

    def failures(self, plan: Plan) -> list[str]:
        """One line per way ``plan`` differs from this."""
        found = []
        if plan.status not in self.statuses:
            want = " or ".join(self.statuses)
            found.append(f"expect: status {want} expected, got {plan.status}")
        if self.arena_bytes is not None and plan.arena_bytes != self.arena_bytes:
            found.append(f"expect: arena {self.arena_bytes} B expected, got {plan.arena_bytes} B")
        return found


def parse_expectation(data: object, where: str) -> Expectation:
    """An ``expect`` object; raises RequestError naming ``where`` and the bad value."""
    if not isinstance(data, dict) or not set(data) <= {"status", "arena_bytes"}:
        raise RequestError.field(
            (where,), 'expected {"status": ..., "arena_bytes": ...}', "bad_expect", data
        )
    status = data.get("status", ["optimal", "feasible"])
    statuses = tuple(status) if isinstance(status, list) else (status,)
    if not statuses or any(s not in _STATUSES for s in statuses):
        msg = f"status must be one of {', '.join(_STATUSES)}"
        raise RequestError.field((where, "status"), msg, "bad_expect", status)
    arena = data.get("arena_bytes")
    if arena is not None and (not isinstance(arena, int) or isinstance(arena, bool) or arena < 0):
        msg = "arena_bytes must be a non-negative integer"
        raise RequestError.field((where, "arena_bytes"), msg, "bad_expect", arena)
    return Expectation(statuses, arena)


@dataclass(frozen=True)
class CaseResult:
    """What happened to one case. ``checks`` maps each validator run to "pass" or "FAIL"."""

    name: str
    buffers: int
    status: str  # the plan's status, or "bad input"
    arena_bytes: int | None
    checks: tuple[tuple[str, str], ...]
    failures: tuple[str, ...]  # one line each: "<validator>: <why>"
    seconds: float  # planning and checking, wall time
    planned: bool  # False: the plan came from NAME.plan.json
    request_json: str = ""  # kept for the GPU check in the parent process
    plan_json: str = ""

    @property
    def ok(self) -> bool:
        """No failure of any kind."""
        return not self.failures


def request_files(directory: Path) -> list[Path]:
    """Every ``*.json`` and ``*.csv`` request in ``directory`` (not recursive), sorted by
    name: plans (``NAME.plan.json``) and expectations (``NAME.expect.json``) are not requests."""
    return [
        path
        for path in sorted(directory.iterdir())
        if path.is_file() and (is_request_file(path.name) or path.suffix.lower() in IR_SUFFIXES)
    ]


def find_cases(directory: Path) -> list[Case]:
    """Every request in ``directory`` (``request_files``), with ``NAME.plan.json`` beside
    ``NAME.json`` as its plan and ``NAME.expect.json`` as its expectation."""
    cases: list[Case] = []
    for path in request_files(directory):
        plan = path.with_name(path.stem + PLAN_SUFFIX)
        expect = path.with_name(path.stem + EXPECT_SUFFIX)
        cases.append(
            Case(
                path.name,
                path,
                plan if plan.is_file() else None,
                expect if expect.is_file() else None,
            )
        )
    return cases


def _bad_input(case: Case, what: str, seconds: float) -> CaseResult:
    what = " ".join(what.split())  # one line in the table
    return CaseResult(case.name, 0, "bad input", None, (), (f"input: {what}",), seconds, False)


def check_case(case: Case, emulate: bool, keep_json: bool = False) -> CaseResult:
    """Load, plan (unless a plan is given) and validate one case on the CPU; never raises:
    a bad file, and even a bug, is the case's failure, in one line."""
    t0 = time.perf_counter()
    try:
        return _check_case(case, emulate, keep_json, t0)
    except Exception as exc:  # keep the batch going; the failure names the error
        why = " ".join(str(exc).split()) or "no message"
        return CaseResult(
            case.name,
            0,
            "error",
            None,
            (),
            (f"internal: {type(exc).__name__}: {why}",),
            time.perf_counter() - t0,
            case.plan is None,
        )


def _load_case(case: Case) -> tuple[PlanRequest, Expectation]:
    """The request, without its ``expect`` object, and what is expected of it."""
    expect: object = None
    where = "expect"  # the loc of an error: the inline object, or the file beside
    request: PlanRequest | None = None
    if case.request.suffix.lower() == ".json":
        try:
            data = json.loads(case.request.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None  # load_request below says what is wrong with the file
        if isinstance(data, dict) and "expect" in data:
            expect = data.pop("expect")
            request = parse_request(data, max_buffers=max(len(data.get("buffers", [])), 100_000))
    if request is None:
        request = load_request(str(case.request))
    if case.expect is not None:
        if expect is not None:
            msg = f"both an 'expect' object and {case.expect.name}; keep one"
            raise RequestError.field(("expect",), msg, "bad_expect", None)
        where = case.expect.name
        try:
            expect = json.loads(case.expect.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise RequestError.field((), f"cannot read: {exc}", "bad_expect", None) from None
    if expect is None:
        return request, Expectation()
    return request, parse_expectation(expect, where)


def _check_case(case: Case, emulate: bool, keep_json: bool, t0: float) -> CaseResult:
    if case.request.suffix.lower() in IR_SUFFIXES:
        return _check_ir(case, emulate, t0)
    try:
        request, expectation = _load_case(case)
    except RequestError as exc:
        return _bad_input(case, describe(exc, case.name, always=True), time.perf_counter() - t0)
    try:
        if case.plan is not None:
            plan = _load_plan(case.plan)
        else:
            plan = planner.plan(request, max_buffers=max(len(request.buffers), 100_000))
    except RequestError as exc:
        where = case.plan.name if case.plan is not None else case.name
        return _bad_input(case, describe(exc, where, always=True), time.perf_counter() - t0)
    checks, failures = _cpu_checks(request, plan, emulate, expectation)
    return CaseResult(
        case.name,
        len(request.buffers),
        plan.status,
        plan.arena_bytes,
        tuple(checks),
        tuple(failures),
        time.perf_counter() - t0,
        case.plan is None,
        request.model_dump_json() if keep_json else "",
        plan.model_dump_json() if keep_json else "",
    )


def _check_ir(case: Case, emulate: bool, t0: float) -> CaseResult:
    """An MLIR module planned, rewritten and read back, or Triton's plan of a TTGIR file
    judged; a kernel the bridge cannot read is listed, not failed."""
    from planner.core.errors import MissingExtraError

    try:
        data = case.request.read_bytes()
        if case.request.suffix.lower() == ".ttgir":
            return _check_ttgir(case, data.decode("utf-8"), emulate, t0)
        from planner.bridges.mlir import check_module, plan_module

        source: str | bytes = data if data.startswith(b"ML\xefR") else data.decode("utf-8")
        result = plan_module(source)
        checks = check_module(result.module, emulation=emulate)
    except MissingExtraError as exc:
        return _bad_input(case, str(exc), time.perf_counter() - t0)
    except RequestError as exc:
        return _bad_input(case, describe(exc, case.name, always=True), time.perf_counter() - t0)
    except (OSError, UnicodeDecodeError) as exc:
        return _bad_input(case, f"cannot read: {exc}", time.perf_counter() - t0)
    planned = [k for k in result.kernels if k.plan is not None and k.status == "rewritten"]
    status = "optimal" if all(k.plan.status == "optimal" for k in planned if k.plan) else "feasible"
    if not planned:
        status = "unchanged"
    if any(k.status == "skipped" for k in result.kernels):
        status = "partial"  # some kernel was left as it was
    verdicts = [c.verdict for c in checks if c.verdict is not None]
    return _ir_result(
        case,
        sum(k.buffers for k in planned),
        status,
        max((k.arena_bytes for k in planned), default=None),
        verdicts,
        emulate,
        t0,
    )


def _check_ttgir(case: Case, text: str, emulate: bool, t0: float) -> CaseResult:
    import re

    from planner.bridges.triton import check_ttgir

    found = re.search(r'ttg\.target\s*=\s*"cuda:(\d+)"', text)
    if found is None:
        return _bad_input(case, 'no ttg.target = "cuda:NN" in the module', time.perf_counter() - t0)
    report = check_ttgir(text, f"sm_{found.group(1)}", emulation=emulate)
    if not report.modeled or report.triton_verdict is None:
        return CaseResult(case.name, 0, "unmodelled", None, (), (), time.perf_counter() - t0, False)
    return _ir_result(
        case,
        report.buffers,
        "feasible",
        report.triton_bytes,
        [report.triton_verdict],
        emulate,
        t0,
    )


def _ir_result(
    case: Case,
    buffers: int,
    status: str,
    arena: int | None,
    verdicts: Sequence[Verdict],
    emulate: bool,
    t0: float,
) -> CaseResult:
    static = [line for v in verdicts for line in v.static]
    emulated = [line for v in verdicts for line in v.emulated]
    checks = [("static", "FAIL" if static else "pass")]
    if emulate:
        checks.append(("emulator", "FAIL" if emulated else "pass"))
    failures = [f"static: {line}" for line in static[:1]]
    failures += [f"emulator: {line}" for line in emulated[:1]]
    return CaseResult(
        case.name,
        buffers,
        status,
        arena,
        tuple(checks),
        tuple(failures),
        time.perf_counter() - t0,
        True,
    )


def _load_plan(path: Path) -> Plan:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequestError.field((), f"cannot read: {exc}", "file_unreadable", str(path)) from None
    return parse_plan(text)


def _cpu_checks(
    request: PlanRequest, plan: Plan, emulate: bool, expectation: Expectation
) -> tuple[list[tuple[str, str]], list[str]]:
    checks: list[tuple[str, str]] = []
    failures: list[str] = []
    if expectation == Expectation():
        if plan.status not in _FITTING:
            failures.append(_not_fitting(plan))
    else:
        failures += expectation.failures(plan)
    report = planner.validate(request, plan)
    checks.append(("static", "pass" if report.valid else "FAIL"))
    if not report.valid:
        v = report.violations[0]
        more = f" (and {len(report.violations) - 1} more)" if len(report.violations) > 1 else ""
        failures.append(f"static: {v.code}: {v.message}{more}")
    if emulate and plan.status in _FITTING:
        from planner.validators.emulator import emulate as run_emulator

        emulation = run_emulator(request, plan)
        checks.append(("emulator", "pass" if emulation.valid else "FAIL"))
        if not emulation.valid:
            first = emulation.violations[0] if emulation.violations else None
            why = f"{first.code}: {first.message}" if first else "truncated report"
            failures.append(f"emulator: {why}")
    return checks, failures


def _not_fitting(plan: Plan) -> str:
    cert = plan.certificate
    if plan.status == "infeasible" and cert is not None:
        at = f" at point {cert.point}" if cert.point is not None else ""
        return f"plan: infeasible: {cert.live_bytes} B live{at} > capacity {cert.capacity} B"
    over = plan.arena_bytes - (plan.capacity or 0)
    return f"plan: {plan.status}: the best plan is {over} B over capacity {plan.capacity} B"


def gpu_check(result: CaseResult, options: GpuOptions | None = None) -> CaseResult:
    """``result`` with the CUDA harness's verdict added (its JSON must have been kept)."""
    if not result.plan_json or result.status not in _FITTING:
        return result
    from planner.validators.cuda import GpuOptions, check_plan

    request = parse_request(result.request_json)
    plan = parse_plan(result.plan_json)
    t0 = time.perf_counter()
    report = check_plan(request, plan, options or GpuOptions())
    checks = (*result.checks, ("gpu", "pass" if report.ok else "FAIL"))
    failures = result.failures if report.ok else (*result.failures, f"gpu: {report.message}")
    return replace(
        result,
        checks=checks,
        failures=failures,
        seconds=result.seconds + time.perf_counter() - t0,
        request_json="",
        plan_json="",
    )


class Progress:
    """A plain-text progress bar on a terminal; a line per tenth of the work elsewhere."""

    def __init__(self, total: int, stream: TextIO, width: int = 30) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.failed = 0
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self._last_tenth = -1

    def advance(self, result: CaseResult) -> None:
        """Count one finished case and redraw."""
        self.done += 1
        self.failed += not result.ok
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total}, {self.failed} failed  {result.name}"
        if self.tty:
            self.stream.write(f"\r\x1b[K{line[:120]}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            tenth = 10 * self.done // self.total
            if tenth != self._last_tenth:
                self._last_tenth = tenth
                self.stream.write(line + "\n")
        self.stream.flush()


def _run_cpu(
    cases: Sequence[Case], emulate: bool, keep_json: bool, jobs: int
) -> Iterator[CaseResult]:
    """Results in completion order."""
    if jobs <= 1 or len(cases) <= 1:
        for case in cases:
            yield check_case(case, emulate, keep_json)
        return
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(check_case, case, emulate, keep_json) for case in cases]
        for future in as_completed(futures):
            yield future.result()


def run_batch(
    cases: Sequence[Case],
    *,
    emulate: bool = False,
    gpu: Callable[[CaseResult], CaseResult] | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
) -> list[CaseResult]:
    """Check every case; the results come back in the order of ``cases``."""
    order = {case.name: k for k, case in enumerate(cases)}
    results: list[CaseResult] = []
    for result in _run_cpu(cases, emulate, gpu is not None, jobs):
        if gpu is not None:
            result = gpu(result)
        results.append(result)
        if progress is not None:
            progress.advance(result)
    return sorted(results, key=lambda r: order[r.name])


_COLUMNS = (
    ("request", "<"),
    ("buffers", ">"),
    ("status", "<"),
    ("arena", ">"),
    ("static", "<"),
    ("emulator", "<"),
    ("gpu", "<"),
    ("ms", ">"),
    ("result", "<"),
)


def format_table(results: Sequence[CaseResult]) -> str:
    """One line per case, then ``N passed, M failed``."""
    body = []
    for r in results:
        checks = dict(r.checks)
        body.append(
            [
                r.name,
                str(r.buffers),
                r.status,
                "-" if r.arena_bytes is None else str(r.arena_bytes),
                *(checks.get(v, "-") for v in VALIDATORS),
                f"{r.seconds * 1000:.1f}",
                "ok" if r.ok else r.failures[0][:100],
            ]
        )
    failed = sum(not r.ok for r in results)
    return f"{format_columns(_COLUMNS, body)}\n{len(results) - failed} passed, {failed} failed"


def format_json(results: Sequence[CaseResult]) -> str:
    """``{"cases": [...], "passed": N, "failed": M}``: what the table shows, per case."""
    cases = [
        {
            "name": r.name,
            "buffers": r.buffers,
            "status": r.status,
            "arena_bytes": r.arena_bytes,
            "checks": dict(r.checks),
            "failures": list(r.failures),
            "seconds": r.seconds,
            "planned": r.planned,
        }
        for r in results
    ]
    failed = sum(not r.ok for r in results)
    return json.dumps({"cases": cases, "passed": len(results) - failed, "failed": failed}, indent=2)


def junit_xml(results: Sequence[CaseResult], suite: str, seconds: float) -> bytes:
    """JUnit XML: one ``testcase`` per request, a ``failure`` for each failed one."""
    failed = sum(not r.ok for r in results)
    root = ET.Element("testsuites", tests=str(len(results)), failures=str(failed), errors="0")
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failed),
        errors="0",
        skipped="0",
        time=f"{seconds:.3f}",
    )
    for r in results:
        tc = ET.SubElement(ts, "testcase", classname=suite, name=r.name, time=f"{r.seconds:.3f}")
        if r.failures:
            kind = r.failures[0].split(":", 1)[0]
            failure = ET.SubElement(tc, "failure", message=r.failures[0], type=kind)
            failure.text = "\n".join(r.failures)
        else:
            checks = ", ".join(f"{v} {verdict}" for v, verdict in r.checks)
            out = ET.SubElement(tc, "system-out")
            out.text = f"{r.status}, arena {r.arena_bytes} B, {r.buffers} buffers; {checks}"
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True)) + b"\n"


# --- the command -----------------------------------------------------------------------


def command(args: argparse.Namespace) -> int:
    """Run ``planner batch``: 0 if every case passes, 1 if any fails, 2 for bad usage."""
    directory = Path(args.dir)
    if not directory.is_dir():
        return fail(f"{args.dir}: not a directory")
    try:
        cases = find_cases(directory)
    except OSError as exc:
        return fail(f"{args.dir}: cannot read: {exc.strerror or exc}")
    if args.junit and not Path(args.junit).resolve().parent.is_dir():
        return fail(f"--junit {args.junit}: no such directory")
    if not cases:
        return fail(f"{args.dir}: no request files (*.json, *.csv, *.mlir, *.ttgir)")
    gpu: Callable[[CaseResult], CaseResult] | None = None
    if args.gpu:
        from planner.validators.cuda import GpuOptions, gpu_available

        if not gpu_available():
            return fail(f"--gpu: CuPy or a CUDA device is missing; {install_hint('gpu')}")
        options = GpuOptions(trials=args.trials)
        gpu = functools.partial(gpu_check, options=options)
    t0 = time.perf_counter()
    results = run_batch(
        cases,
        emulate=args.emulate,
        gpu=gpu,
        jobs=args.jobs,
        progress=None if args.quiet else Progress(len(cases), sys.stderr),
    )
    seconds = time.perf_counter() - t0
    print(format_json(results) if args.json else format_table(results))
    print(f"{len(results)} requests in {seconds:.1f} s", file=sys.stderr)
    if args.junit:
        try:
            Path(args.junit).write_bytes(
                junit_xml(results, f"planner batch {directory.name}", seconds)
            )
        except OSError as exc:
            return fail(f"{args.junit}: cannot write: {exc.strerror or exc}")
    return 0 if all(r.ok for r in results) else 1
