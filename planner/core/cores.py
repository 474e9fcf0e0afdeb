"""How many cores this process may run on."""

from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores(default: int | None = None) -> int:
    """The cores this process may run on (its CPU affinity). Where the system does not say,
    ``default``, or else the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, default if default is not None else (os.cpu_count() or 1))
