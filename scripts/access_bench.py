"""Time owner analysis of a 1024-thread block over a 64 KB buffer with 8 accesses.

    python scripts/access_bench.py [--repeat 20]

The accesses mix widths (1 to 16 bytes), strides, loops, a transposed read and a blockIdx
term over a grid of 8 blocks, so both the injective and the shared-owner paths run. A second
kernel keeps every float on one thread in all 8 accesses. Prints the best and the median time
of ``--repeat`` runs and the owner census of each.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from planner.core.access import ANY, NONE, byte_owners
from planner.core.models import PlanRequest

KB64 = 64 * 1024  # bytes
THREADS = 1024


def bench_request() -> PlanRequest:
    """One 64 KB buffer, a 32 x 32 block, 8 accesses at points 0..7."""
    tx, ty = "threadIdx.x", "threadIdx.y"
    accesses = [
        # float4 stores: each thread 4 vectors, 1024 apart
        {"op": "write", "bytes": 16, "index": {tx: 1, ty: 32, "i": 1024}, "loops": {"i": 4}},
        # float loads, same thread per 16-byte group: row-major tile
        {"op": "read", "bytes": 4, "index": {tx: 4, ty: 128, "k": 1}, "loops": {"k": 4}},
        # transposed float loads: x is the slow axis
        {"op": "read", "bytes": 4, "index": {tx: 32, ty: 1, "i": 1024}, "loops": {"i": 16}},
        # half loads over two loops
        {
            "op": "read",
            "bytes": 2,
            "index": {tx: 2, ty: 64, "i": 2048, "j": 1},
            "loops": {"i": 16, "j": 2},
        },
        # byte stores, every byte
        {"op": "write", "bytes": 1, "index": {tx: 1, ty: 32, "i": 1024}, "loops": {"i": 64}},
        # shared rows: all 32 x-threads read one row's 32 floats (several owners)
        {"op": "read", "bytes": 4, "index": {ty: 32, "k": 1}, "loops": {"k": 32}},
        # a per-block slice: blockIdx.x picks one of 8 quarters of 8 KB
        {"op": "write", "bytes": 8, "index": {tx: 1, ty: 32, "blockIdx.x": 1024}, "loops": {}},
        # 8-byte loads, strided
        {"op": "read", "bytes": 8, "index": {tx: 2, ty: 64, "i": 1}, "loops": {"i": 2}},
    ]
    for at, a in enumerate(accesses):
        a["at"] = at
    return PlanRequest.model_validate(
        {
            "block": [32, 32, 1],
            "grid": [8, 1, 1],
            "buffers": [{"id": "tile", "size": KB64, "start": 0, "end": 8, "accesses": accesses}],
        }
    )


def thread_local_request() -> PlanRequest:
    """The same buffer with 8 accesses that all keep each float on one thread."""
    own = {"bytes": 4, "index": {"threadIdx.x": 1, "threadIdx.y": 32, "i": 1024}}
    accesses = [
        {**own, "op": "write" if at % 2 == 0 else "read", "at": at, "loops": {"i": 16}}
        for at in range(8)
    ]
    return PlanRequest.model_validate(
        {
            "block": [32, 32, 1],
            "buffers": [{"id": "tile", "size": KB64, "start": 0, "end": 8, "accesses": accesses}],
        }
    )


def _time(name: str, request: PlanRequest, repeat: int) -> None:
    byte_owners(request, 0)  # warm-up: imports and first allocations
    times = []
    result = None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        result = byte_owners(request, 0)
        times.append(time.perf_counter() - t0)
    assert result is not None
    owners = result.owners
    single = int(np.count_nonzero(owners >= 0))
    print(
        f"{name}: owner analysis, {THREADS} threads, {KB64} B, 8 accesses: best "
        f"{min(times) * 1000:.1f} ms, median {statistics.median(times) * 1000:.1f} ms "
        f"({len(times)} runs); bytes: {single} one owner, "
        f"{int(np.count_nonzero(owners == ANY))} any, {int(np.count_nonzero(owners == NONE))} "
        f"none; exact {result.exact}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    _time("mixed", bench_request(), args.repeat)
    _time("thread-local", thread_local_request(), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
