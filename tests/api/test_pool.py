"""The solver pool's worker processes never outlive the server that started them."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.event_loops import LOOPS, loop_factory
from tests.support.paths import ROOT

ROOT = ROOT
pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

SERVER = """
import asyncio, os, sys
from planner.api.pool import SolverPool
from tests.support.event_loops import loop_factory

async def main():
    pool = SolverPool(1, 0, "processes")
    print(await pool.run(60, os.getpid), flush=True)
    await asyncio.sleep(120)

with asyncio.Runner(loop_factory=loop_factory(sys.argv[1])) as runner:
    runner.run(main())
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (a reparented process may stay unreaped in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.parametrize("loop", LOOPS)
def test_workers_exit_when_the_server_is_killed(loop: str) -> None:
    loop_factory(loop)  # skips where the loop is not installed
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, loop], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert server.stdout is not None
        worker = int(server.stdout.readline())
        assert worker != server.pid
        assert _running(worker)
        server.send_signal(signal.SIGKILL)  # no chance to stop its workers
        server.wait(10)
        give_up = time.monotonic() + 10
        while _running(worker) and time.monotonic() < give_up:
            time.sleep(0.1)
        assert not _running(worker), f"worker {worker} outlived its server"
    finally:
        server.kill()
        server.wait()
