"""Synthetic requests for benchmarks and property tests: random lifetimes and sizes.

Starts are uniform over ``T = 10 * n`` program points. Two intervals of length ``L`` whose
starts are uniform over ``T`` intersect with probability about ``2L / T``, so a mean
lifetime length of ``L = overlap * T / 2`` makes each buffer overlap about ``overlap`` of
the others. Lengths are uniform in ``[1, 2L - 1]`` (mean ``L``) so that orderings by length
have something to sort. Sizes are log-uniform between 16 and 65536 bytes, rounded up to 16.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from planner.core.io import parse_request
from planner.core.models import Buffer, PlanRequest

__all__ = [
    "KERNEL_MIN_BUFFERS",
    "MAX_BYTES",
    "MIN_BYTES",
    "all_overlapping",
    "random_kernel",
    "random_request",
]

MIN_BYTES = 16
MAX_BYTES = 65536
_GRANULE = 16  # bytes; sizes are rounded up to a multiple of this
_SET = {"id", "size", "start", "end"}  # fields given, as if validated from a dict
KERNEL_MIN_BUFFERS = 16


def random_request(
    n: int,
    *,
    overlap: float = 0.01,
    seed: int = 0,
    alignment: int = 16,
    capacity: int | None = None,
    sync: str = "none",
) -> PlanRequest:
    """``n`` buffers named ``b0..b{n-1}``; the same arguments give the same request.

    Raises ValueError for a negative ``n`` or an overlap outside ``(0, 1]``, and RequestError
    for a bad ``alignment``, ``capacity`` or ``sync``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0.0 < overlap <= 1.0:
        raise ValueError(f"overlap must be in (0, 1], got {overlap}")
    rng = np.random.default_rng(seed)
    horizon = 10 * max(n, 1)  # program points
    mean_length = max(1.0, overlap * horizon / 2)
    start = rng.integers(0, horizon, size=n, dtype=np.int64)
    top = max(1, round(2 * mean_length - 1))
    length = rng.integers(1, top, size=n, dtype=np.int64, endpoint=True)
    size = _sizes(rng, n)
    name = f"random-{n}-overlap{overlap:g}-seed{seed}"
    return _request(name, start, length, size, alignment, capacity, sync)


def all_overlapping(n: int, *, seed: int = 0, alignment: int = 16) -> PlanRequest:
    """``n`` buffers all live on ``[0, 1)`` (sizes as ``random_request``): every pair
    conflicts, so the interference graph is one clique of ``n (n - 1) / 2`` edges and the
    optimum is the sum of the sizes. Raises ValueError for a negative ``n``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    zero = np.zeros(n, dtype=np.int64)
    return _request(
        f"all-overlapping-{n}-seed{seed}", zero, zero + 1, _sizes(rng, n), alignment, None, "none"
    )


def _sizes(rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
    """Log-uniform between MIN_BYTES and MAX_BYTES, rounded up to a multiple of 16."""
    raw = np.exp(rng.uniform(math.log(MIN_BYTES), math.log(MAX_BYTES), size=n))
    return np.minimum(np.ceil(raw / _GRANULE).astype(np.int64) * _GRANULE, MAX_BYTES)


def _request(
    name: str,
    start: npt.NDArray[np.int64],
    length: npt.NDArray[np.int64],
    size: npt.NDArray[np.int64],
    alignment: int,
    capacity: int | None,
    sync: str,
) -> PlanRequest:
    # Top-level fields are validated; the buffers are valid by construction (sizes >= 16,
    # end > start >= 0), and constructing them unvalidated is ~3x faster for 100 000. Every
    # field is passed: pydantic's default_factory lookup would cost more than validation.
    request = parse_request(
        {
            "name": name,
            "capacity": capacity,
            "alignment": alignment,
            "options": {"sync": sync},
            "buffers": [],
        }
    )
    buffers = [
        Buffer.model_construct(
            set(_SET),
            id=f"b{i}",
            size=s,
            start=lo,
            end=lo + ln,
            alignment=None,
            offset=None,
            accesses=[],
        )
        for i, (s, lo, ln) in enumerate(
            zip(size.tolist(), start.tolist(), length.tolist(), strict=True)
        )
    ]
    return request.model_copy(update={"buffers": buffers})


def random_kernel(
    seed: int,
    *,
    max_buffers: int = 64,
    overlap: float = 0.25,
    alignments: tuple[int, ...] = (16, 128),
) -> PlanRequest:
    """A kernel-sized request: ``KERNEL_MIN_BUFFERS`` to ``max_buffers`` buffers (drawn),
    laid out as by ``random_request`` (sizes multiples of 16 bytes, ``sync: "none"``), each
    aligned to one of ``alignments`` at random, so that padding, not size, often sets the
    optimum. The same arguments give the same request.

    Raises ValueError for ``max_buffers`` below ``KERNEL_MIN_BUFFERS`` or no alignment, and
    RequestError for an alignment a request may not have.
    """
    if max_buffers < KERNEL_MIN_BUFFERS:
        raise ValueError(f"max_buffers must be >= {KERNEL_MIN_BUFFERS}, got {max_buffers}")
    if not alignments:
        raise ValueError("alignments must name at least one alignment")
    for alignment in set(alignments):  # each, whether drawn or not
        parse_request({"alignment": alignment, "buffers": []})
    rng = np.random.default_rng(seed)
    n = int(rng.integers(KERNEL_MIN_BUFFERS, max_buffers, endpoint=True))
    request = random_request(n, overlap=overlap, seed=seed, alignment=16)
    drawn = rng.choice(list(alignments), size=n).tolist()
    data = request.model_dump()
    for buffer, alignment in zip(data["buffers"], drawn, strict=True):
        buffer["alignment"] = int(alignment)
    return parse_request(data)
