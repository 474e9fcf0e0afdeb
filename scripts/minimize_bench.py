"""Minimization: the planner's arena against MiniMalloc's ``--minimize_capacity`` height.

Plans each MiniMalloc CSV given (default: ``benchmarks/minimalloc/*.csv``) with the default
solver, with and without its capacity (the number in the file name, else ``--capacity``),
and runs MiniMalloc's CLI minimizing below that capacity with the same timeout. Prints one
row per instance: the lower bound, each arena (bytes), why the planner's search stopped
(``solver.stopped``) and seconds. MiniMalloc's columns are left out when its binary is not
there (``--minimalloc``, default ``../shared/tools/minimalloc/minimalloc``).

    $ python scripts/minimize_bench.py --time-limit 10
    $ python scripts/minimize_bench.py benchmarks/minimalloc/D.1048576.csv
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

import planner  # noqa: E402
from planner.core.csvio import load_request, with_overrides  # noqa: E402
from planner.pipeline.warm import ensure_warm  # noqa: E402

MINIMALLOC = next(
    (
        base / "shared" / "tools" / "minimalloc" / "minimalloc"
        for base in (ROOT.parent, ROOT.parent.parent)
        if (base / "shared" / "tools" / "minimalloc" / "minimalloc").exists()
    ),
    ROOT.parent / "shared" / "tools" / "minimalloc" / "minimalloc",
)
DEFAULT_CAPACITY = 1 << 20  # bytes, where the file name gives none


def _capacity(path: Path, default: int) -> int:
    """The capacity in a MiniMalloc file name (``D.1048576.csv``), else ``default``."""
    found = re.search(r"\.(\d+)\.csv$", path.name)
    return int(found.group(1)) if found else default


def _ours(path: Path, capacity: int | None, seconds: float) -> tuple[int, str, float]:
    """(arena bytes, why the search stopped, seconds) of the default plan."""
    request = with_overrides(load_request(str(path)), capacity=capacity, time_limit=seconds)
    began = time.perf_counter()
    plan = planner.plan(request)
    wall = time.perf_counter() - began
    assert planner.validate(request, plan).valid
    stopped = plan.solver.stopped + (" (cut)" if plan.solver.cut_by_clock else "")
    return plan.arena_bytes, stopped, wall


def _minimalloc(binary: Path, path: Path, capacity: int, seconds: float) -> tuple[str, float]:
    """MiniMalloc's minimized height (or ``-``) and its wall seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        run = subprocess.run(
            [
                str(binary),
                f"--capacity={capacity}",
                f"--input={path}",
                f"--output={Path(tmp, 'out.csv')}",
                f"--timeout={seconds}s",
                "--minimize_capacity",
                "--validate",
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 60,
        )
        wall = time.perf_counter() - began
        found = re.search(r"Validation PASS, height (\d+)", run.stdout + run.stderr)
        return (found.group(1) if found else "-"), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--capacity", type=int, default=DEFAULT_CAPACITY)
    parser.add_argument("--minimalloc", type=Path, default=MINIMALLOC)
    args = parser.parse_args(argv)
    paths = args.paths or sorted((ROOT / "benchmarks" / "minimalloc").glob("*.1048576.csv"))
    anchor = args.minimalloc if args.minimalloc.exists() else None
    ensure_warm(planner.plan)
    head = f"{'instance':<12} {'bound':>9} {'cap arena':>9} {'stopped':>16} {'s':>6}"
    head += f" {'free arena':>10} {'stopped':>16} {'s':>6}"
    print(head + (f" {'minimalloc':>10} {'s':>6}" if anchor else ""))
    for path in paths:
        capacity = _capacity(path, args.capacity)
        bound = planner.plan(str(path), solver="greedy", time_limit=args.time_limit).lower_bound
        capped = _ours(path, capacity, args.time_limit)
        free = _ours(path, None, args.time_limit)
        row = f"{path.stem:<12} {bound:>9} {capped[0]:>9} {capped[1]:>16} {capped[2]:6.1f}"
        row += f" {free[0]:>10} {free[1]:>16} {free[2]:6.1f}"
        if anchor is not None:
            height, wall = _minimalloc(anchor, path, capacity, args.time_limit)
            row += f" {height:>10} {wall:6.1f}"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
