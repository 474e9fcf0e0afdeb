"""numba's ``njit``, with a writable on-disk cache so compiled kernels outlive the process,
and a notice on stderr when a run is about to compile them.

numba caches next to the source; where that is read-only (an installed wheel, a container
running as another user) it would fail, so the cache falls back to a per-user directory, then
to the temporary directory. Where none can be written, kernels are compiled in memory on every
run, and the first one says so once.

Within that place, each version of the kernels' sources has a directory of its own
(``kernels-`` and a digest of their contents). numba keys a cached kernel by the contents of
its own file only, and a compiled kernel carries compiled copies of the kernels it calls: after
an upgrade that changed only a callee's file, the caller's cached code would still run the old
callee (on arrays the new code lays out differently, or to another plan). The latest
``KEEP_VERSIONS`` directories are kept, so versions run side by side each keep their cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar, cast, overload

from planner.core.clock import paused

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE = Path(__file__).resolve().parent
# Packages whose modules hold kernels; installed under planner (their folders in a checkout
# lie beside it, mapped there by the build).
_SOURCES = ("planner.core", "planner.pipeline", "planner.solvers", "planner.validators")
COMPILE_SECONDS = 60  # about how long the search kernels take to compile on one small core
KEEP_VERSIONS = 3  # kernel cache directories kept: this version's and the latest others
NATIVE_PAUSE = os.name == "posix"  # compiled, ``pause`` sleeps (``usleep``); else it returns


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _cache_dir() -> Path | None:
    """Where compiled kernels are kept; None when nowhere can be written."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return Path(chosen) if _writable(Path(chosen)) else None
    if os.access(_PACKAGE, os.W_OK):
        return _PACKAGE / "__pycache__"  # numba's own default: beside the source
    for candidate in (
        Path.home() / ".cache" / "alloc-planner" / "numba",
        Path(tempfile.gettempdir()) / f"alloc-planner-numba-{os.getuid()}",
    ):
        if _writable(candidate):
            os.environ["NUMBA_CACHE_DIR"] = str(candidate)
            return candidate
    return None


CACHE_DIR = _cache_dir()

__all__ = [
    "CACHE_DIR",
    "NATIVE_PAUSE",
    "Kernel",
    "announce",
    "compiled",
    "interpreted",
    "loaded_any",
    "njit",
    "pause",
    "ready",
]

_said: set[str] = set()  # parts this process has announced or found compiled
_loaded_any = False  # whether this process has loaded a compiled kernel
# Within ``interpreted()``, a kernel marked ``small`` runs as the Python function it is written
# as while this process has loaded no compiled kernel: a small request then needs no compiled
# code. Once one is loaded (numba is in, and the request that needed it paid for that), small
# kernels load on their first call too, their clock paused: interpreted, a kernel-sized
# request's greedy heuristics alone take about ten milliseconds more on every request.
_INTERPRET: ContextVar[bool] = ContextVar("planner_interpret", default=False)
_COMPILED: ContextVar[bool] = ContextVar("planner_compiled", default=False)  # overrides it


class Kernel:
    """A function compiled by numba (nopython mode, cached on disk when a cache can be
    written) on its first compiled call; numba itself is imported only then.

    Compiled or interpreted, a kernel computes the same result (integer arithmetic, no
    randomness of its own), so which one runs changes the speed of a call, never its plan.
    """

    def __init__(
        self, func: Callable[..., Any], *, small: bool, borrows: bool = False, inline: bool = False
    ) -> None:
        self.py_func = func
        self.small = small
        self.borrows = borrows  # compiled without reference counts (see ``njit``)
        self.inline = inline  # inlined into its callers by numba (see ``njit``)
        self._compiled: Callable[..., Any] | None = None  # set once its callees are loaded
        self._loading: Callable[..., Any] | None = None  # its dispatcher while they load
        self._called = False  # a compiled call has run (and paid the loading)
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self._compiled
        if compiled is not None and self._called:
            return compiled(*args, **kwargs)
        if (
            compiled is None
            and self.small
            and not _loaded_any
            and _INTERPRET.get()
            and not _COMPILED.get()
        ):
            return self.py_func(*args, **kwargs)
        # The first call loads (or compiles) the machine code, also when another kernel that
        # calls this one has made its dispatcher already.
        compiled = self.load()
        with paused():
            result = compiled(*args, **kwargs)
        self._called = True
        return result

    def load(self) -> Callable[..., Any]:
        """The compiled function, loaded (or compiled) now if it is not yet, with the
        request's clock paused: a later call in this process would not pay it."""
        global _loaded_any
        if self._compiled is not None:
            return self._compiled
        with _lock, paused():
            if self._compiled is None:
                if self._loading is not None:
                    return self._loading  # asked again by a kernel it calls, on this thread
                import numba
                import numba.core.config

                if CACHE_DIR is not None:
                    cast(Any, numba.core.config).CACHE_DIR = str(_version_dir(CACHE_DIR))
                announce(_part(self.py_func.__module__))
                # numba compiles on the first call, reading the kernel's globals then: the
                # kernels it calls must be numba's own dispatchers by that time, so another
                # thread gets the dispatcher only once they are.
                compile_as: Any = numba.njit  # ``_nrt`` is not in numba's typed signature
                dispatcher = compile_as(
                    cache=CACHE_DIR is not None,
                    nogil=True,
                    _nrt=not self.borrows,
                    forceinline=self.borrows,
                    inline="always" if self.inline else "never",
                )(self.py_func)
                self._loading = dispatcher
                scope = self.py_func.__globals__
                scope[self.py_func.__name__] = dispatcher
                for name, value in list(scope.items()):
                    if isinstance(value, Kernel):
                        scope[name] = value.load()
                    elif value is pause:
                        scope[name] = _native_pause()
                self._compiled = dispatcher
                _loaded_any = True
        return self._compiled


def pause(microseconds: int) -> int:
    """Sleep about ``microseconds``, for a kernel waiting on other threads: in compiled code
    the C library's ``usleep``, which holds no lock, so the thread costs no CPU meanwhile."""
    time.sleep(microseconds * 1e-6)
    return 0


@functools.cache
def _native_pause() -> Any:
    """``pause`` as numba calls it: a call of ``usleep`` declared by name (the process's C
    library provides it), so the kernels calling it still go to the on-disk cache. Where
    there is no ``usleep`` (``NATIVE_PAUSE`` false), a call that returns at once: nothing
    paces there."""
    import numba

    if not NATIVE_PAUSE:

        def returns(microseconds: int) -> int:
            return 0

        return numba.njit(nogil=True)(returns)

    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    @intrinsic
    def native(typingctx: Any, microseconds: Any) -> Any:
        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            c_int = ir.IntType(32)
            module = builder.module
            usleep = module.globals.get("usleep") or ir.Function(
                module, ir.FunctionType(c_int, [c_int]), name="usleep"
            )
            done = builder.call(usleep, [builder.trunc(args[0], c_int)])
            return builder.sext(done, ir.IntType(64))

        return types.int64(types.int64), codegen

    return native


def _part(module: str) -> str:
    """Which announced part a kernel's module belongs to."""
    return "search" if module.rsplit(".", 1)[-1] in _SEARCH_MODULES else "core"


_SEARCH_MODULES = ("_search_kernel", "_stack_kernel")
_lock = threading.RLock()


@overload
def njit(func: F) -> F: ...


@overload
def njit(
    *, small: bool = False, borrows: bool = False, inline: bool = False
) -> Callable[[F], F]: ...


def njit(
    func: F | None = None, *, small: bool = False, borrows: bool = False, inline: bool = False
) -> F | Callable[[F], F]:
    """Decorate a kernel (typed as the Python function). ``small=True``: within
    ``interpreted()`` it runs as Python until this process has loaded it. ``borrows=True``:
    a step that another kernel calls on arrays it holds, compiled without reference counts
    (it may not make an array; numba refuses to compile one that does). Counted, a step
    takes a reference on every array it is given and drops it on return, two atomic
    operations each, on every call; a step called once a node on fifteen arrays pays more
    for that than for its own work on small graphs. ``inline=True``: a step that makes
    arrays, inlined by numba into the kernels that call it, so no call hands it theirs:
    arrays that no call takes are known apart from every other, which keeps the caller's
    loops as fast as they are written inline. Not for a step of a ``small`` kernel: run as
    Python, that kernel calls its steps from Python, and an inlined step is compiled then."""

    def wrap(f: F) -> F:
        return cast(F, Kernel(f, small=small, borrows=borrows, inline=inline))

    return wrap if func is None else wrap(func)


def loaded_any() -> bool:
    """Whether this process has loaded a compiled kernel: numba is in, so loading another
    costs only its own machine code."""
    return _loaded_any


def ready(kernel: Callable[..., Any]) -> bool:
    """Whether ``kernel`` (an ``njit`` function) has run compiled in this process: its next
    call loads nothing."""
    return isinstance(kernel, Kernel) and kernel._compiled is not None and kernel._called


@contextmanager
def interpreted(on: bool = True) -> Iterator[None]:
    """Within the block, kernels marked ``small`` that are not loaded yet run as Python."""
    token = _INTERPRET.set(on)
    try:
        yield
    finally:
        _INTERPRET.reset(token)


@contextmanager
def compiled() -> Iterator[None]:
    """Within the block every kernel runs compiled, ``interpreted()`` or not (the warm-up)."""
    token = _COMPILED.set(True)
    try:
        yield
    finally:
        _COMPILED.reset(token)


@functools.cache
def _digest() -> str:
    """Of this version's kernels: the contents of every source that may hold one, numba's
    version and Python's."""
    digest = hashlib.sha256(f"{_numba_version()} {sys.version}".encode())
    for package in _SOURCES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        for source in sorted(Path(spec.origin).parent.glob("*.py")):
            digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _version_dir(base: Path) -> Path:
    """This version's kernel cache under ``base``, made now if it is new; then only the
    latest ``KEEP_VERSIONS`` of them are kept."""
    here = base / f"kernels-{_digest()}"
    if here.is_dir():
        return here
    with contextlib.suppress(OSError):  # numba makes it itself if this fails
        here.mkdir(parents=True, exist_ok=True)
        others = [p for p in base.glob("kernels-*") if p != here and p.is_dir()]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[KEEP_VERSIONS - 1 :]:
            shutil.rmtree(old, ignore_errors=True)
    return here


def _stamp(part: str) -> Path | None:
    """The file that says this version's kernels of ``part`` are compiled into ``CACHE_DIR``."""
    if CACHE_DIR is None:
        return None
    return _version_dir(CACHE_DIR) / f"alloc-planner-{part}.compiled"


def _numba_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return "unknown"


_WARMING = [False]  # True while ``planner warm`` runs: no advice to run it


def warming() -> None:
    """Say that ``planner warm`` is compiling: the compile notes leave out their advice."""
    _WARMING[0] = True


def announce(part: str) -> None:
    """Before the first run in a process of one part's compiled code (``"core"``, an exact
    method): say on stderr when that run will compile its kernels (the first run after an
    install, or no writable cache), and record it, so later processes stay quiet."""
    if part in _said:
        return
    _said.add(part)
    stamp = _stamp(part)
    if stamp is not None and stamp.exists():
        return
    if stamp is None:
        note = (
            "planner: no writable cache for compiled kernels (set NUMBA_CACHE_DIR); "
            f"compiling them in memory, ~{COMPILE_SECONDS} s per process"
        )
    else:
        advice = "" if _WARMING[0] else "; 'planner warm' does it ahead of time"
        note = f"planner: compiling planner kernels ({part}), once, up to ~{COMPILE_SECONDS} s"
        note += advice
    print(note, file=sys.stderr, flush=True)
    if stamp is not None:
        with contextlib.suppress(OSError):  # a read-only cache: the next run says it again
            stamp.touch()
