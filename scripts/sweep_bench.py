"""Time a sweep of 10 000 configurations of a 32-buffer kernel, then check every fitting
answer's plan with the static validator.

    python scripts/sweep_bench.py [--repeat 5] [--check all|N|0]

The kernel: a pipelined GEMM's operand rings, its epilogue and reduction scratch, and
short-lived temporaries (32 buffers, 8 barriers), sizes over four parameters (BLOCK_M,
BLOCK_N, BLOCK_K, STAGES: 10 values each). The sweep answers on sm_80, sm_86 and sm_90. Prints
the best and the median time of ``--repeat`` sweeps (after one warm-up that loads the compiled
kernels), how many configurations fit per target, how many were refined, and then builds the
plan of every fitting configuration (``--check``: all, the first N, or none) and validates it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import planner
from planner.core.params import parse_template
from planner.sweeps import sweep

TARGETS = ["sm_80", "sm_86", "sm_90"]


def bench_request() -> dict[str, Any]:
    """A 32-buffer kernel with four parameters; 10**4 configurations in their product."""
    buffers: list[dict[str, Any]] = []
    a_tile, b_tile = "BLOCK_M * BLOCK_K * 2", "BLOCK_K * BLOCK_N * 2"
    buffers.append({"id": "A_ring", "size": f"STAGES * {a_tile}", "start": 0, "end": 8})
    buffers.append({"id": "B_ring", "size": f"STAGES * {b_tile}", "start": 0, "end": 8})
    buffers.append({"id": "C_tile", "size": "BLOCK_M * BLOCK_N * 4", "start": 8, "end": 12})
    buffers.append({"id": "bias", "size": "BLOCK_N * 4", "start": 0, "end": 12})
    buffers.append({"id": "scale", "size": "BLOCK_M * 4", "start": 8, "end": 12})
    buffers.append({"id": "row_max", "size": "BLOCK_M * 4", "start": 12, "end": 14})
    buffers.append({"id": "row_sum", "size": "BLOCK_M * 4", "start": 12, "end": 16})
    buffers.append({"id": "out", "size": "BLOCK_M * BLOCK_N * 2", "start": 14, "end": 16})
    for k in range(24):  # temporaries: short lifetimes spread over the kernel
        start = (k * 5) % 15
        length = 1 + k % 3
        size = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "BLOCK_M + BLOCK_N", "max(BLOCK_M, BLOCK_K)")[
            k % 5
        ]
        buffers.append(
            {
                "id": f"tmp{k}",
                "size": f"{size} * {4 * (1 + k % 4)}",
                "start": start,
                "end": min(16, start + length),
            }
        )
    return {
        "name": "pipelined_gemm_family",
        "alignment": 16,
        "barriers": [2, 4, 6, 8, 10, 12, 14, 15],
        "params": {
            "BLOCK_M": {"values": [16, 32, 48, 64, 80, 96, 112, 128, 192, 256]},
            "BLOCK_N": {"values": [16, 32, 48, 64, 80, 96, 112, 128, 192, 256]},
            "BLOCK_K": {"values": [16, 24, 32, 40, 48, 56, 64, 96, 128, 256]},
            "STAGES": {"min": 1, "max": 10},
        },
        "buffers": buffers,
        "options": {"sync": "existing"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check", default="all", help="all, a count, or 0")
    args = parser.parse_args()
    request = bench_request()
    sweep(request, targets=TARGETS)  # warm-up: loads the compiled kernels
    times = []
    result = None
    for _ in range(args.repeat):
        began = time.perf_counter()
        result = sweep(request, targets=TARGETS)
        times.append(time.perf_counter() - began)
    assert result is not None
    print(
        f"{len(result.answers)} configurations x {len(TARGETS)} targets, "
        f"{len(request['buffers'])} buffers: best {min(times):.3f} s, "
        f"median {statistics.median(times):.3f} s (shared graph: {result.shared_graph})"
    )
    optimal = sum(a.proved_optimal for a in result.answers)
    print(
        f"fitting per target {dict(zip(TARGETS, result.fitting, strict=True))}; "
        f"refined {result.refined}; arena = lower bound in {optimal}"
    )
    if args.check == "0":
        return
    began = time.perf_counter()
    planned = sweep(request, targets=TARGETS, plans="fitting")
    template = parse_template(request)
    fitting = [a for a in planned.answers if a.plan is not None]
    limit = len(fitting) if args.check == "all" else int(args.check)
    for a in fitting[:limit]:
        assert a.plan is not None, a.config
        assert a.plan.arena_bytes == a.arena_bytes, a.config
        report = planner.validate(template.bind(a.config, checked=True), a.plan)
        assert report.valid, (a.config, report.violations[:3])
    print(
        f"planned and validated {min(limit, len(fitting))} of {len(fitting)} fitting "
        f"configurations in {time.perf_counter() - began:.1f} s: every plan valid"
    )


if __name__ == "__main__":
    main()
