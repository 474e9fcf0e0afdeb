"""Requests (and buffer lists) several test modules share."""

from __future__ import annotations

from typing import Any

# Two sequential buffers that may share bytes across the barrier at 4, and one live beside
# both.
TWO_PHASE: dict[str, Any] = {
    "name": "k",
    "capacity": 1024,
    "alignment": 16,
    "barriers": [4],
    "buffers": [
        {"id": "a", "size": 64, "start": 0, "end": 4},
        {"id": "b", "size": 64, "start": 4, "end": 8},
        {"id": "c", "size": 32, "start": 2, "end": 6},
    ],
    "options": {"sync": "existing"},
}

# Ten buffers on sm_80 under a capacity, two barriers given and more may be inserted; one id
# ("x<&>") must be escaped in XML.
TEN: dict[str, Any] = {
    "name": "ten",
    "target": "sm_80",
    "capacity": 20000,
    "alignment": 16,
    "barriers": [3, 6],
    "buffers": [
        {"id": "A_s", "size": 4096, "start": 0, "end": 3},
        {"id": "B_s", "size": 4096, "start": 0, "end": 3},
        {"id": "acc", "size": 8192, "start": 1, "end": 8},
        {"id": "C_s", "size": 6144, "start": 3, "end": 6},
        {"id": "red", "size": 512, "start": 4, "end": 5},
        {"id": "tmp1", "size": 1024, "start": 5, "end": 7},
        {"id": "tmp2", "size": 2048, "start": 6, "end": 9},
        {"id": "out", "size": 4096, "start": 7, "end": 10},
        {"id": "idx", "size": 256, "start": 0, "end": 10},
        {"id": "x<&>", "size": 3000, "start": 8, "end": 10},
    ],
    "options": {"sync": "insert"},
}

# Requests and the kinds of mark their memory map draws, so its legend must name exactly
# these.
LEGEND_CASES: dict[str, tuple[dict[str, Any], set[str]]] = {
    "inserted barriers and capacity": (
        TEN,
        {"barrier-existing", "barrier-inserted", "capacity", "lower-bound", "live"},
    ),
    "existing barriers only, no capacity": (
        {**TEN, "capacity": None, "target": None, "options": {"sync": "existing"}},
        {"barrier-existing", "lower-bound", "live"},
    ),
    "the caller's barriers": (
        {**TEN, "capacity": None, "target": None, "barriers": [], "options": {"sync": "none"}},
        {"barrier-caller", "lower-bound", "live"},
    ),
    "no barriers at all": (
        {"name": "one", "buffers": [{"id": "a", "size": 64, "start": 0, "end": 4}]},
        {"lower-bound", "live"},
    ),
}

# Greedy by size is suboptimal here: c (6 B) and b (5 B) go to 0, a (4 B) above c at 6 and
# d (3 B) above a at 10: 13 B. Putting a at 0, under both c and b, gives the bound, 12 B.
CLASSIC: list[dict[str, Any]] = [  # buffers only
    {"id": "a", "size": 4, "start": 3, "end": 5},
    {"id": "b", "size": 5, "start": 4, "end": 5},
    {"id": "c", "size": 6, "start": 3, "end": 4},
    {"id": "d", "size": 3, "start": 4, "end": 5},
]

# One 128 KiB buffer shared by a grid of 16 blocks, each touching only its own 8 KiB slice
# (per-block footprints, shrink on).
SHARDED: dict[str, Any] = {
    "block": [128],
    "grid": [16],
    "alignment": 16,
    "buffers": [
        {
            "id": "w",
            "size": 131072,
            "start": 0,
            "end": 4,
            "accesses": [
                {
                    "op": "write",
                    "at": 0,
                    "bytes": 4,
                    "index": {"blockIdx.x": 2048, "r": 128, "threadIdx.x": 1},
                    "loops": {"r": 16},
                },
                {
                    "op": "read",
                    "at": 2,
                    "bytes": 4,
                    "index": {"blockIdx.x": 2048, "threadIdx.x": 16, "c": 1},
                    "loops": {"c": 16},
                },
            ],
        }
    ],
    "options": {"sync": "existing", "shrink": True},
}
