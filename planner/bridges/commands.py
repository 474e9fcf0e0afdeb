"""``planner mlir`` and ``planner triton`` on the command line.

``planner mlir FILE``: the rewritten module on stdout (or ``-o``), one line per kernel on
stderr; ``--check`` judges a module whose buffers are already placed instead. ``planner
triton FILE --target sm_80``: one line per kernel, Triton's plan beside ours. Exit codes as
the other commands: 0 done, 1 a plan the validators reject, 2 bad input or a missing extra
(one line naming it)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from planner.cli_errors import fail
from planner.core.errors import MissingExtraError, RequestError

__all__ = ["add_parsers", "mlir_command", "triton_command"]

EXIT_OK = 0
EXIT_FAILED = 1


def add_parsers(sub: argparse._SubParsersAction[Any]) -> None:
    m = sub.add_parser(
        "mlir",
        help="plan the workgroup buffers of an MLIR module and rewrite it (extra [mlir])",
    )
    m.add_argument("module", metavar="FILE", help="MLIR text or bytecode; - for stdin")
    m.add_argument("-o", "--output", metavar="OUT", help="write the module here (default stdout)")
    m.add_argument(
        "--target", metavar="SM", help="device profile, e.g. sm_80 (default: the module's)"
    )
    m.add_argument(
        "--time-limit",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds per kernel's plan (default 5)",
    )
    m.add_argument("--bytecode", action="store_true", help="write MLIR bytecode, not text")
    m.add_argument(
        "--check",
        action="store_true",
        help="judge the placed buffers of a rewritten module instead of planning",
    )
    m.add_argument(
        "--json",
        action="store_true",
        help="print each kernel's request and plan as JSON, not the module",
    )
    t = sub.add_parser(
        "triton",
        help="check Triton's shared-memory plan of a TTGIR file and plan it too (extra [triton])",
    )
    t.add_argument("ttgir", metavar="FILE", help="TTGIR as Triton prints it (asm['ttgir'])")
    t.add_argument("--target", required=True, metavar="SM", help="CUDA target, e.g. sm_80")
    t.add_argument(
        "--time-limit",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds for our plan (default 5)",
    )
    t.add_argument("--no-emulate", action="store_true", help="the static check only")
    t.add_argument("--json", action="store_true", help="print the reports as JSON")


def _read(path: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise RequestError.field(
            ("file",), f"{path}: cannot read: {exc.strerror or exc}", "unreadable", path
        ) from None


def _source(data: bytes) -> str | bytes:
    if data.startswith(b"ML\xefR"):  # MLIR bytecode
        return data
    return data.decode("utf-8")


def mlir_command(args: argparse.Namespace) -> int:
    try:
        data = _read(args.module)
        if args.check:
            return _check(data, args)
        from planner.bridges.mlir import plan_module

        result = plan_module(
            _source(data), target=args.target, time_limit=args.time_limit, bytecode=args.bytecode
        )
    except MissingExtraError as exc:
        return fail(str(exc))
    except RequestError as exc:
        return fail(f"{args.module}: {exc.summary()}")
    for k in result.kernels:
        if k.status == "rewritten":
            added = f"{k.barriers_inserted} barrier{'' if k.barriers_inserted == 1 else 's'}"
            print(
                f"@{k.name}: {k.buffers} buffers, {k.compiler_bytes} B allocated -> arena "
                f"{k.arena_bytes} B (lower bound {k.lower_bound} B), {added} added",
                file=sys.stderr,
            )
        elif k.status == "skipped":
            print(f"@{k.name}: left as it was: {k.reason}", file=sys.stderr)
    print(f"bridge: {result.seconds * 1000:.0f} ms", file=sys.stderr)
    if args.json:
        text = json.dumps([k.as_dict() for k in result.kernels], indent=2) + "\n"
        _write(args.output, text.encode())
    else:
        text = result.module if result.module.endswith("\n") else result.module + "\n"
        out = result.bytecode if result.bytecode is not None else text.encode()
        _write(args.output, out)
    return EXIT_OK


def _check(data: bytes, args: argparse.Namespace) -> int:
    from planner.bridges.mlir import check_module

    checks = check_module(_source(data), target=args.target)
    valid = True
    for c in checks:
        if c.verdict is None:
            print(f"@{c.name}: not judged: {c.reason}", file=sys.stderr)
            continue
        valid &= c.verdict.valid
        state = "valid" if c.verdict.valid else "INVALID"
        print(f"@{c.name}: {state}, {c.buffers} buffers in {c.arena_bytes} B", file=sys.stderr)
        for line in c.verdict.static + c.verdict.emulated:
            print(f"  {line}", file=sys.stderr)
    return EXIT_OK if valid else EXIT_FAILED


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _write(path: str | None, data: bytes) -> None:
    if path is None or path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    Path(path).write_bytes(data)


def triton_command(args: argparse.Namespace) -> int:
    try:
        from planner.bridges.triton import check_ttgir

        text = _read(args.ttgir).decode("utf-8")
        report = check_ttgir(
            text, args.target, time_limit=args.time_limit, emulation=not args.no_emulate
        )
    except MissingExtraError as exc:
        return fail(str(exc))
    except RequestError as exc:
        return fail(f"{args.ttgir}: {exc.summary()}")
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    elif not report.modeled:
        print(f"@{report.name}: not modelled: {report.reason}")
    else:
        verdict = report.triton_verdict
        state = "valid" if verdict is not None and verdict.valid else "INVALID"
        print(
            f"@{report.name} ({report.target}): {report.buffers} buffers; Triton "
            f"{report.triton_bytes} B, {_count(report.triton_barriers, 'barrier')}, {state}; ours "
            f"{report.ours_bytes} B (+{report.ours_inserted} barriers), lower bound "
            f"{report.lower_bound} B; {report.seconds * 1000:.0f} ms"
        )
        if verdict is not None:
            for line in verdict.static + verdict.emulated:
                print(f"  {line}")
        for note in report.notes:
            print(f"  note: {note}")
    if report.triton_verdict is not None and not report.triton_verdict.valid:
        return EXIT_FAILED
    return EXIT_OK
