"""``planner bench --scaling KIND``: how planning grows with the buffers.

Each size of a generated workload (``model``: ``planner.generate.model_request``, ``random``:
``random_request``, ``all-overlapping``: ``all_overlapping``) is planned in a fresh process,
so the peak resident memory is the case's own, ``repeat`` times; the median time of
``planner.plan`` (the request is built first, the compiled code loaded, as in the service)
is reported beside the peak memory, arena, lower bound and gap, and every plan goes
through the static validator. The fitted exponent is the least-squares slope of log time
(and of log memory) against log buffers: 1 is linear, 2 quadratic.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from planner.catalog import SCALING_KINDS
from planner.core.models import Options, PlanRequest
from planner.generate import all_overlapping, model_request, random_request

__all__ = [
    "ScalingRow",
    "exponent",
    "format_scaling",
    "measure",
    "request_for",
    "scaling",
]

_CHILD = """
import json, resource, sys, time
import planner
from planner.scaling import request_for
from planner.pipeline.warm import ensure_warm
kind, n, solver, limit, repeat = sys.argv[1:6]
request = request_for(kind, int(n), solver or None, float(limit) if limit else None)
ensure_warm(planner.plan)
times = []
for _ in range(int(repeat)):
    began = time.perf_counter()
    plan = planner.plan(request, max_buffers=max(int(n), 1))
    times.append(time.perf_counter() - began)
valid = planner.validate(request, plan).valid
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # bytes (Linux: KiB)
print(json.dumps({"times": times, "peak": peak, "status": plan.status, "valid": valid,
                  "arena": plan.arena_bytes, "bound": plan.lower_bound,
                  "solver": plan.solver.name}))
"""


@dataclass(frozen=True)
class ScalingRow:
    """One size of one workload."""

    kind: str
    buffers: int
    seconds: float  # median over the runs of planner.plan
    peak_bytes: int  # peak resident memory of the whole process
    arena_bytes: int
    lower_bound: int  # bytes
    status: str
    valid: bool  # the static validator accepts the plan
    solver: str
    error: str | None = None  # the child's last line when it failed

    @property
    def gap(self) -> float:
        return (self.arena_bytes - self.lower_bound) / self.lower_bound if self.lower_bound else 0.0


def request_for(kind: str, n: int, solver: str | None, time_limit: float | None) -> PlanRequest:
    """The generated request of ``kind`` with ``n`` buffers and the options given; raises
    ValueError naming a bad kind."""
    makers: dict[str, Callable[[int], PlanRequest]] = {
        "model": model_request,
        "random": random_request,
        "all-overlapping": all_overlapping,
    }
    if kind not in makers:
        raise ValueError(f"kind must be one of {', '.join(SCALING_KINDS)}, got {kind!r}")
    request = makers[kind](n)
    update = {k: v for k, v in (("solver", solver), ("time_limit", time_limit)) if v is not None}
    if not update:
        return request
    # Only the options are checked again: the generated buffers are valid by construction.
    options = Options.model_validate({**request.options.model_dump(), **update})
    return request.model_copy(update={"options": options})


def measure(
    kind: str, n: int, *, solver: str | None, time_limit: float | None, repeat: int
) -> ScalingRow:
    """One size in a child process; a row holding its error when it failed."""
    args = [kind, str(n), solver or "", "" if time_limit is None else str(time_limit)]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args, str(max(1, repeat))],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return ScalingRow(kind, n, math.nan, 0, 0, 0, "error", False, "-", tail)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return ScalingRow(
        kind=kind,
        buffers=n,
        seconds=statistics.median(data["times"]),
        peak_bytes=int(data["peak"]),
        arena_bytes=int(data["arena"]),
        lower_bound=int(data["bound"]),
        status=str(data["status"]),
        valid=bool(data["valid"]),
        solver=str(data["solver"]),
    )


def exponent(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """Least-squares slope of log(value) against log(size); None with fewer than two
    distinct sizes or a value that is not positive."""
    pairs = [(math.log(s), math.log(v)) for s, v in zip(sizes, values, strict=True) if v > 0]
    if len({x for x, _ in pairs}) < 2 or len(pairs) < len(values):
        return None
    mx = statistics.fmean(x for x, _ in pairs)
    my = statistics.fmean(y for _, y in pairs)
    num = sum((x - mx) * (y - my) for x, y in pairs)
    den = sum((x - mx) ** 2 for x, _ in pairs)
    return num / den


_HEADER = (
    f"{'kind':<16} {'buffers':>9} {'seconds':>8} {'peak MB':>8} {'arena':>13} "
    f"{'lower bound':>13} {'gap %':>6} {'status':<9} {'valid':<5} solver"
)


def _line(r: ScalingRow) -> str:
    if r.error is not None:
        return f"{r.kind:<16} {r.buffers:>9} failed: {r.error}"
    return (
        f"{r.kind:<16} {r.buffers:>9} {r.seconds:>8.2f} {r.peak_bytes / 2**20:>8.0f} "
        f"{r.arena_bytes:>13} {r.lower_bound:>13} {r.gap * 100:>6.2f} {r.status:<9} "
        f"{'yes' if r.valid else 'NO':<5} {r.solver}"
    )


def format_scaling(rows: Sequence[ScalingRow]) -> str:
    """The table, and per workload the fitted exponents of time and memory."""
    return "\n".join([_HEADER, *(_line(r) for r in rows), *_exponents(rows)])


def _exponents(rows: Sequence[ScalingRow]) -> list[str]:
    lines = []
    for kind in dict.fromkeys(r.kind for r in rows):
        done = [r for r in rows if r.kind == kind and r.error is None]
        sizes = [float(r.buffers) for r in done]
        time_exp = exponent(sizes, [r.seconds for r in done])
        mem_exp = exponent(sizes, [float(r.peak_bytes) for r in done])
        lines.append(
            f"{kind}: time ~ n^{_fmt(time_exp)}, peak memory ~ n^{_fmt(mem_exp)} "
            f"(least squares over {len(done)} sizes)"
        )
    return lines


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def scaling(
    kinds: Sequence[str],
    sizes: Sequence[int],
    *,
    solver: str | None = None,
    time_limit: float | None = None,
    repeat: int | None = None,
    out: TextIO | None = None,
) -> int:
    """Measure every kind at every size and print the table; 0 if every plan is valid and
    within its status, 1 otherwise."""
    stream = out if out is not None else sys.stdout
    rows = []
    print(_HEADER, file=stream, flush=True)
    for kind in kinds:
        for n in sizes:
            row = measure(kind, n, solver=solver, time_limit=time_limit, repeat=repeat or 1)
            rows.append(row)
            print(_line(rows[-1]), file=stream, flush=True)
    print("\n".join(_exponents(rows)), file=stream)
    ok = all(r.valid and r.status in ("optimal", "feasible") for r in rows)
    return 0 if ok else 1
