"""How planning scales: seconds and peak memory of ``planner.plan`` on large requests.

Each case runs in a fresh process (so peak memory is the case's own): random requests
(``planner.generate.random_request``) with the default options and with ``time_limit`` 1,
requests whose buffers all overlap (``planner.generate.all_overlapping``), and model-like
requests (``planner.generate.model_request``, with ``--model N``). ``planner bench
--scaling`` measures the same with a median over runs and fitted exponents. The child
times ``planner.plan`` alone (the request is built first) and reports the peak resident set
of the whole process. Prints one row per case:

    $ python scripts/scale.py
    $ python scripts/scale.py --random 3000 --overlapping 30000 --limit 1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, resource, sys, time
import planner
from planner.generate import all_overlapping, model_request, random_request
kind, n, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
makers = {"random": random_request, "model": model_request, "all-overlapping": all_overlapping}
request = makers[kind](n)
if limit != "default":
    options = request.options.model_copy(update={"time_limit": float(limit)})
    request = request.model_copy(update={"options": options})
from planner.pipeline.warm import ensure_warm
ensure_warm(planner.plan)  # loads compiled code and the exact methods, as the service does
began = time.perf_counter()
try:
    plan = planner.plan(request)
except planner.RequestError as exc:
    print(json.dumps({"refused": exc.errors[0]["type"], "message": exc.errors[0]["msg"]}))
    raise SystemExit(0)
seconds = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux: KiB)
print(json.dumps({"seconds": seconds, "peak_mb": peak, "status": plan.status,
                  "arena": plan.arena_bytes, "bound": plan.lower_bound,
                  "limit": request.options.time_limit, "solver": plan.solver.name}))
"""


def measure(kind: str, n: int, limit: str) -> dict[str, object]:
    """One case in a child process; its JSON line, or the error it ended with."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(n), limit],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1]
        return {"error": tail}
    row: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, action="append", help="buffers (repeatable)")
    parser.add_argument("--overlapping", type=int, action="append", help="buffers (repeatable)")
    parser.add_argument("--model", type=int, action="append", help="buffers (repeatable)")
    parser.add_argument(
        "--limit", action="append", help="time limits: 'default' or seconds (repeatable)"
    )
    args = parser.parse_args(argv)
    randoms = args.random or [3000, 30000, 100000]
    overlapping = args.overlapping or [30000, 100000]
    limits = args.limit or ["default", "1"]
    cases = [("random", n, lim) for lim in limits for n in randoms]
    cases += [("all-overlapping", n, "default") for n in overlapping]
    cases += [("model", n, "default") for n in args.model or []]
    print(
        f"{'n':>7} {'kind':<16} {'limit':>6} {'seconds':>8} {'peak MB':>8} {'status':<9} "
        f"{'arena':>11} {'bound':>11} {'gap %':>6} solver"
    )
    for kind, n, lim in cases:
        row = measure(kind, n, lim)
        if "error" in row:
            print(f"{n:>7} {kind:<16} {lim:>6} failed: {row['error']}")
            continue
        if "refused" in row:
            print(f"{n:>7} {kind:<16} {lim:>6} refused: {row['refused']}: {row['message']}")
            continue
        arena, bound = int(str(row["arena"])), int(str(row["bound"]))
        gap = 100.0 * (arena - bound) / bound if bound else 0.0
        print(
            f"{n:>7} {kind:<16} {row['limit']!s:>6} {float(str(row['seconds'])):>8.2f} "
            f"{float(str(row['peak_mb'])):>8.0f} {row['status']!s:<9} {arena:>11} {bound:>11} "
            f"{gap:>6.2f} {row['solver']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
