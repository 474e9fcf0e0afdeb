"""The search's branching orders, one at a time, against MiniMalloc's CLI on the same order.

Generates instances of the challenging family's shape (``planner.families``: random
lifetimes and sizes on a 1024-byte grid, the peak of live bytes at the capacity of 1048576
bytes; ``random-narrow`` and ``random-wide``) from the held-out seeds (``CHECK_SEED`` on), and
decides each at the capacity with one order alone: the search's canonical kernel on this
process's thread with the node budget ``--time-limit`` buys, and MiniMalloc with
``--preordering_heuristics=ORDER`` and the same timeout. Prints one row per instance and
order: each solver's verdict (``fit``: a plan within the capacity, ``none``: proved that
nothing fits, ``-``: undecided) and seconds. MiniMalloc's columns are left out when its
binary is not there (``--minimalloc``, default ``../shared/tools/minimalloc/minimalloc``).

    $ python scripts/orders_bench.py --count 4 --time-limit 10
    $ python scripts/orders_bench.py --orders TWA --buffers 300-450 --family random-wide
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minimize_bench import MINIMALLOC  # noqa: E402  (beside this script)

from planner.core.graph import build_graph  # noqa: E402
from planner.core.models import PlanRequest  # noqa: E402
from planner.families import CAPACITY, CHECK_SEED, family_suite  # noqa: E402
from planner.solvers._search_kernel import EXHAUSTED, FOUND  # noqa: E402
from planner.solvers.greedy import arena_of  # noqa: E402
from planner.solvers.search import decide_orders, node_budget  # noqa: E402

VERDICT = {FOUND: "fit", EXHAUSTED: "none"}


def _csv(request: PlanRequest) -> str:
    """MiniMalloc CSV with integer ids (request order)."""
    rows = ["id,lower,upper,size"]
    rows += [f"{i},{b.start},{b.end},{b.size}" for i, b in enumerate(request.buffers)]
    return "\n".join(rows) + "\n"


def _minimalloc(
    binary: Path, request: PlanRequest, order: str, seconds: float
) -> tuple[str, float]:
    """MiniMalloc's verdict at the capacity with one order, and its own elapsed seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "in.csv"), Path(tmp, "out.csv")
        src.write_text(_csv(request))
        began = time.perf_counter()
        run = subprocess.run(
            [
                str(binary),
                f"--capacity={CAPACITY}",
                f"--input={src}",
                f"--output={out}",
                f"--timeout={seconds}s",
                f"--preordering_heuristics={order}",
                "--validate",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        wall = time.perf_counter() - began
        text = run.stdout + run.stderr
        found = re.search(r"Elapsed time:\s*([0-9.eE+-]+)", text)
        elapsed = float(found.group(1)) if found else wall
        if "Validation PASS" in text:
            return "fit", elapsed
        if "NotFound" in text or "NOT_FOUND" in text:
            return "none", elapsed
        return "-", elapsed


def _ours(request: PlanRequest, order: str, seconds: float) -> tuple[str, float, int]:
    """The search's verdict at the capacity with one order, seconds and nodes."""
    g = build_graph(request, "none")
    nodes = node_budget(g, seconds)
    decide_orders(g, CAPACITY, (order,), 1)  # loads the kernel before the clock starts
    began = time.perf_counter()
    status, offsets, used = decide_orders(g, CAPACITY, (order,), nodes, began + seconds)
    wall = time.perf_counter() - began
    if status == FOUND:
        assert arena_of(g, offsets) <= CAPACITY
    return VERDICT.get(status, "-"), wall, used


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=["random-narrow", "random-wide"])
    parser.add_argument("--count", type=int, default=4, help="instances per family")
    parser.add_argument("--buffers", default="300-450", help="N or N-M buffers per instance")
    parser.add_argument("--seed", type=int, default=CHECK_SEED, help="first seed (held out)")
    parser.add_argument("--orders", nargs="+", default=["WAT", "TAW", "TWA"])
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per decision")
    parser.add_argument("--minimalloc", type=Path, default=MINIMALLOC)
    args = parser.parse_args(argv)
    lo, _, hi = args.buffers.partition("-")
    span = (int(lo), int(hi or lo))
    anchor = args.minimalloc if args.minimalloc.exists() else None
    head = f"{'instance':<24} {'order':<5} {'ours':>5} {'s':>7} {'nodes':>9}"
    print(head + (f" {'minimalloc':>10} {'s':>7}" if anchor else ""))
    for family in args.family or ["random-narrow", "random-wide"]:
        for inst in family_suite(family, args.count, span, args.seed):
            for order in args.orders:
                verdict, wall, used = _ours(inst.request, order, args.time_limit)
                row = f"{inst.name:<24} {order:<5} {verdict:>5} {wall:7.2f} {used:9d}"
                if anchor is not None:
                    theirs, elapsed = _minimalloc(anchor, inst.request, order, args.time_limit)
                    row += f" {theirs:>10} {elapsed:7.2f}"
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
