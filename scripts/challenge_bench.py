"""The challenging family's shape, side by side with MiniMalloc: per order and as a whole.

Generates ``--count`` instances of ``random-narrow`` and ``random-wide`` in turn
(``planner.families``: 300-450 buffers, sizes and lifetimes on a 1024-byte grid, the peak
of live bytes at the capacity of 1048576 bytes) from ``--seed`` on. The default seeds,
7000 on, were never used to tune anything. Each instance is decided at the capacity:

- per order (WAT, TAW, TWA): the search's canonical kernel with that order alone, on the
  node budget ``--time-limit`` buys, and MiniMalloc's CLI with
  ``--preordering_heuristics=ORDER`` and that timeout;
- as a whole: ``planner.plan`` (the default portfolio, ``time_limit`` set) and MiniMalloc
  with its default orders (WAT, TAW and TWA in turns).

Prints one row per instance (verdict ``fit``: a plan within the capacity, ``none``: proved
that nothing fits, ``-``: undecided; then seconds), then a summary: per column, how many
instances each decided, how many MiniMalloc decided that ours did not, and the median of
our time over MiniMalloc's on the instances both decided.

    $ python scripts/challenge_bench.py --count 100 --time-limit 10
    $ python scripts/challenge_bench.py --count 10 --orders TWA
    $ python scripts/challenge_bench.py --count 100 --orders        # the default plan only
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minimize_bench import MINIMALLOC  # noqa: E402  (beside this script)
from orders_bench import _minimalloc, _ours  # noqa: E402

from planner import plan  # noqa: E402
from planner.core.models import PlanRequest  # noqa: E402
from planner.families import family_instance  # noqa: E402

FAMILIES = ("random-narrow", "random-wide")
FIRST_SEED = 7_000  # never used for tuning
DEFAULT = "WAT,TAW,TWA"  # MiniMalloc's default orders, in turns


def _planned(request: PlanRequest, seconds: float) -> tuple[str, float]:
    """The default plan's verdict at the capacity, and its seconds."""
    asked = request.model_copy(
        update={"options": request.options.model_copy(update={"time_limit": seconds})}
    )
    began = time.perf_counter()
    result = plan(asked)
    wall = time.perf_counter() - began
    verdict = {"optimal": "fit", "feasible": "fit", "infeasible": "none"}.get(result.status, "-")
    return verdict, wall


def _instances(count: int, span: tuple[int, int], seed: int) -> list[tuple[str, PlanRequest]]:
    """``count`` instances, families in turn, the k-th with seed ``seed + k``; buffer counts
    drawn from ``span`` by a generator of ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        family = FAMILIES[k % len(FAMILIES)]
        n = int(rng.integers(span[0], span[1], endpoint=True))
        inst = family_instance(family, n, seed + k)
        out.append((inst.name, inst.request))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="instances, families in turn")
    parser.add_argument("--buffers", default="300-450", help="N or N-M buffers per instance")
    parser.add_argument("--seed", type=int, default=FIRST_SEED, help="first seed")
    parser.add_argument(
        "--orders", nargs="*", default=["WAT", "TAW", "TWA"], help="none: default only"
    )
    parser.add_argument("--no-default", action="store_true", help="per order only")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per decision")
    parser.add_argument("--minimalloc", type=Path, default=MINIMALLOC)
    args = parser.parse_args(argv)
    lo, _, hi = args.buffers.partition("-")
    span = (int(lo), int(hi or lo))
    if not args.minimalloc.exists():
        print(f"MiniMalloc's binary is not at {args.minimalloc}", file=sys.stderr)
        return 2
    columns = list(args.orders) + ([] if args.no_default else ["default"])
    results: dict[str, list[tuple[str, float, str, float]]] = {c: [] for c in columns}
    instances = _instances(args.count, span, args.seed)
    if instances and not args.no_default:
        _planned(instances[0][1], 0.5)  # compiles the pipeline's kernels before any clock
    print(f"{'instance':<26}" + "".join(f" {c + ' ours':>14} {'minimalloc':>15}" for c in columns))
    for name, request in instances:
        row = f"{name:<26}"
        for column in columns:
            if column == "default":
                ours, wall = _planned(request, args.time_limit)
                theirs, elapsed = _minimalloc(args.minimalloc, request, DEFAULT, args.time_limit)
            else:
                ours, wall, _ = _ours(request, column, args.time_limit)
                theirs, elapsed = _minimalloc(args.minimalloc, request, column, args.time_limit)
            results[column].append((ours, wall, theirs, elapsed))
            row += f" {ours:>5} {wall:8.2f} {theirs:>6} {elapsed:8.2f}"
        print(row, flush=True)
    print()
    print(f"{'column':<8} {'ours':>5} {'minimalloc':>10} {'missed':>6} {'median ours/mm':>14}")
    for column in columns:
        rows = results[column]
        ours_n = sum(r[0] != "-" for r in rows)
        theirs_n = sum(r[2] != "-" for r in rows)
        missed = sum(r[2] != "-" and r[0] == "-" for r in rows)
        ratios = [r[1] / max(r[3], 1e-3) for r in rows if r[0] != "-" and r[2] != "-"]
        median = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"{column:<8} {ours_n:>5} {theirs_n:>10} {missed:>6} {median:>14}")
    print(
        f"\n{args.count} instances, seeds {args.seed}-{args.seed + args.count - 1}, "
        f"{args.buffers} buffers, time limit {args.time_limit:g} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
