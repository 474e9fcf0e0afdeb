"""Start-up figures, each the median of ``--repeat`` fresh processes.

    python scripts/startup.py [--repeat 5] [--request examples/tvm_tiled_gemm.json]

- ``planner plan FILE``: wall seconds of the whole command (warm install);
- ``import planner``, and the first ``planner.plan`` of a fresh process (after the import);
- the same first call in a process whose compiled-kernel cache is empty (the first run
  after an install), for the request and for one that needs the exact search;
- after ``planner warm`` into that cache, the same again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANNER = Path(sys.executable).with_name("planner")
PROBE = """
import json, sys, time
began = time.perf_counter()
import planner
from planner.generate import random_kernel
imported = time.perf_counter()
if sys.argv[1] == "search":
    request = random_kernel(3, max_buffers=32)
else:
    request = json.load(open(sys.argv[1]))
t = time.perf_counter()
plan = planner.plan(request)
first = time.perf_counter() - t
t = time.perf_counter()
again = planner.plan(request)
later = time.perf_counter() - t
assert plan.model_dump_json() == again.model_dump_json()
heavy = [m for m in ("numba", "ortools", "planner.solvers.search", "httpx") if m in sys.modules]
print(json.dumps({"import": imported - began, "first": first, "later": later, "loaded": heavy}))
"""


def _probe(request: str, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, request],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _median(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--request", default="examples/tvm_tiled_gemm.json")
    args = parser.parse_args()
    repeat = max(1, min(args.repeat, 50))
    env = dict(os.environ)

    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(
            [str(PLANNER), "plan", args.request],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=600,
            check=True,
        )
        walls.append(time.perf_counter() - t)
    print(f"planner plan {args.request} (warm install):      {_median(walls)}")

    for label, request in (("greedy kernel", args.request), ("kernel that needs search", "search")):
        runs = [_probe(request, env) for _ in range(repeat)]
        imports = [float(str(r["import"])) for r in runs]
        firsts = [float(str(r["first"])) for r in runs]
        print(f"{label}: import planner {_median(imports)}, first plan {_median(firsts)}")
        print(f"  loaded by it: {runs[0]['loaded']}")
        with tempfile.TemporaryDirectory() as cache:
            cold = {**env, "NUMBA_CACHE_DIR": cache}
            first_run = _probe(request, cold)  # nothing compiled yet: the first run after install
            print(
                f"  first run after install (empty cache): first plan "
                f"{float(str(first_run['first'])) * 1000:.1f} ms"
            )
            t = time.perf_counter()
            subprocess.run([str(PLANNER), "warm"], env=cold, capture_output=True, check=True)
            warmed = time.perf_counter() - t
            after = [float(str(_probe(request, cold)["first"])) for _ in range(repeat)]
            print(f"  planner warm {warmed:.1f} s; then first plan {_median(after)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
