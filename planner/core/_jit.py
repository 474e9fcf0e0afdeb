"""numba's ``njit``, with a writable on-disk cache so compiled kernels outlive the process,
and a notice on stderr when a run is about to compile them.

numba caches next to the source; where that is read-only (an installed wheel, a container
running as another user) it would fail, so the cache falls back to a per-user directory, then
to the temporary directory. Where none can be written, kernels are compiled in memory on every
run, and the first one says so once.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE = Path(__file__).resolve().parent
# Packages whose modules hold kernels; installed under planner (their folders in a checkout
# lie beside it, mapped there by the build).
_SOURCES = ("planner.core", "planner.pipeline", "planner.solvers", "planner.validators")
COMPILE_SECONDS = 10  # about how long compiling every kernel takes on a laptop core


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

import numba  # noqa: E402  (must follow the cache-directory choice)

__all__ = ["CACHE_DIR", "announce", "njit"]

_said: set[str] = set()  # parts this process has announced or found compiled


def njit(func: F) -> F:
    """Compile ``func`` in nopython mode, cached on disk when a cache can be written; typed
    as the Python function."""
    return cast(F, numba.njit(cache=CACHE_DIR is not None, nogil=True)(func))


def _stamp(part: str) -> Path | None:
    """The file that says this version's kernels of ``part`` are compiled into ``CACHE_DIR``."""
    if CACHE_DIR is None:
        return None
    digest = hashlib.sha256(f"{numba.__version__} {sys.version}".encode())
    for package in _SOURCES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        for source in sorted(Path(spec.origin).parent.glob("*.py")):
            stat = source.stat()
            digest.update(f"{source.name} {stat.st_size} {stat.st_mtime_ns}".encode())
    return CACHE_DIR / f"alloc-planner-{digest.hexdigest()[:16]}-{part}.compiled"


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
        note = (
            f"planner: compiling planner kernels ({part}), once, up to ~{COMPILE_SECONDS} s; "
            "'planner warm' does it ahead of time"
        )
    print(note, file=sys.stderr, flush=True)
    if stamp is not None:
        with contextlib.suppress(OSError):  # a read-only cache: the next run says it again
            stamp.touch()
