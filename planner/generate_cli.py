"""``planner generate``: requests to try the planner on without writing Python: random
lifetimes, kernel-sized requests, kernels with loops and a branch, and the benchmark
families; one to stdout, or a corpus of files in a directory."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from planner.cli_errors import fail
from planner.core.errors import RequestError
from planner.core.models import PlanRequest

__all__ = ["KINDS", "command", "generated"]

# What each kind makes from (buffers, seed); families also take the family's name.
KINDS = ("random", "kernel", "program", "family")


def _maker(args: argparse.Namespace) -> Callable[[int], PlanRequest]:
    """A request per seed, for the arguments' kind."""
    from planner import generate

    n = args.buffers
    if args.kind == "random":
        return lambda seed: generate.random_request(n, overlap=args.overlap, seed=seed)
    if args.kind == "kernel":
        return lambda seed: generate.random_kernel(seed, max_buffers=max(n, 16))
    if args.kind == "program":
        return lambda seed: generate.random_program(n, seed=seed, sync=args.sync or "insert")
    from planner.families import family_instance

    return lambda seed: family_instance(args.family, n, seed).request


def generated(args: argparse.Namespace) -> list[PlanRequest]:
    """The ``--count`` requests of seeds ``--seed``, ``--seed + 1``, ...; raises ValueError
    or RequestError for bad arguments."""
    make = _maker(args)
    return [make(args.seed + k) for k in range(args.count)]


def command(args: argparse.Namespace) -> int:
    """Run ``planner generate``: one request to stdout (or ``-o FILE``), or ``--count`` of
    them as NAME.json files in the directory ``-o DIR``."""
    if args.kind == "family" and args.family is None:
        return fail("generate family: give --family NAME")
    if args.count > 1 and args.output is None:
        return fail("--count: give -o DIR, the directory to write the files in")
    try:
        requests = generated(args)
    except (ValueError, RequestError) as exc:
        return fail(str(exc))
    if args.count == 1 and (args.output is None or args.output == "-"):
        sys.stdout.write(requests[0].model_dump_json(indent=2) + "\n")
        return 0
    if args.count == 1 and not Path(args.output).is_dir():
        Path(args.output).write_text(requests[0].model_dump_json(indent=2) + "\n")
        return 0
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    for request in requests:
        (folder / f"{request.name}.json").write_text(request.model_dump_json(indent=2) + "\n")
    print(f"wrote {len(requests)} requests to {folder}", file=sys.stderr)
    return 0
