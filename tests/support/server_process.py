"""The service as production runs it: ``planner serve`` in a process of its own, on a free
port of 127.0.0.1, with a chosen event loop; stopped (and its workers with it) at the end."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.paths import ROOT

__all__ = ["ServerProcess", "free_port", "running_server"]

ROOT = ROOT
HOST = "127.0.0.1"
START_SECONDS = 180.0  # a cold start compiles the planner's kernels
PORT_TRIES = 3


@dataclass
class ServerProcess:
    """A running server: its process, its address, and a client for it."""

    process: subprocess.Popen[bytes]
    loop: str
    url: str
    client: httpx.Client
    log: Path

    def solver_pids(self) -> list[int]:
        """The server's solver processes (its spawned children, not the resource tracker)."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.process.pid and b"spawn_main" in cmdline:
                pids.append(int(entry.name))
        return sorted(pids)

    def admitted(self) -> float:
        """The pool's jobs running or waiting, from ``/metrics``."""
        for line in self.client.get("/metrics").text.splitlines():
            if line.startswith("planner_pool_admitted "):
                return float(line.split()[1])
        raise AssertionError("/metrics has no planner_pool_admitted")

    def tail(self) -> str:
        """The end of the server's log, for a failing test's message."""
        return self.log.read_text(errors="replace")[-4000:]


def free_port() -> int:
    """A free TCP port on the loopback address."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


class _PortTakenError(RuntimeError):
    """The server could not bind its port: another process took it after ``free_port``."""


@contextlib.contextmanager
def running_server(loop: str, **settings: str) -> Iterator[ServerProcess]:
    """``planner serve --loop LOOP`` of this tree on a free port; ``settings`` become
    ``PLANNER_<NAME>`` variables. Waits for ``/healthz``; kills the server at the end. A port
    taken between ``free_port`` and the server's bind (tests run in several processes at
    once) is replaced by another, up to ``PORT_TRIES`` times."""
    for attempt in range(1, PORT_TRIES + 1):
        try:
            with _started(loop, settings) as server:
                yield server
                return
        except _PortTakenError:
            if attempt == PORT_TRIES:
                raise


@contextlib.contextmanager
def _started(loop: str, settings: dict[str, str]) -> Iterator[ServerProcess]:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PLANNER_ACCESS_LOG": "false",
        **{f"PLANNER_{k.upper()}": v for k, v in settings.items()},
    }
    command = [sys.executable, "-m", "planner.cli", "serve"]
    command += ["--host", HOST, "--port", str(port), "--loop", loop]
    with tempfile.NamedTemporaryFile("wb", prefix="planner-serve-", suffix=".log") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=ROOT)
        url = f"http://{HOST}:{port}"
        # Every body this client sends is JSON; the service refuses any other type (415).
        headers = {"content-type": "application/json"}
        client = httpx.Client(base_url=url, timeout=120, headers=headers)
        server = ServerProcess(process, loop, url, client, Path(log.name))
        try:
            _wait_ready(server)
            yield server
        finally:
            client.close()
            workers = server.solver_pids()
            process.send_signal(signal.SIGINT)  # uvicorn's clean stop: the pool shuts down
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for pid in workers:  # their parent-watch ends them anyway; do not wait for it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _wait_ready(server: ServerProcess) -> None:
    give_up = time.monotonic() + START_SECONDS
    while time.monotonic() < give_up:
        if server.process.poll() is not None:
            message = f"the server exited ({server.process.returncode}):\n{server.tail()}"
            if "address already in use" in message.lower():
                raise _PortTakenError(message)
            raise RuntimeError(message)
        with contextlib.suppress(httpx.HTTPError):
            if server.client.get("/healthz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"no answer on /healthz within {START_SECONDS:g} s:\n{server.tail()}")
