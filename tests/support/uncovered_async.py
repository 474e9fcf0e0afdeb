"""A request whose asynchronous access no sync completes: the plan gives it a wait under
sync "insert" or "none" (docs/design.md, Asynchronous accesses, Sync policies)."""

from __future__ import annotations

from typing import Any

# (agent, op) of each access a wait_group completes, and the wait's kind (its group).
AGENTS = {"cp.async": ("cp.async", "write"), "bulk": ("tma", "read"), "wgmma": ("mma", "read")}


def uncovered(kind: str, sync: str, issue: int = 1) -> dict[str, Any]:
    """``A`` [0, 4) with an asynchronous access of ``kind``'s agent at ``issue`` and no sync
    that completes it, then ``B`` [4, 8) on the threads: ``B`` may take ``A``'s bytes."""
    agent, op = AGENTS[kind]
    threads = {"bytes": 16, "index": {"threadIdx.x": 1}}
    return {
        "name": f"uncovered_{kind}",
        "target": "sm_90",
        "block": [128],
        "alignment": 128,
        "buffers": [
            {
                "id": "A",
                "size": 4096,
                "start": 0,
                "end": 4,
                "accesses": [
                    {"op": "write", "at": 0, **threads},
                    {"op": op, "at": issue, "bytes": 16, "threads": "all", "agent": agent},
                    {"op": "read", "at": 3, **threads},
                ],
            },
            {
                "id": "B",
                "size": 4096,
                "start": 4,
                "end": 8,
                "accesses": [
                    {"op": "write", "at": 4, **threads},
                    {"op": "read", "at": 7, **threads},
                ],
            },
        ],
        "options": {"sync": sync, "time_limit": 2.0},
    }
