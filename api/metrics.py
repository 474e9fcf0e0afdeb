"""Prometheus metrics, one registry per app so that several apps in one process stay apart.

Each uvicorn process counts its own requests: scrape every process (one per container is
the simple way), or sum across replicas in Prometheus.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]

# s; a cached answer takes well under a millisecond, a hard exact solve up to the time cap.
_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class Metrics:
    """Requests by route and status, latency, solver outcomes and time, cache and pool."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "planner_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "planner_http_request_duration_seconds",
            "Time from request to the end of the response, by route template.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.solves = Counter(
            "planner_solves",
            "Plans computed (cache misses), by plan status and winning solver.",
            ["status", "solver"],
            registry=r,
        )
        self.solve_time = Histogram(
            "planner_solve_duration_seconds",
            "Time to parse, plan and check one request on a solver thread.",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.cache = Counter(
            "planner_cache_lookups", "Plan cache lookups, by result.", ["result"], registry=r
        )
        self.rejections = Counter(
            "planner_rejections",
            "Requests refused with 503, by reason (queue_full, deadline_exceeded, worker_died, "
            "client_disconnected).",
            ["reason"],
            registry=r,
        )
        self.client_disconnects = Counter(
            "planner_client_disconnects",
            "Requests whose client went away while its body was arriving (logged as 499).",
            registry=r,
        )
        self.pool_admitted = Gauge(
            "planner_pool_admitted", "Solver jobs running or waiting now.", registry=r
        )

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
