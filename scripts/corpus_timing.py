"""CPU time per request of the determinism corpus (tests/support/corpus.py), and two runs side
by side: what a change to the planner costs or saves, request by request.

    python scripts/corpus_timing.py --runs 3 --save before.json      # on one tree
    python scripts/corpus_timing.py --runs 3 --save after.json       # on the other
    python scripts/corpus_timing.py --compare before.json after.json

Each request is planned ``--runs`` times in one warmed process (compiled kernels loaded, as in
the service); a request's figure is the median of its runs' CPU time (this process's, which a
busy machine's wall time hides). The comparison prints, per group of the corpus, the summed
medians before and after and their ratio, and the requests whose ratio is furthest from 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner  # noqa: E402
from planner.pipeline.warm import ensure_warm  # noqa: E402
from tests.support.corpus import corpus  # noqa: E402

WORST = 8  # requests listed, furthest from a ratio of 1
FLOOR_MS = 1.0  # requests under this CPU time on both sides are left out of the worst list


def measure(runs: int) -> dict[str, float]:
    """Milliseconds of CPU per request: the median of ``runs`` plans."""
    ensure_warm(planner.plan)
    out: dict[str, float] = {}
    for name, request in corpus():
        spent: list[float] = []
        for _ in range(runs):
            began = time.process_time()
            planner.plan(request)
            spent.append(time.process_time() - began)
        out[name] = 1000 * statistics.median(spent)
    return out


def _group(name: str) -> str:
    head = name.split("-")[0]
    return "example" if head == "example" else head


def compare(before: dict[str, float], after: dict[str, float]) -> None:
    names = sorted(set(before) & set(after))
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(_group(n), []).append(n)
    print("| group | requests | before ms (sum of medians) | after ms | after / before |")
    print("|---|---|---|---|---|")
    for g, members in sorted(groups.items()):
        b = sum(before[n] for n in members)
        a = sum(after[n] for n in members)
        print(f"| {g} | {len(members)} | {b:.0f} | {a:.0f} | {a / b:.2f} |")
    b = sum(before[n] for n in names)
    a = sum(after[n] for n in names)
    print(f"| all | {len(names)} | {b:.0f} | {a:.0f} | {a / b:.2f} |")
    ratios = [
        (after[n] / before[n], n)
        for n in names
        if max(before[n], after[n]) >= FLOOR_MS and before[n] > 0
    ]
    ratios.sort(key=lambda r: -abs(r[0] - 1))
    print(f"\nfurthest from 1 (of requests over {FLOOR_MS:g} ms):")
    for r, n in ratios[:WORST]:
        print(f"  {n}: {before[n]:.1f} -> {after[n]:.1f} ms ({r:.2f})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--save", type=Path, help="write the figures as JSON here")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        compare(before, after)
        return 0
    figures = measure(args.runs)
    if args.save:
        args.save.write_text(json.dumps(figures, indent=1, sort_keys=True))
    print(f"{len(figures)} requests, {sum(figures.values()):.0f} ms of CPU (sum of medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
