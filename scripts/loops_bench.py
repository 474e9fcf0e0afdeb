"""Loops, branches and live ranges: what they save, and how fast they plan.

    python scripts/loops_bench.py [--repeat N]

1. Per example in examples/ with loops, branches or ranges: the arena and the barriers of the
   plan (static: points; dynamic: executions, a point in a loop counting its trips, unknown
   trips 1000) against the same kernel written as a straight line
   (``planner.pipeline.program.straight_line``: each buffer live on the hull of its ranges grown
   over every loop it touches, arms one after the other), and the bytes and barriers saved.
   The barriers counted are those the kernel runs: the request's and the inserted ones, and
   under sync "none" the required ones.
2. Planning a 32-buffer kernel with one loop and one branch, in-process, kernels compiled
   (as in the service, after ``planner warm``): p50 and p90 of ``planner.plan`` (static check
   included) and of the planning alone, over seeded kernels.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path
from typing import Any

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.pipeline.ground import build_ground
from planner.pipeline.program import straight_line
from planner.pipeline.unrolled import plan_unrolled
from planner.pipeline.warm import ensure_warm
from planner.solvers import registry

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _barriers(req: PlanRequest, plan: Plan) -> tuple[int, int]:
    """(points, executions) of the barriers the kernel runs under the plan, counted with the
    loops of ``req``."""
    b = plan.barriers
    points = set(b.existing) | set(b.inserted)
    if req.options.sync == "none":
        points |= set(b.required)
    return len(points), sum(req.executions_at(p) for p in points)


def examples() -> None:
    print(
        f"{'example':24} {'arena':>7} {'line':>7} {'saved':>7}  "
        f"{'bar':>3} {'line':>4} {'exec':>6} {'line':>6} {'saved':>6}"
    )
    for path in request_files(EXAMPLES):
        req = parse_request(path.read_text())
        if not req.has_control_flow:
            continue
        plan = planner.plan(req)
        line = planner.plan(straight_line(req))
        static, dynamic = _barriers(req, plan)
        line_static, line_dynamic = _barriers(req, line)
        print(
            f"{path.stem:24} {plan.arena_bytes:7} {line.arena_bytes:7} "
            f"{line.arena_bytes - plan.arena_bytes:7}  {static:3} {line_static:4} "
            f"{dynamic:6} {line_dynamic:6} {line_dynamic - dynamic:6}"
        )


def kernel(seed: int) -> dict[str, Any]:
    """32 buffers: a loop over [8, 40) (16 trips) whose body holds an if/else with arms
    [16, 24) and [24, 32); 6 buffers live across the loop, 10 in the arms, 12 in the body
    around the branch, 4 after the loop."""
    rng = random.Random(seed)
    sizes = [256, 512, 1024, 2048, 4096]

    def inside(lo: int, hi: int) -> tuple[int, int]:
        s = rng.randint(lo, hi - 1)
        return s, rng.randint(s + 1, min(hi, s + 4))

    spans: list[tuple[int, int]] = []
    spans += [(rng.randint(0, 7), rng.randint(41, 48)) for _ in range(6)]
    spans += [inside(16, 24) for _ in range(5)] + [inside(24, 32) for _ in range(5)]
    spans += [inside(*rng.choice([(8, 16), (32, 40)])) for _ in range(12)]
    spans += [inside(40, 48) for _ in range(4)]
    return {
        "name": f"k32_{seed}",
        "alignment": 16,
        "barriers": [8, 16, 32],
        "loops": [{"start": 8, "end": 40, "trips": 16}],
        "branches": [{"arms": [[16, 24], [24, 32]]}],
        "buffers": [
            {"id": f"t{i}", "size": rng.choice(sizes), "start": s, "end": e}
            for i, (s, e) in enumerate(spans)
        ],
        "options": {"sync": "insert"},
    }


def speed(repeat: int) -> None:
    requests = [parse_request(kernel(seed)) for seed in range(20)]
    ensure_warm(planner.plan)  # compiled kernels loaded, as in the service
    for r in requests:
        planner.plan(r)

    def planning_only(r: PlanRequest) -> object:
        return plan_unrolled(build_ground(r, registry.lookup(r.options.solver), 1.0))

    for name, run in (("planner.plan", planner.plan), ("planning only", planning_only)):
        wall: list[float] = []
        cpu: list[float] = []  # this process's CPU time: what a busy machine's wall hides
        for _ in range(repeat):
            for r in requests:
                t0, c0 = time.perf_counter(), time.process_time()
                run(r)
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        wall.sort()
        cpu.sort()
        print(
            f"32 buffers, 1 loop, 1 branch: {name:14} wall p50 {_ms(wall, 0.5)} p90 "
            f"{_ms(wall, 0.9)}  cpu p50 {_ms(cpu, 0.5)} p90 {_ms(cpu, 0.9)}"
        )


def _ms(sorted_seconds: list[float], q: float) -> str:
    if q == 0.5:
        return f"{statistics.median(sorted_seconds) * 1e3:6.2f} ms"
    return f"{sorted_seconds[int(q * len(sorted_seconds))] * 1e3:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="passes over the 20 kernels")
    args = parser.parse_args()
    examples()
    speed(args.repeat)


if __name__ == "__main__":
    main()
