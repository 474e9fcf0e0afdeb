"""How often ``solver: "auto"`` proves kernel-sized requests optimal, and how fast.

    python scripts/kernels64.py [--instances 60] [--buffers 64] [--overlap 0.25]
                                [--alignments 16,128] [--time-limit 10] [--first-seed 0]

Each instance has 16 to ``--buffers`` buffers (sizes multiples of 16 bytes, each aligned to
one of ``--alignments`` bytes at random, each overlapping ``--overlap`` of the others on
average), planned with ``sync: "none"``. Every plan goes through the static validator
(``planner.plan`` runs it).
Instances are seeds ``--first-seed`` onwards: tune on another range (1000 onwards, say) than
the one a figure is reported on (0 onwards). Prints one line per instance that is not proved
or takes 100 ms or more, then how many were proved, the median and the maximum time of the
best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pydantic import ValidationError

import planner
from planner.core.errors import RequestError
from planner.core.models import Options, PlanRequest
from planner.generate import random_kernel

TARGET_MS = 100.0


def kernel_request(
    seed: int,
    buffers: int,
    time_limit: float,
    overlap: float = 0.25,
    alignments: tuple[int, ...] = (16, 128),
) -> PlanRequest:
    """``planner.generate.random_kernel``, planned by solver ``auto`` within ``time_limit``."""
    request = random_kernel(seed, max_buffers=buffers, overlap=overlap, alignments=alignments)
    options = Options.model_validate(
        {**request.options.model_dump(), "solver": "auto", "time_limit": time_limit}
    )
    return request.model_copy(update={"options": options})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=60)
    parser.add_argument("--buffers", type=int, default=64)
    parser.add_argument("--overlap", type=float, default=0.25)
    parser.add_argument(
        "--alignments", default="16,128", help="comma-separated alignments (bytes) to draw from"
    )
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=2, help="runs per instance, best kept")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first instance")
    args = parser.parse_args()
    try:
        alignments = tuple(int(a) for a in args.alignments.split(","))
    except ValueError:
        parser.error(f"--alignments: not a list of integers: {args.alignments!r}")
    try:
        first = kernel_request(0, args.buffers, args.time_limit, args.overlap, alignments)
    except ValidationError as exc:
        error = exc.errors()[0]
        parser.error(f"--{'-'.join(map(str, error['loc'])).replace('_', '-')}: {error['msg']}")
    except (ValueError, RequestError) as exc:
        parser.error(str(exc))
    planner.plan(first)  # loads compiled code before anything is timed
    times: list[float] = []
    proved = 0
    for seed in range(args.first_seed, args.first_seed + max(1, args.instances)):
        request = kernel_request(seed, args.buffers, args.time_limit, args.overlap, alignments)
        best = float("inf")
        plan = None
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            plan = planner.plan(request)
            best = min(best, time.perf_counter() - t0)
        assert plan is not None
        ms = best * 1000.0
        times.append(ms)
        proved += plan.solver.proved_optimal
        if not plan.solver.proved_optimal or ms >= TARGET_MS:
            print(
                f"seed {seed}: {len(request.buffers)} buffers, arena {plan.arena_bytes}, "
                f"bound {plan.solver.bound}, proved {plan.solver.proved_optimal}, {ms:.1f} ms"
            )
    print(
        f"{proved}/{len(times)} proved optimal; median {statistics.median(times):.1f} ms, "
        f"max {max(times):.1f} ms, {sum(t < TARGET_MS for t in times)} under {TARGET_MS:.0f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
