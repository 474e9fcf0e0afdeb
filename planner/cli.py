"""The ``planner`` command: plan, sweep, symbolic, validate, convert, bench, serve, warm,
batch, selftest, and the bridges to compilers' IR (mlir, triton).

A command imports what it runs when it runs: the parser is built from light modules
(``planner.catalog``, ``planner.argtypes``), so ``planner plan`` loads none of the modules
that only another command needs (bench, batch, selftest, the emitters, the warm-up).

Exit codes: 0 planned (optimal or feasible) or valid; 1 infeasible, unknown or an invalid
plan; 2 bad input (a missing or malformed file, a bad request, a bad flag value), reported
as one line ``planner: error: <field>: <message>`` on stderr; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import planner
from planner import catalog
from planner.argtypes import at_least, positive_float, positive_int
from planner.bridges.commands import add_parsers as add_bridges
from planner.cli_errors import EXIT_BAD_INPUT, describe, describe_all, fail, nearest
from planner.core.csvio import csv_losses, load_request, with_overrides, write_csv
from planner.core.errors import InternalError, RequestError
from planner.core.install import DISTRIBUTION, available, install_hint
from planner.core.io import parse_plan
from planner.core.models import Plan, PlanRequest
from planner.core.models.request import Options
from planner.core.targets import STATIC_SMEM_LIMIT, TARGETS, profile_dicts
from planner.tables import format_columns
from planner.ticker import Ticker

if TYPE_CHECKING:
    from planner.bench import Instance, Runner

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1  # infeasible, unknown, or an invalid plan
EXIT_INTERRUPTED = 130


_OPTIONS = Options()  # the request options' defaults, shown in --help


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked (reading the
    distribution's metadata costs a few milliseconds every command would pay)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


class _UsageError(Exception):
    """A bad flag value or combination found after argparse; exits 2 with one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr like every other bad input, and a
    misspelt command or flag gets the nearest known one."""

    argv: ClassVar[list[str]] = []  # the arguments being parsed, for the suggestions

    def error(self, message: str) -> NoReturn:
        message = self._suggest(message)
        self.exit(EXIT_BAD_INPUT, f"planner: error: {message} (see '{self.prog} --help')\n")

    def _suggest(self, message: str) -> str:
        flags = _all_flags(self)
        if "invalid choice: " in message:  # a command, or a flag's value
            word = message.split("invalid choice: ", 1)[1].split(" ", 1)[0].strip("'")
            choices = [c for a in self._actions for c in (a.choices or ()) if isinstance(c, str)]
            guess = nearest(word, choices)
            return f"{message}; did you mean {guess!r}?" if guess else message
        unknown = [a.split("=", 1)[0] for a in _Parser.argv if a.startswith("--")]
        unknown = [a for a in unknown if a not in flags]
        if unknown and ("unrecognized arguments" in message or "required: COMMAND" in message):
            word = unknown[0]
            guess = nearest(word, flags)
            hint = f"; did you mean {guess!r}?" if guess else ""
            return f"unrecognized argument {word!r}{hint}"
        return message


def _all_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every long option of the parser and of its subcommands."""
    found: set[str] = set()
    for action in parser._actions:
        found |= {o for o in action.option_strings if o.startswith("--")}
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _all_flags(sub)
    return found


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in [0, 65535], got {value}")
    return value


def _overlap(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def build_parser() -> _Parser:
    parser = _Parser(
        prog="planner",
        description="Plan the shared-memory offsets of a GPU kernel's temporary buffers.",
        epilog="Exit codes: 0 planned or valid; 1 infeasible, unknown or invalid; 2 bad input.",
    )
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_plan(sub)
    _add_sweep(sub)
    _add_symbolic(sub)
    _add_validate(sub)
    _add_convert(sub)
    _add_schema(sub)
    _add_warm(sub)
    _add_serve(sub)
    _add_bench(sub)
    _add_targets(sub)
    _add_batch(sub)
    _add_selftest(sub)
    _add_generate(sub)
    add_bridges(sub)
    return parser


def _add_plan(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner plan``: plan a request."""
    p = sub.add_parser("plan", help="plan a request (JSON or MiniMalloc CSV)")
    p.add_argument("request", metavar="REQUEST", help="request .json or .csv file; - for stdin")
    _add_capacity(p)
    p.add_argument(
        "--target",
        choices=sorted(TARGETS),
        help="device profile; its shared memory is the capacity unless one is given "
        "(default: the request's)",
    )
    p.add_argument(
        "--solver",
        metavar="NAME",
        help=f"auto, greedy, exact, or one heuristic (default: the request's, else "
        f"{_OPTIONS.solver})",
    )
    p.add_argument(
        "--sync",
        choices=["existing", "insert", "none"],
        help=f"sync policy (default: the request's, else {_OPTIONS.sync})",
    )
    p.add_argument(
        "--time-limit",
        type=positive_float,
        metavar="S",
        help=f"seconds (default: the request's, else {_OPTIONS.time_limit:g})",
    )
    p.add_argument(
        "--param",
        action="append",
        metavar="NAME=V",
        help="bind a parameter of a request with params (repeatable; others take their defaults)",
    )
    p.add_argument("-o", "--output", metavar="OUT", help="write the plan here (default stdout)")
    p.add_argument(
        "--emit",
        choices=["json", "cuda", "mlir"],
        default="json",
        help="what to print: the plan as JSON (default), a CUDA C++ snippet, or MLIR",
    )
    p.add_argument("--svg", metavar="FILE", help="also write the memory map as SVG here")
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no summary line on stderr (errors only)"
    )


def _add_sweep(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner sweep``: sweep configurations and targets."""
    w = sub.add_parser(
        "sweep",
        help="answer a request with params for many configurations and targets",
        description="Answer a request with parameters for each configuration on each target: "
        "fits or not, the arena, the lower bound and the occupancy (docs/sweeps.md).",
        epilog="Example: planner sweep matmul.json --product BLOCK_M=64,128 --target sm_80 "
        "--target sm_90. Exit 0 when some configuration fits some target, else 1.",
    )
    w.add_argument("request", metavar="REQUEST", help="request .json with params; - for stdin")
    w.add_argument(
        "--config",
        action="append",
        metavar="NAME=V,...",
        help="one configuration, e.g. BLOCK_M=128,STAGES=3 (repeatable; missing names take "
        "their defaults)",
    )
    w.add_argument(
        "--configs", metavar="FILE", help="a JSON list of configurations ({name: value})"
    )
    w.add_argument(
        "--product",
        action="append",
        metavar="NAME=V1,V2,...",
        help="values of one parameter to sweep (repeatable; others: every declared value)",
    )
    w.add_argument(
        "--target",
        action="append",
        choices=sorted(TARGETS),
        help="device profile to answer for (repeatable; default: the request's)",
    )
    w.add_argument(
        "--plans",
        choices=["none", "fitting", "all"],
        default="none",
        help="which answers carry their full plan (JSON output; default none)",
    )
    w.add_argument(
        "--refine",
        choices=["none", "gap", "all"],
        default="gap",
        help="replan by the full planner: configurations whose bound fits and plan does not "
        "(gap, default), all, or none",
    )
    w.add_argument("--json", action="store_true", help="print the answers as JSON, not a table")
    w.add_argument("-o", "--output", metavar="OUT", help="write the answers here (default stdout)")


def _add_symbolic(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner symbolic``: plans valid over parameter ranges."""
    y = sub.add_parser(
        "symbolic",
        help="offsets valid over the ranges of a request's params, as expressions",
        description="Plan a request with parameters once for every value in their ranges: "
        "offsets as expressions, checked by the static validator at every corner and at "
        "sampled points (docs/design.md, Symbolic plans).",
    )
    y.add_argument("request", metavar="REQUEST", help="request .json with params; - for stdin")
    y.add_argument(
        "--emit",
        choices=["json", "cuda", "mlir"],
        default="json",
        help="the plan as JSON (default), a CUDA function of the parameters, or MLIR",
    )
    y.add_argument(
        "--check",
        type=at_least(0),
        default=16,
        metavar="N",
        help="random points checked besides the corners (default 16)",
    )
    y.add_argument("-o", "--output", metavar="OUT", help="write it here (default stdout)")


def _add_validate(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner validate``: check a plan."""
    v = sub.add_parser("validate", help="check a plan against its request")
    v.add_argument("request", metavar="REQUEST", help="request .json or .csv file")
    v.add_argument("plan", metavar="PLAN", help="plan .json file")
    v.add_argument(
        "--emulate",
        action="store_true",
        help="also run the plan's kernel program on the CPU emulator (races, clobbers)",
    )
    v.add_argument(
        "--max-blocks",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --emulate: distinct blocks to emulate at most (default 16)",
    )


def _add_convert(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner convert``: between MiniMalloc CSV and JSON."""
    c = sub.add_parser("convert", help="MiniMalloc CSV to JSON request, or JSON to CSV")
    c.add_argument("input", metavar="IN", help=".csv or .json; - for stdin")
    c.add_argument("output", metavar="OUT", help=".csv or .json; - for stdout (as JSON)")
    c.add_argument("--plan", metavar="PLAN", help="plan .json whose offsets fill the CSV")
    _add_capacity(c)


def _add_schema(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner schema``: JSON Schemas."""
    sc = sub.add_parser(
        "schema",
        help="print the JSON Schema of a request or a plan",
        epilog="example: planner schema plan > plan.schema.json",
    )
    sc.add_argument(
        "which", nargs="?", choices=["request", "plan"], default="request", help="default request"
    )


def _add_warm(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner warm``: compile ahead of requests."""
    sub.add_parser(
        "warm",
        help="compile and load every kernel and solver this installation has, ahead of the "
        "first request (image builds, make serve)",
    )


def _add_serve(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner serve``: the HTTP service."""
    s = sub.add_parser(
        "serve",
        help="start the HTTP service",
        description="Serve POST /plan, POST /validate, /healthz, /metrics and /docs; settings "
        "come from PLANNER_* variables (docs/service.md).",
        epilog="example: planner serve --port 8080, then curl -X POST localhost:8080/plan "
        "-H 'content-type: application/json' --data @kernel.json",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=_port, default=8000, help="default 8000")
    s.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        help="event loop (default: PLANNER_LOOP, else auto: uvloop when installed)",
    )


def _add_bench(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner bench``: benchmark suites."""
    b = sub.add_parser("bench", help="plan a suite and tabulate arena, bound and time")
    b.add_argument("paths", nargs="*", metavar="PATH", help=".csv/.json files or directories")
    _add_capacity(b)
    b.add_argument(
        "--solver",
        metavar="NAME",
        action="append",
        help="auto, greedy, exact, search, cpsat, or one heuristic; repeat it to compare "
        "solvers side by side",
    )
    b.add_argument("--time-limit", type=positive_float, metavar="S", help="seconds")
    _add_bench_generated(b)
    _add_bench_runs(b)


def _add_bench_generated(b: argparse.ArgumentParser) -> None:
    """``planner bench``'s generated instances: random ones and families."""
    b.add_argument(
        "--random",
        type=positive_int,
        nargs="+",
        action="extend",
        default=[],
        metavar="N",
        help="also plan a synthetic instance of N buffers",
    )
    b.add_argument(
        "--overlap", type=_overlap, default=0.01, help="fraction of buffers each one overlaps"
    )
    b.add_argument(
        "--seed", type=int, default=0, help="seed of the generated instances (default 0)"
    )
    b.add_argument(
        "--family",
        choices=catalog.FAMILIES,
        action="append",
        default=[],
        help="also plan generated instances of this family (tilings: the optimum is known)",
    )
    b.add_argument(
        "--count", type=positive_int, default=10, metavar="N", help="instances per --family"
    )
    b.add_argument(
        "--buffers",
        type=_buffer_range,
        default=(150, 450),
        metavar="N[-M]",
        help="buffers per --family instance, or a range to draw from (default 150-450)",
    )


def _add_bench_runs(b: argparse.ArgumentParser) -> None:
    """``planner bench``'s runs and output: repeats, OmniMalloc beside, JSON, scaling cases."""
    b.add_argument(
        "--repeat",
        type=positive_int,
        metavar="K",
        help=f"runs per instance, best time kept (default {catalog.FILE_REPEAT} for files, "
        f"{catalog.RANDOM_REPEAT} for random)",
    )
    b.add_argument(
        "--omnimalloc",
        metavar="ALLOCATOR",
        action="append",
        default=[],
        help="also run this OmniMalloc allocator (e.g. supermalloc) side by side; "
        "NAME:THREADS gives it that many search threads (default 6, e.g. supermalloc:2); "
        "needs the compare extra",
    )
    b.add_argument("--json", action="store_true", help="print the rows as JSON")
    b.add_argument(
        "--scaling",
        choices=catalog.SCALING_KINDS,
        action="append",
        default=[],
        help="instead, plan this generated workload at each --sizes, each in a fresh process, "
        "and print time, peak memory and their fitted growth exponents",
    )
    b.add_argument(
        "--sizes",
        type=positive_int,
        nargs="+",
        default=list(catalog.SCALING_SIZES),
        metavar="N",
        help="buffers per --scaling case (default 10000 100000 1000000)",
    )


def _add_targets(sub: argparse._SubParsersAction[Any]) -> None:
    """``planner targets``: the device table."""
    t = sub.add_parser("targets", help="list the device profiles")
    t.add_argument("--json", action="store_true", help="print the profiles as JSON")


def _add_generate(sub: argparse._SubParsersAction[Any]) -> None:
    g = sub.add_parser(
        "generate",
        help="write requests to try the planner on (random, kernels, loops, families)",
        description="Write generated requests as JSON: one to stdout, or --count files in -o DIR.",
        epilog="examples:\n  planner generate program --buffers 24 | planner plan -\n"
        "  planner generate family --family pinwheel --buffers 40 --count 10 -o corpus/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument(
        "kind",
        choices=["random", "kernel", "program", "family"],
        help="random: lifetimes and sizes at random (plain DSA); kernel: 16 to --buffers "
        "buffers of mixed alignments; program: loops, a branch and two-range buffers; "
        "family: a benchmark family (--family) with a known optimum",
    )
    g.add_argument("--buffers", type=positive_int, default=32, metavar="N", help="default 32")
    g.add_argument("--seed", type=int, default=0, help="the first request's seed (default 0)")
    g.add_argument(
        "--count", type=positive_int, default=1, metavar="N", help="requests (seeds) to write"
    )
    g.add_argument("--overlap", type=_overlap, default=0.1, help="random: default 0.1")
    g.add_argument("--sync", choices=["existing", "insert", "none"], help="program: policy")
    g.add_argument("--family", choices=catalog.FAMILIES, help="family: which one")
    g.add_argument("-o", "--output", metavar="OUT", help="file, or directory with --count")


def _add_batch(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("batch", help="plan and validate every request in a directory (CI)")
    p.add_argument(
        "dir",
        metavar="DIR",
        help="*.json / *.csv requests (NAME.plan.json beside NAME.json is taken as its plan); "
        "*.mlir modules and *.ttgir Triton kernels go through the bridges",
    )
    p.add_argument("--emulate", action="store_true", help="also run the CPU emulator")
    p.add_argument("--gpu", action="store_true", help="also run the CUDA harness (CuPy)")
    p.add_argument(
        "--trials", type=positive_int, default=4, metavar="N", help="GPU launches per plan"
    )
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    p.add_argument("--json", action="store_true", help="print the cases as JSON, not a table")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N", help="worker processes")
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines, only the table and the summary (for CI logs)",
    )


def _add_selftest(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("selftest", help="plant faults in correct plans; are they all caught?")
    p.add_argument("--gpu", action="store_true", help="also judge with the CUDA harness (CuPy)")
    p.add_argument(
        "--random",
        type=at_least(0),
        default=24,
        metavar="N",
        help="random requests besides the examples (default 24)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random requests and faults")
    p.add_argument(
        "--trials",
        type=positive_int,
        default=4,
        metavar="N",
        help="GPU launches per plan",
    )


def _add_capacity(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--capacity", type=positive_int, metavar="N", help="bytes; replaces the request's"
    )


def _label(path: str) -> str:
    return "stdin" if path == "-" else path


def _write(path: str | None, text: str) -> None:
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _UsageError(f"{path}: cannot write: {exc.strerror or exc}") from None


def _write_file(path: str, text: str) -> None:
    if path == "-":
        raise _UsageError("--svg: give a file name, not -")
    _write(path, text)


def _read_plan(path: str) -> Plan:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise _UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _UsageError(f"{path}: cannot read: {exc}") from None
    try:
        return parse_plan(text)
    except RequestError as exc:
        raise _UsageError(*describe_all(exc, path, root=Plan)) from None


def _barrier_summary(plan: Plan) -> str:
    """The barriers the plan adds (or asks the caller for, under sync "none"): points, and
    executions per block where loops repeat them."""
    b = plan.barriers
    added, verb = (
        (b.inserted, "added") if b.inserted or not b.required else (b.required, "required")
    )
    if verb == "required" and set(b.required) <= set(b.existing):
        added, verb = [], "added"
    runs = b.required_executions if verb == "required" else None
    if verb == "added" and b.executions is not None and b.inserted:
        runs = b.executions
    text = f"{len(added)} barrier{'s' if len(added) != 1 else ''} {verb}"
    return text + (f" ({runs} executions)" if runs is not None and added else "")


def _summary(plan: Plan, seconds: float) -> str:
    line = (
        f"{plan.name}: {plan.status}, arena {plan.arena_bytes} B, "
        f"lower bound {plan.lower_bound} B, gap {plan.solver.gap * 100:.2f} %, "
        f"{_barrier_summary(plan)}, winner {plan.solver.name}, {seconds * 1000:.1f} ms"
    )
    cert = plan.certificate
    if plan.status == "unknown" and plan.capacity is not None:
        over = plan.arena_bytes - plan.capacity
        line += f"; best plan is {over} B over capacity {plan.capacity} B"
    if cert is not None:
        at = f" at point {cert.point}" if cert.point is not None else ""
        line += f"; {cert.live_bytes} B live{at} > capacity {cert.capacity} B"
    return line


def _cmd_plan(args: argparse.Namespace) -> int:
    source = _label(args.request)
    try:
        if args.param:
            request = _bound(args.request, args.param, source)
            if args.capacity is not None:
                request = with_overrides(request, capacity=args.capacity)
        else:
            request = load_request(args.request, capacity=args.capacity)
        request = with_overrides(
            request,
            solver=args.solver,
            sync=args.sync,
            time_limit=args.time_limit,
            target=args.target,
        )
        t0 = time.perf_counter()
        label = f"planning {request.name or source} ({len(request.buffers)} buffers)"
        ticker = Ticker(sys.stderr, label, request.options.time_limit)
        with contextlib.nullcontext() if args.quiet else ticker:
            plan = planner.plan(request)
        seconds = time.perf_counter() - t0
    except RequestError as exc:
        return fail(describe_all(exc, source, root=PlanRequest))
    if args.svg is not None:
        from planner.emit import emit_svg

        _write_file(args.svg, emit_svg(request, plan))
    if args.emit == "json":
        _write(args.output, plan.model_dump_json(indent=2) + "\n")
    else:
        from planner.emit import EMITTERS

        _write(args.output, EMITTERS[args.emit](request, plan))
    if not args.quiet:
        print(_summary(plan, seconds), file=sys.stderr)
    return EXIT_OK if plan.status in ("optimal", "feasible") else EXIT_FAILED


def _assignments(text: str, flag: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    current = ""
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if eq:
            out.setdefault(name.strip(), [])
            current = name.strip()
        elif out:
            value = name  # another value of the previous name (--product N=1,2)
        else:
            raise _UsageError(f"{flag} {text!r}: expected NAME=VALUE")
        try:
            out[current].append(int(value))
        except ValueError:
            raise _UsageError(f"{flag} {text!r}: {value.strip()!r} is not an integer") from None
    return out


def _cmd_sweep(args: argparse.Namespace) -> int:
    from planner.sweeps import sweep

    source = _label(args.request)
    configs: list[dict[str, int]] | None = None
    if args.config:
        configs = []
        for text in args.config:
            values = _assignments(text, "--config")
            if any(len(v) != 1 for v in values.values()):
                raise _UsageError(f"--config {text!r}: one value per name (use --product)")
            configs.append({k: v[0] for k, v in values.items()})
    if args.configs is not None:
        try:
            listed = json.loads(Path(args.configs).read_text())
        except (OSError, ValueError) as exc:
            raise _UsageError(f"--configs {args.configs}: {exc}") from None
        if not isinstance(listed, list):
            raise _UsageError(f"--configs {args.configs}: expected a JSON list of objects")
        configs = [*(configs or []), *listed]
    product: dict[str, list[int]] | None = None
    for text in args.product or ():
        product = {**(product or {}), **_assignments(text, "--product")}
    try:
        text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text()
    except OSError as exc:
        raise _UsageError(f"{source}: {exc.strerror or exc}") from None
    try:
        result = sweep(
            text,
            configs,
            product=product,
            targets=args.target,
            plans=args.plans,
            refine=args.refine,
        )
    except RequestError as exc:
        return fail(describe(exc, source))
    if args.json:
        _write(args.output, result.model_dump_json(indent=2, exclude_none=True) + "\n")
    else:
        _write(args.output, _sweep_table(result) + "\n")
    return EXIT_OK if any(result.fitting) else EXIT_FAILED


def _sweep_table(result: Any) -> str:
    columns = [(name, ">") for name in result.params]
    columns += [("arena", ">"), ("bound", ">")]
    columns += [(str(t or "capacity"), "<") for t in result.targets]
    rows = []
    for a in result.answers:
        cells = [str(a.config[n]) for n in result.params]
        if a.error is not None:
            rows.append([*cells, "-", "-", *(["invalid"] * len(result.targets))])
            continue
        cells += [str(a.arena_bytes), str(a.lower_bound)]
        for f in a.targets:
            occupancy = f" x{f.blocks_per_sm}" if f.fits and f.blocks_per_sm is not None else ""
            cells.append(f"{f.verdict}{occupancy}")
        rows.append(cells)
    return format_columns(columns, rows)


def _cmd_symbolic(args: argparse.Namespace) -> int:
    from planner.core.params import parse_template
    from planner.emit.symbolic import emit_symbolic_cuda, emit_symbolic_mlir
    from planner.symbolic import check_symbolic, sample_points, symbolic_plan

    source = _label(args.request)
    try:
        text = sys.stdin.read() if args.request == "-" else Path(args.request).read_text()
    except OSError as exc:
        raise _UsageError(f"{source}: {exc.strerror or exc}") from None
    try:
        plan = symbolic_plan(text)
        points = sample_points(parse_template(text), args.check)
    except RequestError as exc:
        return fail(describe(exc, source))
    check_symbolic(text, plan, points)
    if args.emit == "cuda":
        _write(args.output, emit_symbolic_cuda(plan))
    elif args.emit == "mlir":
        _write(args.output, emit_symbolic_mlir(plan))
    else:
        _write(args.output, plan.model_dump_json(indent=2) + "\n")
    upper = plan.corners[-1] if plan.corners else None
    if upper is not None:
        print(
            f"{source}: symbolic plan valid at {len(points)} points; arena {plan.arena}; "
            f"{upper.arena_bytes} B at the upper corner (lower bound {upper.lower_bound} B)",
            file=sys.stderr,
        )
    return EXIT_OK


def _bound(path: str, params: list[str], source: str) -> PlanRequest:
    """The request in ``path`` (JSON with params) bound at ``--param`` values."""
    from planner.core.params import parse_template

    config: dict[str, int] = {}
    for text in params:
        for name, values in _assignments(text, "--param").items():
            if len(values) != 1:
                raise _UsageError(f"--param {text!r}: one value per name")
            config[name] = values[0]
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise _UsageError(f"{source}: {exc.strerror or exc}") from None
    template = parse_template(text)
    return template.bind(config)


def _cmd_validate(args: argparse.Namespace) -> int:
    if args.request == "-" and args.plan == "-":
        raise _UsageError("REQUEST and PLAN cannot both be read from stdin")
    if args.max_blocks is not None and not args.emulate:
        raise _UsageError("--max-blocks needs --emulate")
    try:
        request = load_request(args.request)
    except RequestError as exc:
        return fail(describe_all(exc, _label(args.request), root=PlanRequest))
    plan = _read_plan(args.plan)
    report = planner.validate(request, plan)
    violations = list(report.violations)
    truncated = report.truncated
    emulated = ""
    if args.emulate:
        from planner.validators.emulator import DEFAULT_MAX_BLOCKS, emulate

        run = emulate(request, plan, max_blocks=args.max_blocks or DEFAULT_MAX_BLOCKS)
        violations += run.violations
        truncated = truncated or run.truncated
        for note in run.notes:
            print(f"note: {note}")
        blocks = f"{len(run.blocks)} block{'s' if len(run.blocks) != 1 else ''}"
        emulated = (
            f"; emulated {blocks} of {run.threads} threads, {run.byte_accesses} byte accesses"
        )
    for v in violations:
        where = f" at point {v.point}" if v.point is not None else ""
        print(f"{v.code}{where}: {v.message}")
    if not violations and not truncated:
        print(
            f"valid: {len(plan.placements)} placements of {request.name!r}, "
            f"arena {plan.arena_bytes} B{emulated}"
        )
        return EXIT_OK
    more = " (list truncated)" if truncated else ""
    n = len(violations)
    print(f"invalid: {n} violation{'s' if n != 1 else ''}{more}")
    return EXIT_FAILED


def _kind(path: str, role: str) -> str:
    if path == "-":
        return "json"
    suffix = Path(path).suffix.lower()
    if suffix not in (".csv", ".json"):
        raise _UsageError(f"{role} {path}: cannot tell the format; name it .csv or .json")
    return suffix[1:]


def _cmd_convert(args: argparse.Namespace) -> int:
    _kind(args.input, "IN")
    out_kind = _kind(args.output, "OUT")
    if args.plan is not None and out_kind != "csv":
        raise _UsageError("--plan: offsets go into a CSV; name OUT .csv")
    try:
        request = load_request(args.input, capacity=args.capacity)
    except RequestError as exc:
        return fail(describe_all(exc, _label(args.input), root=PlanRequest))
    if out_kind == "json":
        _write(args.output, request.model_dump_json(indent=2, exclude_defaults=True) + "\n")
        return EXIT_OK
    plan = _read_plan(args.plan) if args.plan is not None else None
    try:
        text = write_csv(request, plan)
    except RequestError as exc:
        return fail(describe_all(exc, args.plan, root=Plan))
    losses = csv_losses(request)
    if losses:
        print(f"planner: warning: the CSV drops {', '.join(losses)}", file=sys.stderr)
    _write(args.output, text)
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        api = importlib.import_module("planner.api")
    except ModuleNotFoundError as exc:
        missing = exc.name or "a dependency"
        return fail(f"serve: {missing} is not installed; {install_hint('server')}")
    serve = getattr(api, "serve", None)
    if serve is None:
        return fail("serve: this installation's api package has no serve()")
    taken = _port_taken(args.host, args.port)
    if taken is not None:
        return fail(f"serve: cannot listen on {taken}; give another --port or stop what uses it")
    try:
        if args.loop is None:
            serve(args.host, args.port)  # the environment's loop (PLANNER_LOOP), else auto
        else:
            serve(args.host, args.port, loop=args.loop)
    except SystemExit as exc:  # the server could not start (uvicorn exits 3)
        if exc.code in (None, 0):
            return EXIT_OK
        print(f"planner: serve: the server stopped on start-up (code {exc.code})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _port_taken(host: str | None, port: int | None) -> str | None:
    """``HOST:PORT (why)`` when nothing can listen there now, else None (the server's own
    settings are used for what is not given)."""
    import socket

    from planner.api.settings import environment_settings

    settings = environment_settings()
    host = host if host is not None else settings.host
    port = port if port is not None else settings.port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"{host}:{port} ({exc.strerror or exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return f"{host}:{port} ({exc.strerror or exc})"
    return None


def _buffer_range(text: str) -> tuple[int, int]:
    """``N`` or ``N-M``: buffers per generated instance, within the families' limits."""
    lo_text, _, hi_text = text.partition("-")
    try:
        lo, hi = int(lo_text), int(hi_text or lo_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N-M, got {text!r}") from None
    least, most = catalog.MIN_BUFFERS, catalog.MODEL_MAX_BUFFERS
    if not least <= lo <= hi <= most:
        raise argparse.ArgumentTypeError(f"expected {least} <= N <= M <= {most}, got {text!r}")
    return lo, hi


def _cmd_schema(args: argparse.Namespace) -> int:
    model = PlanRequest if args.which == "request" else Plan
    _write(None, json.dumps(model.model_json_schema(), indent=2) + "\n")
    return EXIT_OK


def _cmd_warm(args: argparse.Namespace) -> int:
    from planner.core._jit import warming
    from planner.pipeline.warm import ensure_warm, warm_up_requests

    t0 = time.perf_counter()
    warming()
    requests = warm_up_requests()
    ensure_warm(planner.plan)
    others = sorted({str(r["options"]["solver"]) for r in requests} - {"greedy"})
    solvers = ", ".join(["greedy", *others])
    missing = "" if available("exact") else f"; CP-SAT is not installed ({install_hint('exact')})"
    print(
        f"planner: warm: compiled and loaded {solvers} in "
        f"{time.perf_counter() - t0:.1f} s{missing}",
        file=sys.stderr,
    )
    return EXIT_OK


def _cmd_bench(args: argparse.Namespace) -> int:
    from planner import bench as bench_mod

    if args.scaling:
        return _bench_scaling(args)
    if not args.paths and not args.random and not args.family:
        raise _UsageError("bench: give at least one PATH, --random N or --family NAME")
    solvers: list[str | None] = list(args.solver) if args.solver else [None]
    groups = [(solver or "default", _bench_instances(args, solver)) for solver in solvers]
    runners: dict[str, Runner] = {}
    for label, runner in _omnimalloc_runners(args):
        groups.append((label, groups[0][1]))
        runners[label] = runner
    try:
        if len(groups) == 1:
            return bench_mod.bench(groups[0][1], as_json=args.json)
        return bench_mod.compare(groups, as_json=args.json, runners=runners)
    except RequestError as exc:  # e.g. an unknown --solver, found when planning
        return fail(describe(exc, None))


def _bench_scaling(args: argparse.Namespace) -> int:
    """``bench --scaling``: the first solver given on growing instances."""
    from planner.scaling import scaling

    solver = args.solver[0] if args.solver else None
    return scaling(
        args.scaling,
        args.sizes,
        solver=solver,
        time_limit=args.time_limit,
        repeat=args.repeat or 1,
    )


def _bench_instances(args: argparse.Namespace, solver: str | None) -> list[Instance]:
    """The instances ``bench`` runs with ``solver``: its PATHs, ``--random`` sizes and
    ``--family`` members, in that order; a bad one raises ``_UsageError`` naming it."""
    from planner import bench as bench_mod

    instances: list[Instance] = []
    for path in bench_mod.expand_paths(args.paths):
        try:
            instances.append(
                bench_mod.load_instance(
                    path,
                    capacity=args.capacity,
                    solver=solver,
                    time_limit=args.time_limit,
                    repeat=args.repeat,
                )
            )
        except RequestError as exc:
            lines = describe_all(exc, _label(path), always=True, root=PlanRequest)
            raise _UsageError(*lines) from None
    for n in args.random:
        try:
            instances.append(
                bench_mod.random_instance(
                    n,
                    overlap=args.overlap,
                    seed=args.seed,
                    capacity=args.capacity,
                    solver=solver,
                    time_limit=args.time_limit,
                    repeat=args.repeat,
                )
            )
        except RequestError as exc:
            raise _UsageError(describe(exc, f"random-{n}")) from None
    for family in args.family:
        try:
            instances += bench_mod.family_instances(
                family,
                count=args.count,
                buffers=args.buffers,
                seed=args.seed,
                solver=solver,
                time_limit=args.time_limit,
                repeat=args.repeat,
            )
        except RequestError as exc:
            raise _UsageError(describe(exc, family)) from None
        except ValueError as exc:  # buffers past the family's limit
            raise _UsageError(f"bench: --family {family}: {exc}") from None
    return instances


def _omnimalloc_runners(args: argparse.Namespace) -> list[tuple[str, Runner]]:
    """Per ``--omnimalloc NAME[:THREADS]``, its label and the runner that plans with that
    allocator; a missing package or a bad value raises ``_UsageError``."""
    if not args.omnimalloc:
        return []
    from planner import bench_omnimalloc as omni

    module = omni.load()
    if module is None:
        raise _UsageError(
            "bench: --omnimalloc needs the omnimalloc package: " + install_hint("compare")
        )
    known = omni.allocator_names(module)
    runners: list[tuple[str, Runner]] = []
    for given in args.omnimalloc:
        name, _, count = given.partition(":")
        if name not in known:
            raise _UsageError(
                f"bench: --omnimalloc: unknown allocator {name!r}; one of {', '.join(known)}"
            )
        if count and not (count.isdigit() and 0 < int(count) <= omni.MAX_THREADS):
            raise _UsageError(
                f"bench: --omnimalloc {given}: threads must be 1 to {omni.MAX_THREADS}, "
                f"got {count!r}"
            )
        threads = int(count) if count else omni.THREADS
        label = f"omnimalloc:{name}" + (f":{threads}" if count else "")
        runners.append(
            (label, functools.partial(omni.run_allocator, module, name, threads=threads))
        )
    return runners


_TARGET_COLUMNS = (  # (heading, alignment, profile field): text left, byte counts right
    ("target", "<", "name"),
    ("devices", "<", "devices"),
    ("max smem/block", ">", "max_smem_per_block"),
    ("smem/SM", ">", "smem_per_sm"),
    ("reserved/block", ">", "reserved_per_block"),
    ("max blocks/SM", ">", "max_blocks_per_sm"),
    ("base align", ">", "base_alignment"),
    ("TMA", "<", "tma"),
)


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _cmd_targets(args: argparse.Namespace) -> int:
    rows = profile_dicts()
    if args.json:
        _write(None, json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    columns = [(heading, align) for heading, align, _ in _TARGET_COLUMNS]
    table = [[_cell(row[key]) for _, _, key in _TARGET_COLUMNS] for row in rows]
    note = (
        f"bytes; static shared memory stops at {STATIC_SMEM_LIMIT}, above it a kernel needs "
        "the opt-in"
    )
    _write(None, f"{format_columns(columns, table)}\n{note}\n")
    return EXIT_OK


def _cmd_batch(args: argparse.Namespace) -> int:
    from planner.batch import command

    return command(args)


def _cmd_selftest(args: argparse.Namespace) -> int:
    from planner.selftest import command

    return command(args)


def _cmd_mlir(args: argparse.Namespace) -> int:
    from planner.bridges.commands import mlir_command

    return mlir_command(args)


def _cmd_triton(args: argparse.Namespace) -> int:
    from planner.bridges.commands import triton_command

    return triton_command(args)


def _cmd_generate(args: argparse.Namespace) -> int:
    from planner.generate_cli import command

    return command(args)


_COMMANDS = {
    "plan": _cmd_plan,
    "validate": _cmd_validate,
    "convert": _cmd_convert,
    "serve": _cmd_serve,
    "warm": _cmd_warm,
    "schema": _cmd_schema,
    "bench": _cmd_bench,
    "targets": _cmd_targets,
    "batch": _cmd_batch,
    "selftest": _cmd_selftest,
    "generate": _cmd_generate,
    "mlir": _cmd_mlir,
    "triton": _cmd_triton,
    "sweep": _cmd_sweep,
    "symbolic": _cmd_symbolic,
}


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    try:
        try:
            _Parser.argv = list(sys.argv[1:] if argv is None else argv)
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help, or a usage error already reported
            if exc.code is None or isinstance(exc.code, int):
                return exc.code or EXIT_OK
            return EXIT_BAD_INPUT
        return _COMMANDS[args.command](args)
    except _UsageError as exc:
        return fail([str(line) for line in exc.args])
    except InternalError as exc:
        print(f"planner: internal error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MemoryError:
        print("planner: error: out of memory", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (| head): say nothing, like other Unix tools, and keep the
        # interpreter's final flush of stdout from failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
