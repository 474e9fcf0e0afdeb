"""Generated benchmark families: seeded, reproducible instances of plain DSA.

Most families are *tilings*: a rectangle ``capacity`` bytes high and ``horizon`` points wide
is cut into tiles, and each tile is a buffer (offset = its bottom, lifetime = its x range,
size = its height). Every point is covered from 0 to ``capacity``, so the lower bound (the
peak of live bytes) is the capacity and the tiling itself is a plan at it: the optimum is
known by construction.

- ``guillotine``: every cut runs straight across the tile it splits.
- ``pinwheel``: every split is a pinwheel (four tiles around a fifth, no straight cut
  through the rectangle), so no guillotine argument finds the plan; with ``1 + 4k``
  buffers only pinwheels, else straight cuts make up the count.
- ``mixed``: guillotine and pinwheel splits on a 16-byte grid, cuts snapped to 16, 128 or
  1024 bytes, each buffer aligned to 16, 128 or 1024 bytes as its place in the tiling allows.
- ``sparse``: a guillotine tiling with tiles removed, never those live at one chosen point,
  so the peak stays at the capacity and the rest of the tiling is still a plan at it.
- ``random-narrow`` / ``random-wide``: random lifetimes and sizes on a 1024-byte grid (narrow:
  1-32 KiB, wide: 1-256 KiB), sizes scaled so that the peak of live bytes is exactly the
  capacity; the optimum is unknown (often above the capacity).

- ``model``: one training step of a layered model (``planner.generate.model_request``: long-
  lived weights, nested saved activations, short temporaries, 128 B to 20 MB), up to
  ``MODEL_MAX_BUFFERS`` buffers, no capacity; the optimum is unknown.

The same (family, buffers, seed) gives the same request on any machine. ``TRAINING_SEED`` and
``CHECK_SEED`` name two disjoint sets: tune on the first, report the second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from planner.catalog import FAMILIES, MIN_BUFFERS, MODEL_MAX_BUFFERS
from planner.catalog import FAMILY_IDS as _FAMILY_IDS
from planner.core.io import parse_request
from planner.core.models import PlanRequest
from planner.generate import model_request

__all__ = [
    "CAPACITY",
    "CHECK_SEED",
    "FAMILIES",
    "MODEL_MAX_BUFFERS",
    "TILINGS",
    "TRAINING_SEED",
    "FamilyInstance",
    "family_instance",
    "family_suite",
]

CAPACITY = 1 << 20  # bytes: MiniMalloc's challenging instances use this capacity
GRID = 1024  # bytes: the size and offset grid of every family but ``mixed``
FINE_GRID = 16  # bytes: the grid of ``mixed``
HORIZON = 1024  # program points of a tiling
SNAPS = (16, 128, 1024)  # bytes: where ``mixed`` cuts may snap, and its alignments
SPARSE_DROP = 0.25  # fraction of its tiling that ``sparse`` drops (only tiles off one point)
MAX_BUFFERS = 4000
TRAINING_SEED = 1_000
CHECK_SEED = 2_000
Rng = np.random.Generator
Tile = tuple[int, int, int, int]  # x0, x1 (points), y0, y1 (grid units), half-open


@dataclass(frozen=True)
class FamilyInstance:
    """One generated request, with what is known about its optimum."""

    name: str
    request: PlanRequest
    optimum: int | None  # bytes, when known by construction
    offsets: list[int] | None  # a plan at ``optimum`` (request order), when known


def _area(t: Tile) -> int:
    return (t[1] - t[0]) * (t[3] - t[2])


def _cut(lo: int, hi: int, rng: Rng, snap: int = 1) -> int | None:
    """A cut strictly inside ``(lo, hi)``, in the middle half where there is room, on a
    multiple of ``snap`` when one lies there (None: no room)."""
    if hi - lo < 2:
        return None
    a, b = lo + (hi - lo) // 4, hi - (hi - lo) // 4
    a, b = max(a, lo + 1), min(b, hi - 1)
    if a > b:
        a, b = lo + 1, hi - 1
    snapped = list(range(-(-a // snap) * snap, b + 1, snap)) if snap > 1 else []
    if snapped:
        return int(snapped[int(rng.integers(len(snapped)))])
    return int(rng.integers(a, b, endpoint=True))


def _guillotine(t: Tile, rng: Rng, snap: int) -> list[Tile] | None:
    """Two tiles, cut across the longer side (time against bytes in units of the grid)."""
    x0, x1, y0, y1 = t
    across_time = (x1 - x0) * _units(snap) >= (y1 - y0) * HORIZON
    if across_time:
        x = _cut(x0, x1, rng)
        if x is not None:
            return [(x0, x, y0, y1), (x, x1, y0, y1)]
    y = _cut(y0, y1, rng, snap)
    if y is None:
        x = _cut(x0, x1, rng)
        return None if x is None else [(x0, x, y0, y1), (x, x1, y0, y1)]
    return [(x0, x1, y0, y), (x0, x1, y, y1)]


def _units(snap: int) -> int:
    """Grid units of the capacity (the grid is 1024 bytes unless snapping, then 16)."""
    return CAPACITY // (GRID if snap == 1 else FINE_GRID)


def _pair(lo: int, hi: int, rng: Rng, snap: int = 1) -> tuple[int, int] | None:
    """Two cuts ``lo < a < b < hi``."""
    if hi - lo < 3:
        return None
    a = _cut(lo, hi - 1, rng, snap)
    if a is None:
        return None
    b = _cut(a, hi, rng, snap)
    return None if b is None or b <= a else (a, b)


def _pinwheel(t: Tile, rng: Rng, snap: int) -> list[Tile] | None:
    """Five tiles: four turning around a central one; no straight cut separates them."""
    x0, x1, y0, y1 = t
    xs, ys = _pair(x0, x1, rng), _pair(y0, y1, rng, snap)
    if xs is None or ys is None:
        return None
    (xa, xb), (ya, yb) = xs, ys
    return [
        (x0, xb, y0, ya),
        (xb, x1, y0, yb),
        (xa, x1, yb, y1),
        (x0, xa, ya, y1),
        (xa, xb, ya, yb),
    ]


Split = Callable[[Tile, Rng, int], list[Tile] | None]


def _tiling(n: int, rng: Rng, splits: tuple[Split, ...], snap: int) -> list[Tile]:
    """Split the largest splittable tile (oldest first among equals) until ``n`` tiles, or
    until no split can add tiles without passing ``n``."""
    tiles: list[Tile] = [(0, HORIZON, 0, _units(snap))]
    stuck: set[Tile] = set()
    while len(tiles) < n:
        open_ = [k for k, t in enumerate(tiles) if t not in stuck]
        if not open_:
            break
        k = max(open_, key=lambda i: (_area(tiles[i]), -i))
        split = splits[int(rng.integers(len(splits)))]
        parts = split(tiles[k], rng, snap)
        if parts is None or len(tiles) - 1 + len(parts) > n:
            parts = _guillotine(tiles[k], rng, snap) if split is not _guillotine else None
            if parts is None or len(tiles) + 1 > n:
                stuck.add(tiles[k])
                continue
        tiles[k : k + 1] = parts
    return tiles


def _request(
    name: str, tiles: list[Tile], unit: int, alignments: list[int] | None, rng: Rng
) -> tuple[PlanRequest, list[int]]:
    """The tiles as buffers in a shuffled order, and their offsets (bytes) in that order."""
    order = rng.permutation(len(tiles)).tolist()
    buffers = []
    offsets = []
    for k, t in enumerate(order):
        x0, x1, y0, y1 = tiles[t]
        buffer: dict[str, object] = {
            "id": f"t{k}",
            "size": (y1 - y0) * unit,
            "start": x0,
            "end": x1,
        }
        if alignments is not None:
            buffer["alignment"] = alignments[t]
        buffers.append(buffer)
        offsets.append(y0 * unit)
    data = {
        "name": name,
        "capacity": CAPACITY,
        "alignment": 1,
        "buffers": buffers,
        "options": {"sync": "none"},
    }
    return parse_request(data), offsets


def _aligned(tiles: list[Tile], rng: Rng) -> list[int]:
    """Per tile an alignment of ``SNAPS`` that its offset (16-byte units) allows."""
    out = []
    for t in tiles:
        y = t[2] * FINE_GRID
        allowed = [a for a in SNAPS if y % a == 0]
        out.append(int(allowed[int(rng.integers(len(allowed)))]))
    return out


def _tiled(family: str, n: int, seed: int) -> FamilyInstance:
    rng = np.random.default_rng([seed, n, _FAMILY_IDS[family]])
    name = f"{family}-{n}-s{seed}"
    if family == "guillotine":
        tiles = _tiling(n, rng, (_guillotine,), 1)
    elif family == "pinwheel":
        tiles = _tiling(n, rng, (_pinwheel,), 1)
    elif family == "mixed":
        tiles = _tiling(n, rng, (_guillotine, _pinwheel), max(SNAPS))
    else:  # sparse: a larger tiling, thinned
        tiles = _tiling(round(n / (1 - SPARSE_DROP)), rng, (_guillotine,), 1)
        keep_at = int(rng.integers(HORIZON))
        removable = [k for k, t in enumerate(tiles) if not t[0] <= keep_at < t[1]]
        drop = max(0, min(len(removable), len(tiles) - n))
        gone = set(rng.choice(removable, size=drop, replace=False).tolist()) if drop else set()
        tiles = [t for k, t in enumerate(tiles) if k not in gone]
    if family == "mixed":
        request, offsets = _request(name, tiles, FINE_GRID, _aligned(tiles, rng), rng)
    else:
        request, offsets = _request(name, tiles, GRID, None, rng)
    return FamilyInstance(name, request, CAPACITY, offsets)


def _random(family: str, n: int, seed: int) -> FamilyInstance:
    """Random rectangles on the 1024-byte grid, the peak of live bytes exactly the capacity."""
    rng = np.random.default_rng([seed, n, _FAMILY_IDS[family]])
    top = 32 if family == "random-narrow" else 256  # grid units
    horizon = 4 * n
    start = rng.integers(0, horizon - 1, size=n)
    length = rng.integers(1, max(2, horizon // 4), size=n, endpoint=True)
    end = np.minimum(start + length, horizon)
    units = rng.integers(1, top, size=n, endpoint=True)
    load = np.zeros(horizon + 1, dtype=np.int64)
    np.add.at(load, start, units)
    np.add.at(load, end, -units)
    peak = int(np.cumsum(load).max())
    cap_units = CAPACITY // GRID
    # Scale down to fit, then raise one buffer live at the peak so the peak is the capacity.
    units = np.maximum(1, units * cap_units // max(peak, cap_units))
    load = np.zeros(horizon + 1, dtype=np.int64)
    np.add.at(load, start, units)
    np.add.at(load, end, -units)
    level = np.cumsum(load)
    at = int(level.argmax())
    live = np.flatnonzero((start <= at) & (end > at))
    units[int(live[0])] += cap_units - int(level[at])
    buffers = [
        {"id": f"r{i}", "size": int(units[i]) * GRID, "start": int(start[i]), "end": int(end[i])}
        for i in range(n)
    ]
    name = f"{family}-{n}-s{seed}"
    data = {
        "name": name,
        "capacity": CAPACITY,
        "alignment": 1,
        "buffers": buffers,
        "options": {"sync": "none"},
    }
    return FamilyInstance(name, parse_request(data), None, None)


TILINGS = ("guillotine", "pinwheel", "mixed", "sparse")  # the optimum is known


def family_instance(family: str, buffers: int, seed: int) -> FamilyInstance:
    """One instance of ``family`` with ``buffers`` buffers; raises ValueError naming a bad
    family or buffer count."""
    if family not in _FAMILY_IDS:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    top = MODEL_MAX_BUFFERS if family == "model" else MAX_BUFFERS
    if not MIN_BUFFERS <= buffers <= top:
        raise ValueError(f"buffers must be in [{MIN_BUFFERS}, {top}], got {buffers}")
    if family == "model":
        request = model_request(buffers, seed=seed)
        return FamilyInstance(f"model-{buffers}-s{seed}", request, None, None)
    if family.startswith("random"):
        return _random(family, buffers, seed)
    return _tiled(family, buffers, seed)


def family_suite(
    family: str, count: int, buffers: tuple[int, int], seed: int
) -> list[FamilyInstance]:
    """``count`` instances of ``family``, the k-th with a buffer count drawn from
    ``buffers`` (inclusive range) and seed ``seed + k``."""
    rng = np.random.default_rng([seed, _FAMILY_IDS.get(family, 0)])
    lo, hi = buffers
    out = []
    for k in range(count):
        n = int(rng.integers(lo, hi, endpoint=True)) if hi > lo else lo
        out.append(family_instance(family, n, seed + k))
    return out
