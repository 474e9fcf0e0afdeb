"""numba's ``njit``, with a writable on-disk cache so compiled kernels outlive the process."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

# numba caches next to the source; where that is read-only (an installed wheel, a container
# running as another user) it would fail, so fall back to a per-user cache directory.
if "NUMBA_CACHE_DIR" not in os.environ and not os.access(Path(__file__).parent, os.W_OK):
    os.environ["NUMBA_CACHE_DIR"] = str(Path.home() / ".cache" / "alloc-planner" / "numba")

import numba  # noqa: E402  (must follow the cache-directory choice)

__all__ = ["njit"]


def njit(func: F) -> F:
    """Compile ``func`` in nopython mode, cached on disk; typed as the Python function."""
    return cast(F, numba.njit(cache=True, nogil=True)(func))
