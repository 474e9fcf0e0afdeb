"""What an exact method returns: the best plan it found and what it proved."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["ExactResult"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ExactResult:
    """Best plan found within the budget (None if none) and the proof reached."""

    name: str  # e.g. "cpsat", "search"
    offsets: I64 | None  # bytes, request order; None when no plan was found
    arena_bytes: int | None  # max(offset + size) of ``offsets``
    bound: int  # bytes: no plan within the constraints uses fewer
    proved_optimal: bool  # arena_bytes == bound, and proved
    infeasible: bool  # proved: no plan fits the capacity
