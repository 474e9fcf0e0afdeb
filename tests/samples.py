"""Requests several test modules share."""

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
