"""Requests with asynchronous accesses: a TMA-fed wgmma tile whose bytes an epilogue tile
stored by TMA and then a thread-only tile take over, and a thread-written tile that a TMA load
reuses behind a proxy fence."""

from __future__ import annotations

from typing import Any

import pytest

import planner
from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.validators.emulator import emulate

REQ: dict[str, Any] = {
    "name": "tma_epilogue",
    "target": "sm_90",
    "block": [128],
    "alignment": 16,
    "barriers": [4, 6],
    "syncs": [
        {"kind": "expect_tx", "at": 0, "mbarrier": "full"},
        {"kind": "mbarrier_wait", "at": 2, "mbarrier": "full"},
        {"kind": "wait_group", "at": 4, "group": "wgmma"},
        {"kind": "fence_proxy_async", "at": 6},
        {"kind": "wait_group", "at": 8, "group": "bulk", "read": True},
    ],
    "buffers": [
        {
            "id": "A",
            "size": 8192,
            "start": 0,
            "end": 5,
            "swizzle": "128B",
            "accesses": [
                {
                    "op": "write",
                    "at": 0,
                    "bytes": 16,
                    "threads": "all",
                    "agent": "tma",
                    "mbarrier": "full",
                },
                {"op": "read", "at": 3, "bytes": 16, "threads": "all", "agent": "mma"},
            ],
        },
        {
            "id": "C",
            "size": 8192,
            "start": 5,
            "end": 9,
            "swizzle": "none",
            "accesses": [
                {
                    "op": "write",
                    "at": 5,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 4},
                },
                {"op": "read", "at": 7, "bytes": 16, "threads": "all", "agent": "tma"},
            ],
        },
        {
            "id": "D",
            "size": 8192,
            "start": 9,
            "end": 11,
            "accesses": [
                {
                    "op": "write",
                    "at": 9,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 4},
                },
                {
                    "op": "read",
                    "at": 10,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 4},
                },
            ],
        },
    ],
    "options": {"sync": "insert", "time_limit": 2.0},
}

FENCE: dict[str, Any] = {
    "name": "fence",
    "target": "sm_90",
    "block": [128],
    "barriers": [2],
    "syncs": [
        {"kind": "fence_proxy_async", "at": 2},
        {"kind": "expect_tx", "at": 2, "mbarrier": "bar"},
        {"kind": "mbarrier_wait", "at": 4, "mbarrier": "bar"},
    ],
    "buffers": [
        {
            "id": "X",
            "size": 4096,
            "start": 0,
            "end": 2,
            "accesses": [
                {
                    "op": "write",
                    "at": 0,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 2},
                },
                {
                    "op": "read",
                    "at": 1,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 2},
                },
            ],
        },
        {
            "id": "Y",
            "size": 4096,
            "start": 2,
            "end": 6,
            "accesses": [
                {
                    "op": "write",
                    "at": 2,
                    "bytes": 16,
                    "threads": "all",
                    "agent": "tma",
                    "mbarrier": "bar",
                },
                {
                    "op": "read",
                    "at": 5,
                    "bytes": 16,
                    "index": {"threadIdx.x": 1, "i": 128},
                    "loops": {"i": 2},
                },
            ],
        },
    ],
    "options": {"sync": "existing", "time_limit": 2.0},
}


def planned(data: dict[str, Any]) -> tuple[PlanRequest, Plan]:
    """The request and its plan, which both validators accept."""
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert emulate(request, plan).valid
    return request, plan


def codes(request: PlanRequest, plan: Plan) -> tuple[set[str], set[str]]:
    """The violation codes the static validator and the emulator report."""
    static: set[str] = {v.code for v in planner.validate(request, plan).violations}
    return static, {v.code for v in emulate(request, plan).violations}


def refusals(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The errors a request is refused with."""
    with pytest.raises(RequestError) as info:
        parse_request(data)
    return info.value.errors
