"""Regenerates the measured blocks of the documentation: each runs its command again.

A measured block in a page under docs/ is

    <!-- measured: COMMAND -->
    ...
    <!-- /measured -->

and holds exactly what COMMAND printed, with the date, the machine and its load. Figures on
the pages come only from such blocks, so two of them cannot disagree about one run.

    python scripts/docs_tables.py                    # every block of docs/benchmarks.md
    python scripts/docs_tables.py --only minimalloc  # blocks whose command contains the text
    python scripts/docs_tables.py --check            # every block is dated; runs nothing
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- measured: (?P<command>.+?) -->\n(?P<body>.*?)<!-- /measured -->\n", re.S)
DATED = re.compile(r"^\*Measured \d{4}-\d{2}-\d{2}, ", re.M)


def blocks(text: str) -> list[re.Match[str]]:
    """The measured blocks of a page, in order."""
    return list(BLOCK.finditer(text))


def undated(text: str) -> list[str]:
    """The commands of blocks that carry no date line."""
    return [m["command"] for m in blocks(text) if not DATED.search(m["body"])]


def machine() -> str:
    """One line on where a figure was measured."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores} cores ({platform.machine()}), load average {load:.1f}"


def run(command: str, timeout: float) -> str:
    """What the command prints, stdout then stderr, as a console transcript."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        command,
        shell=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    printed = (done.stdout + done.stderr).rstrip()
    return f"```console\n$ {command}\n{printed}\n```\n"


def regenerate(text: str, only: str | None, timeout: float) -> str:
    """The page with each chosen block run again."""

    def one(m: re.Match[str]) -> str:
        if only is not None and only not in m["command"]:
            return m[0]
        stamp = f"*Measured {datetime.date.today().isoformat()}, {machine()}.*\n"
        body = run(m["command"], timeout)
        return f"<!-- measured: {m['command']} -->\n{body}\n{stamp}<!-- /measured -->\n"

    return BLOCK.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--only", help="run only blocks whose command contains this text")
    parser.add_argument("--check", action="store_true", help="check every block is dated")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    args = parser.parse_args(argv)
    text = args.page.read_text()
    if args.check:
        missing = undated(text)
        for command in missing:
            print(f"undated block: {command}", file=sys.stderr)
        return 1 if missing else 0
    args.page.write_text(regenerate(text, args.only, args.timeout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
