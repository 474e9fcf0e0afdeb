"""Plan one request many times in one warmed process: how many distinct plans, how many cut.

    python scripts/repeat.py --buffers 300 --repeats 200 --time-limit 0.1 [--kernel SEED]

The request is ``random_request(buffers, overlap=0.2, seed=1, sync="insert")``, or with
``--kernel`` the kernel-sized ``random_kernel(SEED)``. Prints the distinct plan bodies (JSON as
the service sends it) and how many of them carry ``solver.cut_by_clock``: every distinct body
beyond the first should be a marked one. Run it with another process keeping the other cores
busy to see a loaded machine.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import time

import planner
from planner.generate import random_kernel, random_request
from planner.pipeline.warm import ensure_warm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffers", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--time-limit", type=float, default=0.1)
    parser.add_argument("--kernel", type=int, default=None, help="seed of a random kernel")
    args = parser.parse_args()
    if args.kernel is not None:
        request = random_kernel(args.kernel, max_buffers=40)
    else:
        request = random_request(args.buffers, overlap=0.2, seed=1, sync="insert")
    options = request.options.model_copy(update={"time_limit": args.time_limit})
    request = request.model_copy(update={"options": options})
    ensure_warm(planner.plan)
    bodies: collections.Counter[str] = collections.Counter()
    marked: set[str] = set()
    seconds: list[float] = []
    for _ in range(max(1, min(args.repeats, 10_000))):
        t0 = time.perf_counter()
        plan = planner.plan(request)
        seconds.append(time.perf_counter() - t0)
        digest = hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:12]
        bodies[digest] += 1
        if plan.solver.cut_by_clock:
            marked.add(digest)
    seconds.sort()
    print(
        f"{len(request.buffers)} buffers, time_limit {args.time_limit} s, {sum(bodies.values())} "
        f"plans: {len(bodies)} distinct, {len(marked)} of them marked cut_by_clock; "
        f"unmarked distinct: {len(set(bodies) - marked)}; median {seconds[len(seconds) // 2]:.3f} "
        f"s, max {seconds[-1]:.3f} s"
    )
    for digest, count in bodies.most_common():
        print(f"  {digest} x{count}{'  cut_by_clock' if digest in marked else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
