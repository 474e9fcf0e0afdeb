"""Planning time of warp-specialised GEMMs whose partitions loop over K tiles: a ring of
``--stages`` stages (A and B tiles of 16 KB each, declared inside the loop body, ``full`` and
``empty`` mbarriers per stage) in a loop of unknown trips (4 paths: 0 to 3 trips), then an
epilogue tile after a named barrier of the consumer warps. Planned in-process
(``planner.plan``, the static check on every path included) ``--runs`` times after one
warm-up; prints per ring depth the paths, the buffer instances of the longest path, the
arena, the lower bound, and the p50 and p90 in milliseconds.

    PYTHONPATH=. python scripts/partition_loops_bench.py --stages 3 8 16 32 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import planner
from planner.core.models import PlanRequest
from planner.core.partition_paths import partition_paths

P, C = "producer", "consumer"


def _access(op: str, at: int, part: str, **more: Any) -> dict[str, Any]:
    return {"op": op, "at": at, "bytes": 16, "threads": "all", "partition": part, **more}


def kernel(stages: int) -> PlanRequest:
    """The benchmark's request for a ring of ``stages`` stages."""
    buffers: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    for s in range(stages):
        p = 1 + 3 * s
        for name in "AB":
            buffers.append(
                {
                    "id": f"{name}{s}",
                    "size": 16384,
                    "start": p,
                    "end": p + 3,
                    "alignment": 1024,
                    "accesses": [
                        _access("write", p, P, agent="tma", mbarrier=f"full_{s}"),
                        _access("read", p + 1, C, agent="mma"),
                    ],
                }
            )
        syncs += [
            {"kind": "mbarrier_wait", "at": p, "mbarrier": f"empty_{s}", "partition": P},
            {"kind": "expect_tx", "at": p, "mbarrier": f"full_{s}", "partition": P},
            {"kind": "mbarrier_wait", "at": p + 1, "mbarrier": f"full_{s}", "partition": C},
            {"kind": "wait_group", "at": p + 2, "group": "wgmma", "partition": C},
            {"kind": "mbarrier_arrive", "at": p + 2, "mbarrier": f"empty_{s}", "partition": C},
        ]
    e = 1 + 3 * stages
    buffers.append(
        {
            "id": "C",
            "size": 32768,
            "start": e,
            "end": e + 3,
            "alignment": 1024,
            "accesses": [_access("write", e + 1, C), _access("read", e + 2, C)],
        }
    )
    syncs.append({"kind": "named_barrier", "at": e, "id": 1, "partitions": [C]})
    return PlanRequest.model_validate(
        {
            "block": [256],
            "partitions": [{"id": P, "threads": [0, 128]}, {"id": C, "threads": [128, 256]}],
            "loops": [{"start": 1, "end": e}],
            "buffers": buffers,
            "syncs": syncs,
            "options": {"sync": "existing"},
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, nargs="+", default=[3, 8, 16, 32])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    planner.plan(kernel(3))  # warm-up: kernels compiled and loaded
    print("stages  paths  instances     arena     bound  p50_ms  p90_ms")
    for stages in args.stages:
        req = kernel(stages)
        paths = partition_paths(req)
        times: list[float] = []
        for _ in range(args.runs):
            t = time.perf_counter()
            plan = planner.plan(req)
            times.append((time.perf_counter() - t) * 1000)
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
        print(
            f"{stages:6d}  {len(paths):5d}  {max(len(p.buffer) for p in paths):9d}  "
            f"{plan.arena_bytes:8d}  {plan.lower_bound:8d}  {statistics.median(times):6.0f}  "
            f"{p90:6.0f}"
        )


if __name__ == "__main__":
    main()
