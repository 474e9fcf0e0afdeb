"""Long work shows its time on a terminal, and nothing when piped."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time

from planner.ticker import Ticker
from tests.support.paths import ROOT

ROOT = ROOT


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_time_and_then_a_cleared_line() -> None:
    term = _Terminal()
    with Ticker(term, "planning k (3 buffers)", 10.0, first_after=0.0, every=0.01):
        time.sleep(0.1)
    text = term.getvalue()
    assert "planning k (3 buffers): 0." in text
    assert " s of 10 s" in text
    assert text.endswith("\r\x1b[K")


def test_short_work_shows_nothing() -> None:
    term = _Terminal()
    with Ticker(term, "planning k", 10.0, first_after=5.0):
        pass
    assert term.getvalue() == ""


def test_a_pipe_gets_nothing() -> None:
    piped = io.StringIO()
    with Ticker(piped, "planning k", 10.0, first_after=0.0, every=0.01):
        time.sleep(0.05)
    assert piped.getvalue() == ""


def _slow_plan(stderr: int) -> subprocess.Popen[bytes]:
    csv = ROOT / "benchmarks" / "minimalloc" / "D.1048576.csv"
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "planner",
            "plan",
            str(csv),
            "--capacity",
            "1048576",
            "--time-limit",
            "1",
            "-o",
            os.devnull,
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        cwd=ROOT,
    )


def test_planner_plan_shows_progress_on_a_pseudo_terminal_and_none_when_piped() -> None:
    leader, follower = pty.openpty()
    proc = _slow_plan(follower)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(60) in (0, 1)
    assert b"planning D.1048576 (213 buffers): " in seen
    assert b" s of 1 s" in seen
    assert b"D.1048576: " in seen  # the summary line follows the cleared progress line

    piped = _slow_plan(subprocess.PIPE)
    _, err = piped.communicate(timeout=60)
    assert b"planning D.1048576" not in err
    assert b"D.1048576: " in err
