"""Sequential POST /plan latency against a local service (loopback only, bounded).

    python scripts/latency.py --buffers 32 --requests 500 [--port 8000]

Sends ``--requests`` distinct requests of ``--buffers`` buffers one after another to
127.0.0.1 and prints the median, p99 and the server-side time from Server-Timing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time

from planner.generate import random_request


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffers", type=int, default=32)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    count = max(1, min(args.requests, 100_000))
    bodies = []
    for seed in range(count):
        request = random_request(args.buffers, overlap=0.25, seed=seed, sync="insert")
        bodies.append(json.dumps(request.model_dump(mode="json")).encode())
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=30)
    wall: list[float] = []
    server: list[float] = []
    failures = 0
    deadline = time.monotonic() + 300  # stop by itself whatever happens
    for body in bodies:
        if time.monotonic() > deadline:
            break
        t0 = time.perf_counter()
        conn.request("POST", "/plan", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        wall.append((time.perf_counter() - t0) * 1000)
        failures += response.status != 200
        timing = response.getheader("Server-Timing", "")
        if "dur=" in timing:
            server.append(float(timing.split("dur=")[1].split(";")[0]))
    conn.close()
    wall.sort()
    p99 = wall[min(len(wall) - 1, int(len(wall) * 0.99))]
    print(
        f"{len(wall)} requests of {args.buffers} buffers: median {statistics.median(wall):.2f} ms, "
        f"p99 {p99:.2f} ms, server median {statistics.median(server or [0.0]):.2f} ms, "
        f"non-200: {failures}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
