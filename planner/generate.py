"""Synthetic requests for benchmarks and property tests: random lifetimes and sizes.

Starts are uniform over ``T = 10 * n`` program points. Two intervals of length ``L`` whose
starts are uniform over ``T`` intersect with probability about ``2L / T``, so a mean
lifetime length of ``L = overlap * T / 2`` makes each buffer overlap about ``overlap`` of
the others. Lengths are uniform in ``[1, 2L - 1]`` (mean ``L``) so that orderings by length
have something to sort. Sizes are log-uniform between 16 and 65536 bytes, rounded up to 16.

``random_program`` lays out a kernel with control flow: a prologue, an outer loop holding an
inner one, a two-armed branch, a second loop, an epilogue; buffers live inside a loop body
(they reuse their bytes across the back edge), inside an arm, across the whole branch, or in
two ranges (before and after the loops), and the loops' trip counts are exact, bounded
below, or unknown (then they may run zero times).

``model_request`` instead lays out one training step of a layered model, as a framework's
schedule would hand it over: forward layers, then backward layers in reverse, then the
optimizer step; per layer a weight live over the whole step, activations saved from their
forward point to their layer's backward point (so they nest around the turn), short-lived
forward and backward temporaries, and a gradient live from its backward point to the
optimizer. Sizes span five orders of magnitude (``MODEL_MIN_BYTES`` to ``MODEL_MAX_BYTES``).
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
    "MODEL_MAX_BYTES",
    "MODEL_MIN_BYTES",
    "all_overlapping",
    "model_request",
    "random_kernel",
    "random_program",
    "random_request",
]

I64 = npt.NDArray[np.int64]
_ModelKind = tuple[int, str, I64, I64, I64]
"""(kind rank, name prefix, sizes, starts, ends): arrays of shape (layers, k)."""
MIN_BYTES = 16
MAX_BYTES = 65536
_GRANULE = 16  # bytes; sizes are rounded up to a multiple of this
_SET = {"id", "size", "start", "end"}  # fields given, as if validated from a dict
KERNEL_MIN_BUFFERS = 16
MODEL_MIN_BYTES = 128
MODEL_MAX_BYTES = 20_000_000
# One layer of ``model_request``: its buffers by kind, and its program points.
_SAVED = 2  # activations kept for the backward pass
_FORWARD_TEMPS = 4
_BACKWARD_TEMPS = 5
_PER_LAYER = 1 + _SAVED + _FORWARD_TEMPS + _BACKWARD_TEMPS + 1  # + weight, gradient
_FORWARD_POINTS = 4
_BACKWARD_POINTS = 5
_TEMP_SPAN = 3  # points: a temporary lives 1 to this many
# ``random_program``'s points: regions [start, end) where its buffers may live.
_PROLOGUE = (0, 10)
_OUTER = (10, 30)  # loop, holding _INNER
_INNER = (14, 22)  # loop
_ARMS = ((30, 35), (35, 40))  # one branch
_SECOND = (40, 50)  # loop
_EPILOGUE = (50, 60)
_OUTER_TRIPS: tuple[dict[str, int], ...] = ({"trips": 8}, {"min_trips": 1})
_INNER_TRIPS: tuple[dict[str, int], ...] = ({"trips": 2}, {}, {"min_trips": 1, "max_trips": 4})
_SECOND_TRIPS: tuple[dict[str, int], ...] = ({}, {"max_trips": 16}, {"trips": 1})


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


def random_program(
    n: int, *, seed: int = 0, sync: str = "insert", alignment: int = 16
) -> PlanRequest:
    """``n`` buffers named ``b0..b{n-1}`` in a kernel with loops, a branch and buffers of two
    live ranges (module docstring), without access patterns; the same arguments give the
    same request. Raises ValueError for a negative ``n``, RequestError for a bad ``sync`` or
    ``alignment``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    sizes = _sizes(rng, n).tolist()
    regions = [_PROLOGUE, _OUTER, _INNER, *_ARMS, _SECOND, _EPILOGUE]

    def inside(lo: int, hi: int) -> list[int]:
        a = int(rng.integers(lo, hi - 1))
        return [a, int(rng.integers(a + 1, min(hi, a + 4), endpoint=True))]

    buffers: list[dict[str, object]] = []
    for i, size in enumerate(sizes):
        # The first five: one of each shape (two ranges, the whole epilogue, an arm, across
        # the branch, the inner body); then shapes at random.
        kind = i if i < 5 else int(rng.integers(0, 5))
        item: dict[str, object] = {"id": f"b{i}", "size": size}
        if kind == 0:  # two ranges, before and after the loops
            item["ranges"] = [inside(*_PROLOGUE), inside(*_EPILOGUE)]
        elif kind == 1:
            item.update(start=_EPILOGUE[0], end=_EPILOGUE[1])
        elif kind == 3:  # across the whole branch
            item.update(start=int(rng.integers(25, 30)), end=int(rng.integers(41, 46)))
        else:  # inside one region: an arm, the inner body, or any at random
            shaped = {2: _ARMS[0], 4: _INNER} if i < 5 else {}
            lo, hi = shaped.get(kind) or regions[int(rng.integers(0, len(regions)))]
            item.update(zip(("start", "end"), inside(lo, hi), strict=True))
        buffers.append(item)
    pick = [int(rng.integers(0, len(t))) for t in (_OUTER_TRIPS, _INNER_TRIPS, _SECOND_TRIPS)]
    return parse_request(
        {
            "name": f"random-program-{n}-seed{seed}",
            "alignment": alignment,
            "loops": [
                {"start": _OUTER[0], "end": _OUTER[1], **_OUTER_TRIPS[pick[0]]},
                {"start": _INNER[0], "end": _INNER[1], **_INNER_TRIPS[pick[1]]},
                {"start": _SECOND[0], "end": _SECOND[1], **_SECOND_TRIPS[pick[2]]},
            ],
            "branches": [{"arms": [list(arm) for arm in _ARMS]}],
            "buffers": buffers,
            "options": {"sync": sync},
        }
    )


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


def model_request(n: int, *, seed: int = 0, alignment: int = 16) -> PlanRequest:
    """``n`` buffers of a layered model's training step (module docstring), ``sync: "none"``
    and no capacity; the same arguments give the same request. Buffers come in start order
    (ties: weights, saved activations, temporaries, gradients, then layer), named by kind and
    layer (``w3``, ``a3.1``, ``f3.0``, ``b3.2``, ``g3``).

    Raises ValueError for a negative ``n`` and RequestError for a bad ``alignment``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = np.random.default_rng([seed, 7])
    layers = max(1, -(-n // _PER_LAYER))
    names, size_all, start_all, end_all, rank_all, layer_all = _model_flat(
        _model_kinds(rng, layers), layers
    )
    keep = np.lexsort((layer_all, rank_all, start_all))
    keep = keep[np.sort(rng.permutation(keep.size)[:n])] if keep.size > n else keep
    label = [names[i] for i in keep.tolist()]
    return _request(
        f"model-{n}-seed{seed}",
        start_all[keep],
        end_all[keep] - start_all[keep],
        size_all[keep],
        alignment,
        None,
        "none",
        label,
    )


def _model_kinds(rng: np.random.Generator, layers: int) -> list[_ModelKind]:
    """Every layer's buffers of each kind, drawn from ``rng``: weights, saved activations,
    forward and backward temporaries, gradients."""
    layer = np.arange(layers, dtype=np.int64)
    forward = layer * _FORWARD_POINTS  # first point of each layer's forward pass
    backward = layers * _FORWARD_POINTS + (layers - 1 - layer) * _BACKWARD_POINTS
    # The optimizer's point: after the last backward temporary has ended.
    step = layers * (_FORWARD_POINTS + _BACKWARD_POINTS) + _TEMP_SPAN
    # A per-layer width scales its activations and temporaries (wide and narrow layers).
    width = np.exp(rng.uniform(math.log(1 / 16), 0.0, size=layers))
    ones = np.ones(layers)
    weight = _model_sizes(rng, layers, 1, 4096, MODEL_MAX_BYTES / 4, ones)[:, 0]
    saved = _model_sizes(rng, layers, _SAVED, 16 * MODEL_MIN_BYTES, MODEL_MAX_BYTES, width)
    ftemp = _model_sizes(rng, layers, _FORWARD_TEMPS, MODEL_MIN_BYTES, MODEL_MAX_BYTES, width)
    btemp = _model_sizes(rng, layers, _BACKWARD_TEMPS, MODEL_MIN_BYTES, MODEL_MAX_BYTES, width)
    saved_at = rng.integers(0, _FORWARD_POINTS, size=(layers, _SAVED))
    used_at = rng.integers(0, _BACKWARD_POINTS, size=(layers, _SAVED))
    ftemp_at = rng.integers(0, _FORWARD_POINTS, size=(layers, _FORWARD_TEMPS))
    btemp_at = rng.integers(0, _BACKWARD_POINTS, size=(layers, _BACKWARD_TEMPS))
    fspan = rng.integers(1, _TEMP_SPAN, size=(layers, _FORWARD_TEMPS), endpoint=True)
    bspan = rng.integers(1, _TEMP_SPAN, size=(layers, _BACKWARD_TEMPS), endpoint=True)
    col = layer[:, None]
    return [
        (0, "w", weight[:, None], np.zeros((layers, 1), np.int64), np.full((layers, 1), step + 1)),
        (1, "a", saved, forward[:, None] + saved_at, backward[:, None] + used_at + 1),
        (2, "f", ftemp, forward[:, None] + ftemp_at, forward[:, None] + ftemp_at + fspan),
        (3, "b", btemp, backward[:, None] + btemp_at, backward[:, None] + btemp_at + bspan),
        (4, "g", weight[:, None], backward[:, None] + _BACKWARD_POINTS - 1, col * 0 + step + 1),
    ]


def _model_sizes(
    rng: np.random.Generator,
    layers: int,
    count: int,
    lo: float,
    hi: float,
    scale: npt.NDArray[np.float64],
) -> I64:
    """``count`` sizes per layer, log-uniform on ``[lo, hi)`` times the layer's ``scale``,
    clamped to the model's bounds and rounded up to the granule; shape (layers, count)."""
    raw = np.exp(rng.uniform(math.log(lo), math.log(hi), size=(layers, count)))
    raw = np.maximum(raw * scale[:, None], MODEL_MIN_BYTES)
    sized = np.ceil(raw / _GRANULE).astype(np.int64) * _GRANULE
    return np.minimum(sized, MODEL_MAX_BYTES)


def _model_flat(kinds: list[_ModelKind], layers: int) -> tuple[list[str], I64, I64, I64, I64, I64]:
    """The kinds' buffers in one list: names, then sizes, starts, ends, kind ranks and layers,
    kind by kind, layer by layer."""
    col = np.arange(layers, dtype=np.int64)[:, None]
    names: list[str] = []
    parts: list[tuple[I64, I64, I64, I64, I64]] = []
    for rank, prefix, size, begin, finish in kinds:
        k = size.shape[1]
        names += [
            f"{prefix}{j}" if k == 1 else f"{prefix}{j}.{i}"
            for j in range(layers)
            for i in range(k)
        ]
        shape = (layers, k)
        parts.append(
            (
                np.broadcast_to(size, shape).ravel(),
                np.broadcast_to(begin, shape).ravel(),
                np.broadcast_to(finish, shape).ravel(),
                np.full(layers * k, rank, np.int64),
                np.broadcast_to(col, shape).ravel(),
            )
        )
    size_all, start_all, end_all, rank_all, layer_all = (
        np.concatenate([p[f] for p in parts]) for f in range(5)
    )
    return names, size_all, start_all, end_all, rank_all, layer_all


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
    ids: list[str] | None = None,
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
            id=f"b{i}" if ids is None else ids[i],
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
