"""Time the emulator on a 100-buffer, 256-thread kernel planned by the planner.

    python scripts/emulator_bench.py [--buffers 100] [--threads 256] [--repeat 5] [--seed 0]

Half the buffers carry access patterns (float stores by thread, then float or float4 loads
by thread or by row), the other half get the synthetic pattern. Lifetimes are random over
``10 * buffers`` points with existing barriers every 8 points; sync is "insert". Prints the
plan's arena, the byte accesses checked, the best and the median emulation time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np

import planner
from planner.core.models import PlanRequest
from planner.validators.emulator import emulate


def bench_request(buffers: int, threads: int, seed: int) -> PlanRequest:
    """A kernel of ``buffers`` buffers over one block of ``threads`` threads."""
    rng = np.random.default_rng(seed)
    horizon = 10 * buffers  # program points
    items: list[dict[str, Any]] = []
    for i in range(buffers):
        start = int(rng.integers(0, horizon - 2))
        end = min(horizon, start + int(rng.integers(2, 40)))
        rows = int(rng.integers(1, 9))  # float rows of `threads` elements
        size = rows * threads * 4  # bytes
        item: dict[str, Any] = {"id": f"b{i}", "size": size, "start": start, "end": end}
        if i % 2 == 0:
            write = {
                "op": "write",
                "at": start,
                "bytes": 4,
                "index": {"threadIdx.x": 1, "r": threads},
                "loops": {"r": rows},
            }
            if i % 4 == 0:  # each thread reads back what it wrote
                read = {**write, "op": "read", "at": end - 1}
            else:  # every thread reads one row, a different thread per element
                read = {"op": "read", "at": end - 1, "bytes": 4, "index": {"k": 1}}
                read["loops"] = {"k": threads}
            item["accesses"] = [write, read]
        items.append(item)
    return PlanRequest.model_validate(
        {
            "name": f"emulator-bench-{buffers}x{threads}",
            "block": [threads],
            "alignment": 16,
            "barriers": list(range(0, horizon, 8)),
            "buffers": items,
            "options": {"sync": "insert", "time_limit": 5.0},
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffers", type=int, default=100)
    parser.add_argument("--threads", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    request = bench_request(args.buffers, args.threads, args.seed)
    plan = planner.plan(request)
    times = []
    report = None
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        report = emulate(request, plan)
        times.append(time.perf_counter() - t0)
    assert report is not None
    print(
        f"{request.name}: arena {plan.arena_bytes} B ({plan.status}), "
        f"{len(plan.barriers.inserted)} barriers inserted; emulator "
        f"{'valid' if report.valid else 'INVALID'}, {report.byte_accesses} byte accesses, "
        f"best {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms "
        f"({len(times)} runs)"
    )
    for v in report.violations[:5]:
        print(f"  {v.code} at {v.point}: {v.message}")
    return 0 if report.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
