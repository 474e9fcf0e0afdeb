"""What an operator may tune about the service: the one place that reads the environment.

Every field is read from ``PLANNER_<FIELD>`` (``PLANNER_MAX_TIME_LIMIT=5``); tests build
``Settings(...)`` directly and pass it to ``create_app``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from planner.api.pool import PoolKind
from planner.core.cores import usable_cores
from planner.core.models import DEFAULT_MAX_BUFFERS

__all__ = ["EventLoop", "Settings", "environment_settings"]

EventLoop = Literal["auto", "asyncio", "uvloop"]  # uvicorn's "auto": uvloop when installed
MAX_BODY_BYTES = 32 << 20  # 32 MiB: about 150k buffers with access patterns


class Settings(BaseSettings):
    """Limits, pool, cache and server options; one frozen object per app."""

    model_config = SettingsConfigDict(env_prefix="PLANNER_", frozen=True, extra="forbid")

    # Limits on one request; each refusal names the limit and the value.
    max_body_bytes: int = Field(default=MAX_BODY_BYTES, ge=1)  # bytes, else 413
    max_buffers: int = Field(default=DEFAULT_MAX_BUFFERS, ge=1)  # else 422
    max_time_limit: float = Field(default=30.0, gt=0, le=3600)  # s; options.time_limit capped
    # (thread, byte) accesses one emulation may make, bounded from above over every path,
    # loop iteration and block (validators.cost): about a second and 400 MB at the default.
    max_access_instances: int = Field(default=1 << 24, ge=0)
    # Solving runs on a pool of worker processes (or threads); requests wait in a bounded
    # queue, and past it the answer is 503 with Retry-After. A long exact solve holds the GIL
    # for tens of ms at a time, which with threads stalls every other request.
    solver_pool: PoolKind = "processes"
    solver_workers: int = Field(default_factory=lambda: usable_cores(default=1), ge=1, le=256)
    # Each solver process runs on its share of the cores, so that a large request's threads
    # cannot take the cores the others answer small requests on (plans do not depend on it).
    pin_workers: bool = True
    # Bytes a solver process may keep resident after a job: past it, it returns freed memory
    # to the system and, if still past it, exits after answering and a fresh one takes its
    # place (a warm worker is about 250 MB). 0: never. Not for the "threads" pool.
    worker_max_rss: int = Field(default=1 << 30, ge=0)
    # Requests waiting for a worker: at 200 requests/s, 256 absorb a 1 s solve without a 503.
    queue_size: int = Field(default=256, ge=0)
    request_timeout: float = Field(default=60.0, gt=0)  # s a request may wait and run, else 503
    retry_after: int = Field(default=1, ge=0)  # s, sent with every 503
    cache_size: int = Field(default=1024, ge=0)  # plans kept; 0 disables the cache
    cache_bytes: int = Field(default=64 << 20, ge=0)  # bytes of plans kept; larger ones are not
    access_log: bool = True  # one JSON line per request on stderr
    # s a thread may keep the GIL while another waits (Python's default: 5 ms), in the server
    # process: shorter lets the event loop answer sooner while a solver thread (the "threads"
    # pool) runs.
    switch_interval: float = Field(default=0.0005, gt=0, le=0.1)
    # Connections (`planner serve`): a client may not hold the server's file descriptors by
    # sending slowly or not at all (api.connections). Past max_connections the connection
    # idle longest is closed for each new one.
    max_connections: int = Field(default=1000, ge=1)  # open at once, per uvicorn process
    header_timeout: float = Field(default=10.0, gt=0)  # s from connecting to a complete head
    body_timeout: float = Field(default=60.0, gt=0)  # s from the head to the whole body
    keep_alive_timeout: float = Field(default=5.0, gt=0)  # s an idle kept-alive connection lives
    # Host names answered besides localhost, 127.0.0.1 and [::1] (comma-separated; "*": any):
    # any other Host is a 400, so a web page cannot reach the service by DNS rebinding.
    allowed_hosts: str = ""
    # How `python -m api` (and the container) runs uvicorn.
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1, le=64)  # uvicorn processes
    loop: EventLoop = "auto"  # the event loop uvicorn runs


@lru_cache(maxsize=1)
def environment_settings() -> Settings:
    """The settings the environment gives, read once per process."""
    return Settings()
