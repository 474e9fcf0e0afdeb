"""Ring requests and the brute force over every combination of their depths."""

from __future__ import annotations

import itertools
import random
from typing import Any

import planner
from planner.core.io import parse_request
from planner.core.rings import expand

FITTING = ("optimal", "feasible")


def ring_request(seed: int) -> dict[str, Any]:
    """Two or three rings across a loop, a tile inside it and an epilogue after it."""
    rng = random.Random(seed)
    rings = rng.choice([2, 2, 3])
    buffers: list[dict[str, Any]] = []
    for k in range(rings):
        low = rng.randrange(1, 3)
        buffers.append(
            {
                "id": f"ring{k}",
                "size": rng.choice([1000, 4096, 8192, 12000]),
                "start": rng.choice([0, 1]),
                "end": 6,
                "alignment": rng.choice([16, 128]),
                "copies": {
                    "min": low,
                    "max": low + rng.randrange(1, 4),
                    "priority": rng.choice([1, 1, 2, 3]),
                },
            }
        )
    buffers.append({"id": "tile", "size": rng.choice([2048, 6000]), "start": 2, "end": 4})
    buffers.append({"id": "epilogue", "size": rng.choice([16384, 40000]), "start": 6, "end": 8})
    return {
        "name": f"rings{seed}",
        "capacity": rng.choice([30000, 50000, 70000, 100000]),
        "barriers": [2, 4, 6],
        "loops": [{"start": 2, "end": 6, "trips": 16}],
        "buffers": buffers,
        "options": {"sync": rng.choice(["existing", "insert"])},
    }


def brute_force(request: dict[str, Any]) -> tuple[dict[str, int], int] | None:
    """The best depths by planning every combination: most priority-weighted copies among
    the plans that fit, then the smallest arena, then the first combination."""
    parsed = parse_request(request)
    rings = [b for b in parsed.buffers if b.copies is not None]
    best: tuple[int, int, dict[str, int]] | None = None
    axes = [range(b.copies.min, b.copies.max + 1) for b in rings if b.copies is not None]
    for combo in itertools.product(*axes):
        copies = {b.id: c for b, c in zip(rings, combo, strict=True)}
        expanded = expand(parsed, copies)
        plan = planner.plan(expanded)
        assert planner.validate(expanded, plan).valid
        if plan.status not in FITTING:
            continue
        w = sum(b.copies.priority * copies[b.id] for b in rings if b.copies is not None)
        key = (-w, plan.arena_bytes)
        if best is None or key < best[:2]:
            best = (*key, copies)
    return None if best is None else (best[2], best[1])
