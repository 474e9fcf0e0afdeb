"""Load test of the planning service on loopback: latency percentiles, throughput, errors.

    python scripts/load.py                      # the three targets below, on a fresh server
    python scripts/load.py rate --rate 200 --duration 30 --buffers 32
    python scripts/load.py burst --concurrency 1000
    python scripts/load.py cached --duration 10 --connections 8
    python scripts/load.py mixed --rate 200 --duration 30 --mix 32:395,300:4,3000:1
    python scripts/load.py rate --port 8000     # an already running server on 127.0.0.1

Without ``--port`` it starts ``python -m planner.api`` on a free port of 127.0.0.1 (settings
from the usual ``PLANNER_*`` variables) and stops it at the end. ``--warmup`` requests (100) go
first, one at a time and unmeasured. Every run is bounded: at most ``MAX_REQUESTS`` requests and
``MAX_SECONDS`` seconds per scenario, whatever the arguments.

Scenarios:
  rate    open loop: distinct requests sent at a fixed rate whatever the answers' pace;
          latency counts from the scheduled send time, so a stall is not hidden.
  burst   ``--concurrency`` requests sent at once, one connection each: every one must be
          answered, 200 or 503 (with Retry-After), none lost.
  cached  closed loop: ``--connections`` keep-alive connections repeating one request.
  mixed   open loop as ``rate``, request sizes drawn by ``--mix`` weights (mostly small
          kernels, now and then a request of thousands of buffers): p50/p99 and statuses per
          size, and the smallest size's latency while a request of the largest is in flight.
          The larger requests are wide and sparse (``random_request`` defaults, ~110 bytes a
          buffer) with a time limit of 1 s, or twice the least the service accepts for their
          size (100 us a buffer: 30 000 buffers get 6 s): at 200/s the default mix sends a
          3000-buffer request (330 KB) every 2 s and a 300-buffer one every 0.5 s.
  all     the three with the targets below; exit status 1 if one is missed.

Targets (2-core machine): rate 200/s of 32-buffer requests for 30 s with p50 < 5 ms,
p99 < 25 ms and no error; a burst of 1000 with none lost; cached repeats > 1000/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from planner.core.budget import FIXED_SECONDS_PER_BUFFER
from planner.generate import random_request

HOST = "127.0.0.1"  # loopback only
MAX_REQUESTS = 200_000
MAX_SECONDS = 120.0  # per scenario
READ_TIMEOUT = 60.0  # s, one answer
LARGE_TIME_LIMIT = 1.0  # s, options.time_limit of the mixed scenario's larger requests...


def large_time_limit(buffers: int) -> float:
    """...or twice the least limit the service accepts for ``buffers`` (below it a request is
    refused with ``time_limit_too_small``), whichever is more."""
    return max(LARGE_TIME_LIMIT, 2 * FIXED_SECONDS_PER_BUFFER * buffers)


# --- a minimal HTTP/1.1 client: keep-alive, Content-Length bodies --------------------------------


class StaleConnectionError(ConnectionError):
    """The server closed the connection before any byte of an answer."""


class Connection:
    """One keep-alive connection to the service."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(HOST, port)
        return cls(reader, writer)

    async def post(self, path: str, body: bytes) -> tuple[int, dict[str, str]]:
        """Send one POST and read the whole answer; the status and the headers."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        if not status_line:
            self.close()
            raise StaleConnectionError("connection closed before an answer")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            key, _, value = line.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers

    def close(self) -> None:
        self.writer.close()


# --- results -------------------------------------------------------------------------------------


@dataclass
class Result:
    """What one scenario measured."""

    name: str
    latencies: list[float] = field(default_factory=list)  # ms, answered requests
    server: list[float] = field(default_factory=list)  # ms, the Server-Timing of planned ones
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # no answer: exception names
    missing_retry_after: int = 0  # 503s without the header
    seconds: float = 0.0  # wall time of the scenario
    sent: int = 0
    resent: int = 0  # sent again after the server closed an idle keep-alive connection

    @property
    def answered(self) -> int:
        return sum(self.statuses.values())

    @property
    def throughput(self) -> float:
        """Answers per second."""
        return self.answered / max(self.seconds, 1e-9)

    def percentile(self, q: float, of: list[float] | None = None) -> float:
        values = self.latencies if of is None else of
        if not values:
            return float("nan")
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def line(self) -> str:
        statuses = " ".join(f"{s}:{n}" for s, n in sorted(self.statuses.items()))
        errors = " ".join(f"{e}:{n}" for e, n in sorted(self.errors.items())) or "none"
        planning = (
            f" (planning alone: p50 {self.percentile(0.5, self.server):.2f} ms, "
            f"p99 {self.percentile(0.99, self.server):.2f} ms)"
            if self.server
            else ""
        )
        return (
            f"{self.name}: {self.answered} of {self.sent} answered in {self.seconds:.1f} s "
            f"({self.throughput:.0f}/s), p50 {self.percentile(0.5):.2f} ms, "
            f"p99 {self.percentile(0.99):.2f} ms, max {self.percentile(1.0):.2f} ms{planning}; "
            f"statuses {statuses}; lost {errors}; resent {self.resent}"
        )

    def record(self, status: int, headers: dict[str, str], ms: float) -> None:
        self.sent += 1
        self.statuses[status] += 1
        self.latencies.append(ms)
        timing = headers.get("server-timing", "")
        if timing.startswith("plan;dur="):
            self.server.append(float(timing.removeprefix("plan;dur=")))
        if status == 503 and "retry-after" not in headers:
            self.missing_retry_after += 1


def _bodies(count: int, buffers: list[int], seed: int) -> Iterator[bytes]:
    """``count`` distinct plan requests, cycling through the buffer counts."""
    for i in range(count):
        n = buffers[i % len(buffers)]
        request = random_request(n, overlap=0.25, seed=seed + i, sync="insert")
        yield json.dumps(request.model_dump(mode="json", exclude_defaults=True)).encode()


def _mixed_bodies(count: int, mix: dict[int, int], seed: int) -> Iterator[tuple[int, bytes]]:
    """``count`` distinct requests, each size drawn with its weight in ``mix``: the smallest
    size as in ``_bodies`` (kernels), the others wide and sparse, with a time limit of
    ``large_time_limit``."""
    sizes, weights = list(mix), list(mix.values())
    draw = random.Random(seed)
    smallest = min(sizes)
    for i in range(count):
        n = draw.choices(sizes, weights)[0]
        if n == smallest:
            yield n, next(_bodies(1, [n], seed + i))
        else:
            request = random_request(n, seed=seed + i)
            options = request.options.model_copy(update={"time_limit": large_time_limit(n)})
            request = request.model_copy(update={"options": options})
            yield n, json.dumps(request.model_dump(mode="json", exclude_defaults=True)).encode()


def parse_mix(text: str) -> dict[int, int]:
    """``"32:395,300:4,3000:1"``: buffer counts and their weights."""
    mix: dict[int, int] = {}
    for part in text.split(","):
        size, _, weight = part.partition(":")
        try:
            mix[int(size)] = int(weight or "1")
        except ValueError:
            raise ValueError(f"--mix: {part!r} is not SIZE:WEIGHT") from None
    if not mix or min(mix) < 1 or min(mix.values()) < 1:
        raise ValueError(f"--mix: sizes and weights must be positive, got {text!r}")
    return mix


# --- scenarios -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One open-loop request: when it was due and answered (perf_counter s), and how."""

    scheduled: float
    finished: float
    status: int = 0  # 0: no answer
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""  # the exception's name when there was no answer

    def into(self, result: Result) -> None:
        if self.error:
            result.sent += 1
            result.errors[self.error] += 1
        else:
            result.record(self.status, self.headers, (self.finished - self.scheduled) * 1e3)


@dataclass
class OpenLoop:
    """An open loop's outcomes, in the order sent, its wall time and its resends."""

    outcomes: list[Outcome]
    seconds: float
    resent: int


async def _open_loop(port: int, rate: float, bodies: list[bytes]) -> OpenLoop:
    """Each body sent at its time (``rate`` per s) whatever the answers' pace, on as many
    connections as needed."""
    idle: list[Connection] = []
    resent = 0
    start = time.perf_counter() + 0.05

    async def one(k: int, body: bytes) -> Outcome:
        nonlocal resent
        scheduled = start + k / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        try:
            if idle:
                conn = idle.pop()
                try:
                    reply = await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
                except (StaleConnectionError, ConnectionResetError, BrokenPipeError):
                    resent += 1
                    # The server closed an idle keep-alive connection (uvicorn: after 5 s):
                    # resend on a new one, as any HTTP client does.
                    conn.close()
                    conn = await Connection.open(port)
                    reply = await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
            else:
                conn = await Connection.open(port)
                reply = await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            return Outcome(scheduled, time.perf_counter(), error=type(exc).__name__)
        idle.append(conn)
        return Outcome(scheduled, time.perf_counter(), *reply)

    outcomes = await asyncio.gather(*(one(k, b) for k, b in enumerate(bodies)))
    seconds = time.perf_counter() - start
    for conn in idle:
        conn.close()
    return OpenLoop(outcomes, seconds, resent)


async def run_rate(port: int, rate: float, duration: float, buffers: list[int]) -> Result:
    """Open loop at ``rate`` requests/s for ``duration`` s, on as many connections as needed."""
    duration = min(duration, MAX_SECONDS)
    count = min(int(rate * duration), MAX_REQUESTS)
    bodies = list(_bodies(count, buffers, seed=1_000_000))
    result = Result(f"rate {rate:g}/s x {duration:g} s, {','.join(map(str, buffers))} buffers")
    run = await _open_loop(port, rate, bodies)
    for outcome in run.outcomes:
        outcome.into(result)
    result.seconds, result.resent = run.seconds, run.resent
    return result


@dataclass
class Mixed:
    """What the mixed scenario measured: one ``Result`` per size, and the smallest size's
    requests that were in flight while one of the largest was."""

    by_size: dict[int, Result]
    during_large: Result

    def lines(self) -> list[str]:
        return [r.line() for r in (*self.by_size.values(), self.during_large)]


def split_by_size(sizes: list[int], run: OpenLoop) -> Mixed:
    """Group an open loop's outcomes by request size; pick out the smallest size's requests
    whose time in flight overlapped a largest-size request's."""
    outcomes = run.outcomes
    smallest, largest = min(sizes), max(sizes)
    by_size = {n: Result(f"mixed: {n} buffers") for n in sorted(set(sizes))}
    during = Result(f"mixed: {smallest} buffers while a {largest}-buffer request is in flight")
    large = sorted(
        (o.scheduled, o.finished) for n, o in zip(sizes, outcomes, strict=True) if n == largest
    )
    for n, outcome in zip(sizes, outcomes, strict=True):
        outcome.into(by_size[n])
        if n == smallest and largest != smallest and _overlaps(outcome, large):
            outcome.into(during)
    for result in (*by_size.values(), during):
        result.seconds = run.seconds
    by_size[smallest].resent = run.resent
    return Mixed(by_size, during)


def _overlaps(outcome: Outcome, spans: list[tuple[float, float]]) -> bool:
    return any(s < outcome.finished and outcome.scheduled < f for s, f in spans)


async def run_mixed(port: int, rate: float, duration: float, mix: dict[int, int]) -> Mixed:
    """Open loop at ``rate`` requests/s for ``duration`` s, sizes drawn by ``mix``."""
    duration = min(duration, MAX_SECONDS)
    count = min(int(rate * duration), MAX_REQUESTS)
    drawn = list(_mixed_bodies(count, mix, seed=5_000_000))
    run = await _open_loop(port, rate, [body for _, body in drawn])
    return split_by_size([n for n, _ in drawn], run)


async def run_burst(port: int, concurrency: int, buffers: list[int]) -> Result:
    """``concurrency`` distinct requests at once, each on its own connection."""
    concurrency = min(concurrency, 5000)
    bodies = list(_bodies(concurrency, buffers, seed=2_000_000))
    result = Result(f"burst of {concurrency}, {','.join(map(str, buffers))} buffers")
    conns = await asyncio.gather(*(Connection.open(port) for _ in bodies))
    go = asyncio.Event()

    async def one(conn: Connection, body: bytes) -> None:
        await go.wait()
        sent = time.perf_counter()
        try:
            status, headers = await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            result.sent += 1
            result.errors[type(exc).__name__] += 1
            return
        finally:
            conn.close()
        result.record(status, headers, (time.perf_counter() - sent) * 1e3)

    tasks = [asyncio.create_task(one(c, b)) for c, b in zip(conns, bodies, strict=True)]
    start = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    result.seconds = time.perf_counter() - start
    return result


async def run_cached(port: int, duration: float, connections: int, buffers: list[int]) -> Result:
    """``connections`` closed loops repeating one request for ``duration`` s."""
    duration = min(duration, MAX_SECONDS)
    body = next(_bodies(1, buffers, seed=3_000_000))
    result = Result(f"cached repeats on {connections} connections, {buffers[0]} buffers")
    conn = await Connection.open(port)
    await conn.post("/plan", body)  # the miss that fills the cache
    conn.close()
    stop = time.perf_counter() + duration

    async def loop() -> None:
        conn = await Connection.open(port)
        try:
            while time.perf_counter() < stop and result.answered < MAX_REQUESTS:
                sent = time.perf_counter()
                status, headers = await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
                result.record(status, headers, (time.perf_counter() - sent) * 1e3)
                if headers.get("x-plan-cache") != "hit":
                    result.errors["not_a_cache_hit"] += 1
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            result.sent += 1
            result.errors[type(exc).__name__] += 1
        finally:
            conn.close()

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(connections)))
    result.seconds = time.perf_counter() - start
    return result


# --- the server under test -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def local_server(port: int | None) -> Iterator[int]:
    """The port of a service on 127.0.0.1: the given one, or a fresh ``python -m planner.api``."""
    if port is not None:
        yield port
        return
    port = _free_port()
    env = {**os.environ, "PLANNER_HOST": HOST, "PLANNER_PORT": str(port)}
    log = open(os.devnull, "wb")  # noqa: SIM115  (closed below; the access log goes here)
    server = subprocess.Popen(
        [sys.executable, "-m", "planner.api"], env=env, stderr=log, stdout=log
    )
    try:
        _wait_ready(port, server)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _wait_ready(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120  # a fresh install compiles its kernels at start-up
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"load: error: the server exited with status {server.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.5) as s:
            s.sendall(f"GET /healthz HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            if s.recv(64).startswith(b"HTTP/1.1 200"):
                return
        time.sleep(0.2)
    raise SystemExit("load: error: the server did not answer /healthz within 120 s")


# --- command line --------------------------------------------------------------------------------


def _raise_fd_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def _targets(rate: Result, burst: Result, cached: Result) -> list[tuple[str, bool]]:
    return [
        ("rate: p50 < 5 ms", rate.percentile(0.5) < 5),
        ("rate: p99 < 25 ms", rate.percentile(0.99) < 25),
        ("rate: no errors", not rate.errors and set(rate.statuses) == {200}),
        ("burst: none lost", burst.answered == burst.sent == 1000 and not burst.errors),
        ("burst: each answered 200 or 503", set(burst.statuses) <= {200, 503}),
        ("burst: every 503 has Retry-After", burst.missing_retry_after == 0),
        ("cached: > 1000 requests/s", cached.throughput > 1000 and not cached.errors),
    ]


async def warm_up(port: int, count: int, buffers: list[int]) -> None:
    """``count`` sequential requests, not measured: the server's first answers in a process
    pay one-time costs (kernels loaded from the on-disk cache, first allocations)."""
    conn = await Connection.open(port)
    try:
        for body in _bodies(min(count, 10_000), buffers, seed=4_000_000):
            await asyncio.wait_for(conn.post("/plan", body), READ_TIMEOUT)
    finally:
        conn.close()


async def _main(args: argparse.Namespace, port: int) -> int:
    buffers = [int(b) for b in args.buffers.split(",")]
    if args.warmup:
        await warm_up(port, args.warmup, buffers)
    if args.scenario == "rate":
        print((await run_rate(port, args.rate, args.duration, buffers)).line())
    elif args.scenario == "burst":
        print((await run_burst(port, args.concurrency, buffers)).line())
    elif args.scenario == "cached":
        print((await run_cached(port, args.duration, args.connections, buffers)).line())
    elif args.scenario == "mixed":
        mixed = await run_mixed(port, args.rate, args.duration, args.mix)
        weights = ",".join(f"{n}:{w}" for n, w in args.mix.items())
        print(f"mixed {args.rate:g}/s x {args.duration:g} s, sizes:weights {weights}")
        print("\n".join(mixed.lines()))
    else:
        rate = await run_rate(port, 200, 30, [32])
        print(rate.line(), flush=True)
        burst = await run_burst(port, 1000, [32])
        print(burst.line(), flush=True)
        cached = await run_cached(port, 10, 8, [32])
        print(cached.line(), flush=True)
        missed = 0
        for name, ok in _targets(rate, burst, cached):
            print(f"  {'ok  ' if ok else 'MISS'} {name}")
            missed += not ok
        return 1 if missed else 0
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "scenario", nargs="?", default="all", choices=["all", "rate", "burst", "cached", "mixed"]
    )
    parser.add_argument("--port", type=int, help="a running service on 127.0.0.1; else start one")
    parser.add_argument("--buffers", default="32", help="buffer counts to cycle through: 8,32,128")
    parser.add_argument("--rate", type=float, default=200.0, help="requests/s (rate)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds (rate, cached)")
    parser.add_argument("--concurrency", type=int, default=1000, help="requests at once (burst)")
    parser.add_argument("--connections", type=int, default=8, help="keep-alive loops (cached)")
    parser.add_argument(
        "--mix", default="32:395,300:4,3000:1", help="SIZE:WEIGHT,... buffer counts (mixed)"
    )
    parser.add_argument("--warmup", type=int, default=100, help="unmeasured requests first")
    args = parser.parse_args()
    try:
        args.mix = parse_mix(args.mix)
    except ValueError as exc:
        parser.error(str(exc))
    if args.rate <= 0 or args.duration <= 0 or args.concurrency < 1 or args.connections < 1:
        parser.error("rate, duration, concurrency and connections must be positive")
    _raise_fd_limit(args.concurrency + 256)
    with local_server(args.port) as port:
        return asyncio.run(_main(args, port))


if __name__ == "__main__":
    raise SystemExit(main())
