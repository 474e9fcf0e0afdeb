"""The bridges' measured table (docs/bridges.md, Measured): every IREE dispatch and Triton kernel
of the tests, compiled here, with the compiler's bytes and barriers beside ours.

    python scripts/bridges_table.py            # IREE and Triton
    python scripts/bridges_table.py --iree     # IREE only
    python scripts/bridges_table.py --triton   # Triton only (with --autotune: every config)

"bridge s" is the time the bridge adds (read, plan, rewrite or check with the static validator,
verify, read back; for Triton, ``compile_and_check``: what the capture adds inside the compile,
timed there, and then putting Triton's plan back on the structured form, reading, judging and
planning), the median of three runs in a process that has loaded the planner and the
compiler's bindings (that one-off load is timed apart and printed under the table); "compile
s" the compiler's own time for the kernel: ``iree-compile`` to a ``.vmfb``, or
``triton.compile`` without the capture and not from its cache (the median of three, taking
turns with the three compiles with the capture); "emulator s" what the emulator's
check of the same plans adds (the bridges' default, optional), the median of three too. For
Triton, "of which in the compile s" is the capture's share of "bridge s", and "from the
compiled kernel s" what ``check_compiled`` takes instead (Triton's passes run again on the
TTGIR a compiled kernel keeps). Needs the ``mlir`` and ``triton`` extras.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_HEAD = (
    "| compiler | target | kernel | buffers | compiler bytes | compiler barriers | ours bytes "
    "| ours barriers (+inserted) | lower bound | bridge s | of which in the compile s "
    "| compile s | bridge / compile | emulator s | from the compiled kernel s |"
)


_RUNS = 3


def _share(bridge: float, compile_s: float) -> str:
    return f"{100 * bridge / compile_s:.0f}%" if compile_s > 0 else "-"


def _median(run: Callable[[], object]) -> float:
    """The median wall time of ``_RUNS`` calls of ``run``, in seconds."""
    times = []
    for _ in range(_RUNS):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _first_call(run: Callable[[], object]) -> float:
    """The time of one call in a process that has not made one: loading included."""
    began = time.perf_counter()
    run()
    return time.perf_counter() - began


def iree_rows(loads: list[str]) -> list[str]:
    """One row per IREE dispatch and target; the first call's load time goes to ``loads``."""
    from planner.bridges.mlir import check_module, plan_module
    from tests.support.iree_dispatches import COMPILE, DISPATCHES, SOURCES, TARGETS
    from tests.support.iree_dispatches import compile_dispatch as dump_of

    chips = {"cuda": "sm_80", "rocm": "gfx942"}
    rows = []
    for target, name in DISPATCHES:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            dump, exported = dump_of(SOURCES[name], TARGETS[target], folder)
            began = time.perf_counter()
            subprocess.run(
                [str(COMPILE), str(folder / "in.mlir"), *TARGETS[target], "-o", str(folder / "x")],
                check=True,
                capture_output=True,
            )
            compile_s = time.perf_counter() - began

        def bridge_run(dump: str = dump) -> None:
            result = plan_module(dump, time_limit=2.0)
            check_module(result.module, emulation=False)

        if not loads:
            loads.append(f"IREE {_first_call(bridge_run):.2f} s")
        bridge = _median(bridge_run)
        result = plan_module(dump, time_limit=2.0)
        checks = check_module(result.module)  # the read-back, judged by the emulator too
        emulator_s = max(
            0.0,
            _median(functools.partial(check_module, result.module))
            - _median(functools.partial(check_module, result.module, emulation=False)),
        )
        (k,) = result.kernels
        valid = all(c.verdict is not None and c.verdict.valid for c in checks)
        if k.status != "rewritten":
            rows.append(
                f"| IREE | {chips[target]} | {name} | - | - | - | {k.reason} | | | | | | | | |"
            )
            continue
        iree = f"{exported}" if exported is not None else f"{k.compiler_bytes} (allocs)"
        ours = f"{k.arena_bytes}" + ("" if valid else " INVALID")
        barriers = f"{k.barriers_existing + k.barriers_inserted} (+{k.barriers_inserted})"
        rows.append(
            f"| IREE | {chips[target]} | {name} | {k.buffers} | {iree} | {k.barriers_existing} "
            f"| {ours} | {barriers} | {k.lower_bound} | {bridge:.2f} | - | {compile_s:.2f} "
            f"| {_share(bridge, compile_s)} | {emulator_s:.2f} | - |"
        )
    return rows


def _compiles(build: Callable[[], Any], runs: int) -> tuple[Any, float, list[Any]]:
    """``runs`` compiles of one kernel without the capture and ``runs`` with it, taking turns,
    none from Triton's cache: the kernel, the median time of those without, and what those
    with it captured."""
    from triton import knobs

    from planner.bridges.triton import capturing

    times: list[float] = []
    captured: list[Any] = []
    kernel = None
    with knobs.compilation.scope():
        knobs.compilation.always_compile = True
        for _ in range(runs):
            began = time.perf_counter()
            kernel = build()
            times.append(time.perf_counter() - began)
            with capturing() as one:
                build()
            captured += one
    return kernel, statistics.median(times), captured


def _bridge_seconds(captured: list[Any], *, emulation: bool) -> tuple[float, float]:
    """The median of (capture in the compile + check after it) over the captures, and the
    median of the capture's share, in seconds."""
    from planner.bridges.triton import check_captured

    totals = []
    for one in captured:
        began = time.perf_counter()
        check_captured(one, time_limit=2.0, emulation=emulation)
        totals.append(one.seconds + time.perf_counter() - began)
    return statistics.median(totals), statistics.median(c.seconds for c in captured)


def _triton_row(label: str, cap: int, build: Callable[[], Any], loads: list[str]) -> str:
    from planner.bridges.triton import check_captured, check_compiled

    kernel, compile_s, captured = _compiles(build, _RUNS)
    if not loads:
        loads.append(
            f"Triton {_first_call(lambda: check_captured(captured[0], emulation=False)):.2f} s"
        )
    report = check_captured(captured[0], time_limit=2.0, emulation=False)
    emulated = check_captured(captured[0], time_limit=2.0)  # the same, with the emulator
    bridge, in_compile = _bridge_seconds(captured, emulation=False)
    emulator_s = max(0.0, _bridge_seconds(captured, emulation=True)[0] - bridge)
    again = _median(lambda: check_compiled(kernel, time_limit=2.0, emulation=False))
    if not report.modeled:
        return (
            f"| Triton | sm_{cap} | {label} | - | {kernel.metadata.shared} | - "
            f"| not modelled: {report.reason} | | | | | {compile_s:.2f} | | | |"
        )
    verdict = emulated.triton_verdict
    judged = "valid" if verdict is not None and verdict.valid else "INVALID"
    fallback = " (passes run again)" if any("run again" in n for n in report.notes) else ""
    return (
        f"| Triton | sm_{cap} | {label} | {report.buffers} | {report.triton_bytes} ({judged}) "
        f"| {report.triton_barriers} | {report.ours_bytes} "
        f"| {report.triton_barriers + (report.ours_inserted or 0)} (+{report.ours_inserted}); "
        f"alone {report.alone_bytes} B, {report.alone_barriers} | {report.lower_bound} "
        f"| {bridge:.2f}{fallback} | {in_compile:.2f} | {compile_s:.2f} "
        f"| {_share(bridge, compile_s)} | {emulator_s:.2f} | {again:.2f} |"
    )


def triton_rows(autotune: bool, loads: list[str]) -> list[str]:
    """One row per Triton kernel and target, each compiled afresh; the first call's load time
    goes to ``loads``."""
    from tests.support.triton_kernels import AUTOTUNE, CASES, compile_autotuned, compile_kernel

    rows = []
    jobs: list[tuple[str, int, Any]] = [
        (name, cap, lambda n=name, c=cap: compile_kernel(n, c)) for name, cap in CASES
    ]
    if autotune:
        jobs += [
            (
                "matmul " + "x".join(map(str, config[:3])) + f" s{config[3]} w{config[4]}",
                cap,
                lambda g=config, c=cap: compile_autotuned(g, c),
            )
            for cap in (80, 90)
            for config in AUTOTUNE
        ]
    for label, cap, build in jobs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows.append(_triton_row(label, cap, build, loads))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iree", action="store_true", help="IREE's dispatches only")
    parser.add_argument("--triton", action="store_true", help="Triton's kernels only")
    parser.add_argument("--autotune", action="store_true", help="every matmul autotune config")
    args = parser.parse_args(argv)
    both = not args.iree and not args.triton
    print(_HEAD)
    print("|" + "---|" * 15)
    iree_load: list[str] = []
    triton_load: list[str] = []
    if args.iree or both:
        for row in iree_rows(iree_load):
            print(row, flush=True)
    if args.triton or both:
        # A cold compile: Triton's cache in an empty folder of its own.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")
        for row in triton_rows(args.autotune, triton_load):
            print(row, flush=True)
    print()
    print(
        "first call in a process (loading the planner and the bindings, then the first row): "
        + ", ".join(iree_load + triton_load)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
