"""The solver pool's worker processes never outlive the server that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

SERVER = """
import asyncio, os, sys
from api.pool import SolverPool

async def main():
    pool = SolverPool(1, 0, "processes")
    print(await pool.run(60, os.getpid), flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (a reparented process may stay unreaped in a container)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def test_workers_exit_when_the_server_is_killed() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
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
