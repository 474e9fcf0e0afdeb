"""``planner bench``: plan a suite of instances, check each plan, and tabulate the results.

For every instance: buffers, lower bound, the solver's best bound, arena, gap, status, winning
method, the time to the first plan within capacity, the time to the proof of optimality and
the best wall time over several runs, each plan checked by the static validator. The
process's peak memory closes the report; a plan holds no timings, so this is where they are
kept.
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

import planner
from planner.catalog import FILE_REPEAT, RANDOM_REPEAT, is_request_file
from planner.core.csvio import load_request, with_overrides
from planner.core.errors import RequestError
from planner.core.models import DEFAULT_MAX_BUFFERS, Options, PlanRequest
from planner.families import family_suite
from planner.generate import random_request
from planner.pipeline.warm import ensure_warm
from planner.solvers.auto import listening
from planner.tables import format_columns, format_row

__all__ = [
    "BenchRow",
    "Instance",
    "Runner",
    "bench",
    "compare",
    "expand_paths",
    "family_instances",
    "format_groups",
    "format_json",
    "format_table",
    "load_instance",
    "peak_memory_bytes",
    "random_instance",
    "run_instance",
    "summary",
]


@dataclass(frozen=True)
class Instance:
    """One request to plan, its name in the table and how often to time it."""

    name: str
    request: PlanRequest
    repeat: int
    optimum: int | None = None  # bytes, when known by construction (generated families)


@dataclass(frozen=True)
class BenchRow:
    """One line of the table."""

    instance: str
    buffers: int
    lower_bound: int  # bytes
    arena_bytes: int
    gap: float  # (arena - lower bound) / lower bound
    status: str
    winner: str  # the method that produced the plan, e.g. "greedy:size/best-fit"
    time_ms: float  # best wall time of planner.plan over the runs
    valid: bool  # planner.validate accepts the plan
    violations: int
    proved: bool = False  # the plan is proved optimal
    bound: int = 0  # bytes: the best bound the solver reached (no plan uses fewer)
    first_ms: float | None = None  # until the first plan within capacity (None: none)
    proof_ms: float | None = None  # until optimality was proved (None: not proved)
    optimum: int | None = None  # bytes, when known by construction

    @property
    def at_optimum(self) -> bool | None:
        """Whether a valid plan meets the known optimum (None: the optimum is unknown)."""
        if self.optimum is None:
            return None
        return self.valid and self.arena_bytes <= self.optimum

    @property
    def ok(self) -> bool:
        """Planned within capacity and checked."""
        return self.valid and self.status in ("optimal", "feasible")


Runner = Callable[[Instance], BenchRow]  # plans one instance into one row


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files as given; a directory stands for its ``*.csv`` and ``*.json`` files, sorted.
    Plans and expectations beside a request (``NAME.plan.json``, ``NAME.expect.json``) are
    left out either way (a shell's ``*.json`` names them too)."""
    out: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_dir():
            out.extend(str(f) for f in sorted(p.iterdir()) if is_request_file(f.name))
        elif path == "-" or is_request_file(p.name) or not p.name.lower().endswith(".json"):
            out.append(path)
    return out


def load_instance(
    path: str,
    *,
    capacity: int | None = None,
    solver: str | None = None,
    time_limit: float | None = None,
    repeat: int | None = None,
) -> Instance:
    """A JSON or CSV file as an instance, with the overrides applied; raises FormatError or
    RequestError for a bad file."""
    request = load_request(path, capacity=capacity)
    request = with_overrides(request, solver=solver, time_limit=time_limit)
    name = "stdin" if path == "-" else Path(path).name
    return Instance(name, request, repeat or FILE_REPEAT)


def random_instance(
    n: int,
    *,
    overlap: float = 0.01,
    seed: int = 0,
    capacity: int | None = None,
    solver: str | None = None,
    time_limit: float | None = None,
    repeat: int | None = None,
) -> Instance:
    """A synthetic instance of ``n`` buffers (plain DSA, ``sync = "none"``)."""
    request = random_request(n, overlap=overlap, seed=seed, capacity=capacity)
    update = {k: v for k, v in (("solver", solver), ("time_limit", time_limit)) if v is not None}
    if update:
        # Only the options are checked again: the generated buffers are valid already.
        try:
            options = Options.model_validate({**request.options.model_dump(), **update})
        except ValidationError as exc:
            raise RequestError.from_validation(exc, ("options",)) from None
        request = request.model_copy(update={"options": options})
    return Instance(f"random-{n}", request, repeat or RANDOM_REPEAT)


def _recorder(seen: list[tuple[float, int, int]]) -> Callable[[int, int], None]:
    def record(arena: int, bound: int) -> None:
        seen.append((time.perf_counter(), arena, bound))

    return record


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def run_instance(instance: Instance) -> BenchRow:
    """Plan the instance ``repeat`` times (keeping the best times) and validate the plan.

    While it plans, every improvement of the plan is timed: the first whose arena is within
    the capacity (any plan when there is none) and the first at the bound it reached.
    """
    # The times are a warm process's, as the service plans: compiled code and the exact
    # methods load once, before the first instance (``scripts/startup.py`` times a cold one).
    ensure_warm(planner.plan)
    n = len(instance.request.buffers)
    capacity = instance.request.effective_capacity
    best = float("inf")
    first: float | None = None
    proof: float | None = None
    plan = None
    for _ in range(max(1, instance.repeat)):
        seen: list[tuple[float, int, int]] = []  # (seconds, arena, bound)
        gc.collect()  # the garbage of earlier runs is not this one's to collect
        t0 = time.perf_counter()
        with listening(_recorder(seen)):
            plan = planner.plan(instance.request, max_buffers=max(n, DEFAULT_MAX_BUFFERS))
        t1 = time.perf_counter()
        best = min(best, t1 - t0)
        fits = [t for t, a, _ in seen if capacity is None or a <= capacity]
        if plan.status in ("optimal", "feasible"):
            first = _earliest(first, (fits[0] if fits else t1) - t0)
        if plan.solver.proved_optimal:
            at = [t for t, a, b in seen if a <= b]
            proof = _earliest(proof, (at[0] if at else t1) - t0)
    assert plan is not None
    report = planner.validate(instance.request, plan)
    return BenchRow(
        instance=instance.name,
        buffers=n,
        lower_bound=plan.lower_bound,
        arena_bytes=plan.arena_bytes,
        gap=plan.solver.gap,
        status=plan.status,
        winner=plan.solver.name,
        time_ms=best * 1000.0,
        valid=report.valid,
        violations=len(report.violations),
        proved=plan.solver.proved_optimal,
        bound=plan.solver.bound,
        first_ms=None if first is None else first * 1000.0,
        proof_ms=None if proof is None else proof * 1000.0,
        optimum=instance.optimum,
    )


def family_instances(
    family: str,
    *,
    count: int,
    buffers: tuple[int, int],
    seed: int,
    solver: str | None = None,
    time_limit: float | None = None,
    repeat: int | None = None,
) -> list[Instance]:
    """``count`` generated instances of ``family`` (see ``planner.families``); raises
    ValueError naming a bad family or buffer count."""
    out = []
    for inst in family_suite(family, count, buffers, seed):
        request = with_overrides(inst.request, solver=solver, time_limit=time_limit)
        out.append(Instance(inst.name, request, repeat or RANDOM_REPEAT, inst.optimum))
    return out


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


_COLUMNS = (
    ("instance", "<"),
    ("buffers", ">"),
    ("lower bound", ">"),
    ("bound", ">"),
    ("arena", ">"),
    ("gap %", ">"),
    ("status", "<"),
    ("winner", "<"),
    ("first ms", ">"),
    ("proof ms", ">"),
    ("time ms", ">"),
    ("proved", "<"),
    ("at optimum", "<"),
    ("valid", "<"),
)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _cells(row: BenchRow) -> list[str]:
    return [
        row.instance,
        str(row.buffers),
        str(row.lower_bound),
        str(row.bound),
        str(row.arena_bytes),
        f"{row.gap * 100:.2f}",
        row.status,
        row.winner,
        _ms(row.first_ms),
        _ms(row.proof_ms),
        f"{row.time_ms:.1f}",
        "yes" if row.proved else "no",
        _yes_no(row.at_optimum),
        "yes" if row.valid else f"NO ({row.violations})",
    ]


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def format_table(rows: Sequence[BenchRow]) -> str:
    """A fixed-width table, one line per instance, under a header."""
    return format_columns(_COLUMNS, [_cells(r) for r in rows])


def format_groups(solvers: Sequence[str], groups: Sequence[Sequence[BenchRow]]) -> str:
    """One line per instance, one column group (arena, gap, time, proved, bound, time to the
    first plan within capacity, time to the proof) per solver."""
    columns = [("instance", "<"), ("buffers", ">"), ("lower bound", ">")]
    for name in solvers:
        columns += [(f"{name} arena", ">"), ("gap %", ">"), ("ms", ">"), ("proved", "<")]
        columns += [("bound", ">"), ("first ms", ">"), ("proof ms", ">"), ("at optimum", "<")]
    body = []
    for k, first in enumerate(groups[0]):
        cells = [first.instance, str(first.buffers), str(first.lower_bound)]
        for rows in groups:
            row = rows[k]
            arena = str(row.arena_bytes) if row.valid else f"{row.arena_bytes} INVALID"
            cells += [
                arena,
                f"{row.gap * 100:.2f}",
                f"{row.time_ms:.1f}",
                "yes" if row.proved else "no",
                str(row.bound),
                _ms(row.first_ms),
                _ms(row.proof_ms),
                _yes_no(row.at_optimum),
            ]
        body.append(cells)
    return format_columns(columns, body)


def _summary_data(rows: Sequence[BenchRow]) -> dict[str, Any]:
    gaps = [r.gap for r in rows if r.status != "infeasible"]  # unknown: best plan found
    known = [r.at_optimum for r in rows if r.at_optimum is not None]
    return {
        "instances": len(rows),
        "known_optimum": len(known),
        "at_optimum": sum(known),
        "planned": sum(r.ok for r in rows),
        "invalid": sum(not r.valid for r in rows),
        "mean_gap": sum(gaps) / len(gaps) if gaps else 0.0,
        "max_time_ms": max((r.time_ms for r in rows), default=0.0),
        "peak_memory_bytes": peak_memory_bytes(),
    }


def summary(rows: Sequence[BenchRow]) -> str:
    """One line: instances planned, mean gap, max time and the process's peak memory."""
    s = _summary_data(rows)
    invalid = f", {s['invalid']} INVALID" if s["invalid"] else ""
    known = f", {s['at_optimum']}/{s['known_optimum']} at optimum" if s["known_optimum"] else ""
    return (
        f"{s['planned']}/{s['instances']} planned{invalid}{known}, "
        f"mean gap {s['mean_gap'] * 100:.2f} %, max time {s['max_time_ms']:.1f} ms, "
        f"peak memory {s['peak_memory_bytes'] / 2**20:.1f} MiB"
    )


def format_json(rows: Sequence[BenchRow]) -> str:
    """``{"rows": [...], "summary": {...}}``: the table's numbers, unrounded."""
    data = {"rows": [asdict(r) for r in rows], "summary": _summary_data(rows)}
    return json.dumps(data, indent=2)


def compare(
    groups: Sequence[tuple[str, Sequence[Instance]]],
    *,
    as_json: bool = False,
    out: TextIO | None = None,
    runners: Mapping[str, Runner] | None = None,
) -> int:
    """Run each solver's instances and print one table with a column group per solver
    (or JSON keyed by solver); the exit code is that of ``bench`` over every run.

    A group named in ``runners`` is run by that function instead of ``run_instance``.
    """
    stream = out if out is not None else sys.stdout
    runners = runners or {}
    results = [
        (name, [runners.get(name, run_instance)(i) for i in instances])
        for name, instances in groups
    ]
    if as_json:
        data = {
            name: {"rows": [asdict(r) for r in rows], "summary": _summary_data(rows)}
            for name, rows in results
        }
        print(json.dumps(data, indent=2), file=stream)
    else:
        print(format_groups([n for n, _ in results], [rows for _, rows in results]), file=stream)
        for name, rows in results:
            print(f"{name}: {summary(rows)}", file=stream)
    return 0 if all(r.ok for _, rows in results for r in rows) else 1


def bench(
    instances: Sequence[Instance], *, as_json: bool = False, out: TextIO | None = None
) -> int:
    """Run every instance and print the table (or JSON); 0 if every plan fits and checks out,
    1 if any is infeasible, unknown or invalid."""
    stream = out if out is not None else sys.stdout
    if as_json:
        rows = [run_instance(instance) for instance in instances]
        print(format_json(rows), file=stream)
    else:
        rows = list(stream_table(instances, stream, sys.stderr))
        print(summary(rows), file=stream)
    return 0 if all(r.ok for r in rows) else 1


# Widths of the streamed table's columns besides their headings (cells may widen a line).
_STREAM_WIDTHS = {"buffers": 7, "lower bound": 11, "bound": 11, "arena": 11, "status": 10}


def stream_table(
    instances: Sequence[Instance], stream: TextIO, status: TextIO
) -> Iterator[BenchRow]:
    """Plan the instances in turn, printing the heading at once and each row as it
    finishes; on a terminal, ``status`` shows the instance being planned meanwhile."""
    widths = [max(len(name), _STREAM_WIDTHS.get(name, 0)) for name, _ in _COLUMNS]
    widths[0] = max([widths[0], *(len(i.name) for i in instances)])
    widths[7] = max(widths[7], 22)  # winner: "greedy:length/best-fit"
    print(format_row(_COLUMNS, widths, [name for name, _ in _COLUMNS]), file=stream, flush=True)
    live = status.isatty()
    for k, instance in enumerate(instances):
        if live:
            status.write(f"\r\x1b[K[{k + 1}/{len(instances)}] planning {instance.name}"[:120])
            status.flush()
        row = run_instance(instance)
        if live:
            status.write("\r\x1b[K")
            status.flush()
        print(format_row(_COLUMNS, widths, _cells(row)), file=stream, flush=True)
        yield row
