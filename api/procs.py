"""Solver worker processes, one pipe each, driven from the event loop.

A job goes to the lowest-numbered idle worker. Under light load one process takes nearly
every request and stays warm in the CPU's caches; the others take jobs only while it is busy,
so a long exact solve never holds up the requests behind it while another worker is idle. No
thread of the server process carries a job: the event loop writes it to the worker's pipe and
reads the answer when the pipe turns readable.

A worker exits when its pipe closes (the server shut down or was killed) and, while it runs a
job, within ``PARENT_POLL`` seconds of its server's death.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import pickle
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

__all__ = ["Job", "ProcessWorkers", "WorkerDiedError"]

PARENT_POLL = 0.5  # s between a worker's checks that its server is still there
LARGE_JOB = 1 << 20  # bytes: a job this big is written from a thread, not the event loop
JOIN_SECONDS = 1.0  # a stopping worker's grace before it is terminated
# spawn: a fork of a process running an event loop and threads is unsafe.
_SPAWN = multiprocessing.get_context("spawn")


class WorkerDiedError(Exception):
    """The worker process running a job died before answering."""


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)  # the server is gone: nobody will read an answer


def _serve(conn: Connection, parent: int, initializer: Callable[[], None] | None) -> None:
    """A worker process: run each job received and send back its outcome, until EOF."""
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    if initializer is not None:
        initializer()
    while True:
        try:
            fn, args = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            outcome: tuple[bool, Any] = (True, fn(*args))
        except Exception as exc:  # sent back and raised by the caller, as an executor does
            outcome = (False, exc)
        try:
            data = pickle.dumps(outcome)
        except Exception as exc:  # an unpicklable result or exception
            data = pickle.dumps((False, RuntimeError(f"unpicklable outcome: {exc!r}")))
        try:
            conn.send_bytes(data)
        except OSError:
            return


@dataclass(eq=False)
class Job:
    """One call waiting for or running on a worker."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    on_done: Callable[[], None]  # called once: the job finished or was dropped while waiting
    finished: bool = False

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.on_done()


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    conn: Connection
    job: Job | None = None


@dataclass(eq=False)
class ProcessWorkers:
    """``count`` worker processes bound to the running event loop."""

    count: int
    initializer: Callable[[], None] | None = None
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _workers: list[_Worker] = field(init=False)
    _waiting: deque[Job] = field(init=False, default_factory=deque)

    def __post_init__(self) -> None:
        self._workers = [self._spawn() for _ in range(self.count)]

    def _spawn(self) -> _Worker:
        mine, theirs = _SPAWN.Pipe(duplex=True)
        process = _SPAWN.Process(
            target=_serve,
            args=(theirs, os.getpid(), self.initializer),
            name="planner-solver",
            daemon=True,
        )
        process.start()
        theirs.close()  # the worker's end lives in the worker alone: EOF when either dies
        worker = _Worker(process, mine)
        self.loop.add_reader(mine.fileno(), self._readable, worker)
        return worker

    def submit(
        self, fn: Callable[..., Any], args: tuple[Any, ...], on_done: Callable[[], None]
    ) -> Job:
        """Queue ``fn(*args)``; its outcome arrives in ``job.future``."""
        job = Job(fn, args, self.loop.create_future(), on_done)
        self._waiting.append(job)
        self._dispatch()
        return job

    def drop(self, job: Job) -> None:
        """Forget a job whose caller stopped waiting: dropped if it still waits, else its
        answer is discarded when it comes."""
        if job in self._waiting:
            self._waiting.remove(job)
            job.finish()
        job.future.cancel()

    def _dispatch(self) -> None:
        for worker in self._workers:
            if not self._waiting:
                return
            if worker.job is None:
                job = self._waiting.popleft()
                worker.job = job
                data = pickle.dumps((job.fn, job.args))
                if len(data) > LARGE_JOB:
                    # The pipe holds 64 KiB: a large job would block the loop until read.
                    self.loop.run_in_executor(None, self._send, worker, data)
                else:
                    self._send(worker, data)

    def _send(self, worker: _Worker, data: bytes) -> None:
        # A dead worker's pipe turns readable with EOF, and ``_readable`` says so.
        with contextlib.suppress(OSError):
            worker.conn.send_bytes(data)

    def _readable(self, worker: _Worker) -> None:
        try:
            ok, value = pickle.loads(worker.conn.recv_bytes())
        except (EOFError, OSError):
            self._replace(worker)
            return
        job, worker.job = worker.job, None
        if job is not None:
            job.finish()
            if not job.future.done():
                if ok:
                    job.future.set_result(value)
                else:
                    job.future.set_exception(value)
        self._dispatch()

    def _replace(self, worker: _Worker) -> None:
        """A worker died: fail its job and start another in its place."""
        self._close(worker)
        job = worker.job
        if job is not None:
            job.finish()
            if not job.future.done():
                job.future.set_exception(WorkerDiedError("a solver process died"))
        index = self._workers.index(worker)
        self._workers[index] = self._spawn()
        self._dispatch()

    def _close(self, worker: _Worker) -> None:
        if not worker.conn.closed:
            if not self.loop.is_closed():
                self.loop.remove_reader(worker.conn.fileno())
            worker.conn.close()

    def shutdown(self) -> None:
        """Stop every worker; waiting and running jobs are cancelled."""
        for job in [*self._waiting, *(w.job for w in self._workers if w.job is not None)]:
            job.finish()
            job.future.cancel()
        self._waiting.clear()
        for worker in self._workers:
            self._close(worker)  # EOF: an idle worker exits at once
        for worker in self._workers:
            worker.process.join(JOIN_SECONDS)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(JOIN_SECONDS)
        self._workers = []
