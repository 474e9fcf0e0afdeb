"""Solver worker processes, one socket each, driven from the event loop.

A job goes to the lowest-numbered idle worker that is warm: a worker says it is ready (an
empty frame) once its initializer has run, and gets no job before, so a replacement that is
still loading its kernels never holds a request while a warm worker is idle. Under light
load one process takes nearly every request and stays warm in the CPU's caches; the others
take jobs only while it is busy, so a long exact solve never holds up the requests behind it
while another worker is idle. No
thread of the server process carries a job: jobs and answers travel as length-prefixed
frames (``api.frames``) over a socket pair per worker, the server's end non-blocking and
driven by the event loop, the worker's end blocking. Frames of any size go through whatever
the event loop (asyncio's or uvloop's) does to the descriptors.

Every job frees its worker and its slot: when it is answered, when its worker dies (the job
fails with ``WorkerDiedError`` and a new worker takes the dead one's place), and when its
caller gives it up (``abandon``): a waiting job is dropped, a running one's worker is stopped
(SIGTERM, SIGKILL after ``KILL_GRACE`` s) and replaced, since nothing else stops a solve.

A worker exits when its socket closes (the server shut down or was killed, or gave up its
job) and, while it runs a job, within ``PARENT_POLL`` seconds of its server's death.

A job that grew its worker does not leave the memory behind: after each job a worker whose
resident memory passes ``max_rss`` collects garbage and hands freed heap back to the system
(glibc's ``malloc_trim``); if it still passes, it says so in its answer and exits, and the
pool starts a replacement at once and gives the retiring worker no further job. The answer
itself is delivered like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import multiprocessing
import os
import pickle
import platform
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from typing import Any

from planner.api.frames import Channel, recv_frame, send_frame

__all__ = [
    "Job",
    "ProcessWorkers",
    "WorkerDiedError",
    "core_shares",
    "resident_bytes",
    "shrinks_below",
]

PARENT_POLL = 0.5  # s between a worker's checks that its server is still there
KILL_GRACE = 0.5  # s a stopped worker has to exit after SIGTERM before SIGKILL
REAP_TRIES = 20  # checks, KILL_GRACE apart, that a killed worker is gone (then reaped)
READY_POLL = 0.05  # s between checks that the workers are warm, at start-up
JOIN_SECONDS = 1.0  # a stopping worker's grace at shutdown before it is terminated
# spawn: a fork of a process running an event loop and threads is unsafe.
_SPAWN = multiprocessing.get_context("spawn")


class WorkerDiedError(Exception):
    """The worker process running a job died before answering."""


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL)
    os._exit(0)  # the server is gone: nobody will read an answer


def resident_bytes() -> int:
    """This process's resident memory now, in bytes (0 where the system does not say)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc; elsewhere nothing)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def shrinks_below(max_rss: int) -> bool:
    """Whether this process's resident memory is (or, after a garbage collection and a heap
    trim, comes back) within ``max_rss`` bytes; always when ``max_rss`` is 0."""
    if max_rss <= 0 or resident_bytes() <= max_rss:
        return True
    gc.collect()
    _trim_heap()
    return resident_bytes() <= max_rss


def core_shares(count: int) -> list[frozenset[int]]:
    """The cores each of ``count`` workers may run on: the server's own cores split into
    ``count`` shares (as even as they go; one core each, round robin, when there are more
    workers than cores). Empty shares where the system cannot pin a process."""
    if not hasattr(os, "sched_getaffinity"):
        return [frozenset()] * count
    cores = sorted(os.sched_getaffinity(0))
    if count >= len(cores):
        return [frozenset({cores[i % len(cores)]}) for i in range(count)]
    bounds = [len(cores) * i // count for i in range(count + 1)]
    return [frozenset(cores[bounds[i] : bounds[i + 1]]) for i in range(count)]


def _serve(
    sock: socket.socket,
    parent: int,
    initializer: Callable[[], None] | None,
    cores: frozenset[int] = frozenset(),
    max_rss: int = 0,
) -> None:
    """A worker process: run each job received and send back its outcome, until EOF, or
    until a job leaves it above ``max_rss`` bytes resident (``shrinks_below``)."""
    # Ctrl-C reaches the whole process group: the server decides when its workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cores:
        # Its share of the cores: every thread a job starts (the search's racing members,
        # the heuristics' pool, CP-SAT's) shares them, so one large request cannot take the
        # cores the other workers answer small ones on. Plans do not depend on it.
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cores)
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    sock.setblocking(True)
    if initializer is not None:
        initializer()
    try:
        send_frame(sock, b"")  # warm: ready for jobs
    except OSError:
        return
    while True:
        try:
            frame = recv_frame(sock)
        except (EOFError, OSError):
            return
        try:
            fn, args = pickle.loads(frame)
            del frame
            outcome: tuple[bool, Any] = (True, fn(*args))
        except Exception as exc:  # sent back and raised by the caller, as an executor does
            outcome = (False, exc)
        del fn, args
        retire = not shrinks_below(max_rss)  # the job's own objects are gone by now
        try:
            data = pickle.dumps((*outcome, retire), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # an unpicklable result or exception
            failure = RuntimeError(f"unpicklable outcome: {exc!r}")
            data = pickle.dumps((False, failure, retire))
        del outcome
        try:
            send_frame(sock, data)
        except OSError:
            return
        if retire:
            return  # the pool has started a replacement on reading the answer


@dataclass(eq=False)
class Job:
    """One call waiting for or running on a worker."""

    data: bytes  # the pickled call
    future: asyncio.Future[Any]
    on_done: Callable[[], None]  # called once: the job finished, failed or was given up
    large: bool = False  # a request of many buffers: it runs apart from small ones
    finished: bool = False

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            self.on_done()


@dataclass(eq=False)
class _Worker:
    process: BaseProcess
    channel: Channel | None = None  # set right after the worker is built
    job: Job | None = None
    ready: bool = False  # its initializer has run: it takes jobs


@dataclass(eq=False)
class ProcessWorkers:
    """``count`` worker processes bound to the running event loop."""

    count: int
    initializer: Callable[[], None] | None = None
    pin: bool = True  # each worker runs on its share of the cores (core_shares)
    max_rss: int = 0  # bytes a worker may keep resident after a job (0: no limit)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _workers: list[_Worker] = field(init=False)
    _waiting: deque[Job] = field(init=False, default_factory=deque)
    _shares: list[frozenset[int]] = field(init=False)  # the cores of each worker
    recycled: int = field(init=False, default=0)  # workers replaced for their memory

    def __post_init__(self) -> None:
        self._shares = core_shares(self.count) if self.pin else [frozenset()] * self.count
        self._workers = [self._spawn(i) for i in range(self.count)]

    def _spawn(self, index: int) -> _Worker:
        mine, theirs = socket.socketpair()
        try:
            process = _SPAWN.Process(
                target=_serve,
                args=(theirs, os.getpid(), self.initializer, self._shares[index], self.max_rss),
                name="planner-solver",
                daemon=True,
            )
            process.start()
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()  # the worker's end lives in the worker alone: EOF when either dies
        worker = _Worker(process)
        worker.channel = Channel(
            self.loop, mine, lambda frame: self._answered(worker, frame), lambda: self._died(worker)
        )
        return worker

    async def all_ready(self, timeout: float) -> None:
        """Wait until every worker is warm, at most ``timeout`` s."""
        give_up = self.loop.time() + timeout
        while not all(w.ready for w in self._workers) and self.loop.time() < give_up:
            await asyncio.sleep(READY_POLL)

    def submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        on_done: Callable[[], None],
        large: bool = False,
    ) -> Job:
        """Queue ``fn(*args)``; its outcome arrives in ``job.future``. Raises (and queues
        nothing) if the call does not pickle. A ``large`` job never takes the last idle
        worker (``_dispatch``)."""
        data = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        job = Job(data, self.loop.create_future(), on_done, large=large)
        self._waiting.append(job)
        self._dispatch()
        return job

    def abandon(self, job: Job) -> None:
        """The caller stopped waiting: drop the job if it waits; if it runs, stop its worker
        and start another in its place. Either way its slot is free on return."""
        if job in self._waiting:
            self._waiting.remove(job)
        else:
            for index, worker in enumerate(self._workers):
                if worker.job is job:
                    worker.job = None
                    self._retire(worker)
                    self._workers[index] = self._spawn(index)
                    break
        job.finish()
        job.future.cancel()
        self._dispatch()

    def _dispatch(self) -> None:
        """Start waiting jobs, in order, on idle warm workers, lowest-numbered first. Large
        jobs run apart from small ones: with two workers or more, at most all but one run
        large jobs, so one is always left for small kernels, which a large job's
        seconds would otherwise hold up; a large job that must wait lets the small ones
        behind it go first."""
        large_cap = max(1, len(self._workers) - 1)
        running_large = sum(1 for w in self._workers if w.job is not None and w.job.large)
        for job in list(self._waiting):
            if job.large and running_large >= large_cap:
                continue
            worker = next((w for w in self._workers if w.ready and w.job is None), None)
            if worker is None:
                return
            self._waiting.remove(job)
            running_large += job.large
            worker.job = job
            assert worker.channel is not None
            worker.channel.send(job.data)  # queued: written as the socket accepts it

    def _answered(self, worker: _Worker, frame: bytearray) -> None:
        if not worker.ready:  # its first frame: it is warm
            worker.ready = True
            self._dispatch()
            return
        job, worker.job = worker.job, None
        try:
            ok, value, retire = pickle.loads(frame)
        except Exception as exc:  # an outcome that does not unpickle here
            ok, value = False, RuntimeError(f"the worker's answer did not load: {exc!r}")
            retire = False
        del frame
        if retire and worker in self._workers:
            # It exits after this answer, too large to keep: its place goes to a fresh one
            # now, so no job is sent to it.
            index = self._workers.index(worker)
            self._retire(worker)
            self._workers[index] = self._spawn(index)
            self.recycled += 1
        if job is not None:
            job.finish()
            if not job.future.done():
                if ok:
                    job.future.set_result(value)
                else:
                    job.future.set_exception(value)
        self._dispatch()

    def _died(self, worker: _Worker) -> None:
        """A worker's socket closed: it died. Fail its job and start another in its place."""
        if worker not in self._workers:
            return
        job, worker.job = worker.job, None
        self._retire(worker)
        index = self._workers.index(worker)
        self._workers[index] = self._spawn(index)
        if job is not None:
            job.finish()
            if not job.future.done():
                job.future.set_exception(WorkerDiedError("a solver process died"))
        self._dispatch()

    def _retire(self, worker: _Worker) -> None:
        """Close a worker's socket and make sure its process ends and is reaped."""
        if worker.channel is not None:
            worker.channel.close()
        process = worker.process
        if process.exitcode is None:
            process.terminate()
        self.loop.call_later(KILL_GRACE, _reap, self.loop, process, REAP_TRIES)

    def drop_waiting(self) -> list[Job]:
        """Take every job that has not started off the queue (their slots are freed); the
        caller answers them. Running jobs go on."""
        dropped = list(self._waiting)
        self._waiting.clear()
        for job in dropped:
            job.finish()
        return dropped

    def shutdown(self) -> None:
        """Stop every worker; waiting and running jobs are cancelled."""
        for job in [*self._waiting, *(w.job for w in self._workers if w.job is not None)]:
            job.finish()
            job.future.cancel()
        self._waiting.clear()
        for worker in self._workers:
            worker.job = None
            if worker.channel is not None:
                worker.channel.close()  # EOF: an idle worker exits at once
        for worker in self._workers:
            worker.process.join(JOIN_SECONDS)
            if worker.process.is_alive():
                worker.process.terminate()
                worker.process.join(JOIN_SECONDS)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(JOIN_SECONDS)
        self._workers = []


def _reap(loop: asyncio.AbstractEventLoop, process: BaseProcess, tries: int) -> None:
    """SIGKILL a stopped worker still there after its grace; check again until it is reaped
    (``exitcode`` waits for it without blocking)."""
    if process.exitcode is not None:
        return
    process.kill()
    if tries > 1 and not loop.is_closed():
        loop.call_later(KILL_GRACE, _reap, loop, process, tries - 1)
