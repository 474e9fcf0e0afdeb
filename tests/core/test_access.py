"""Owner analysis against a brute-force enumeration of every thread, block and loop value."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.core.access import (
    ANY,
    NONE,
    block_byte_range,
    block_spans,
    budget_diagnostics,
    byte_owners,
    enumeration_size,
    over_budget,
    uses_block_index,
)
from planner.core.models import PlanRequest

VARS = ("threadIdx.x", "threadIdx.y", "threadIdx.z", "blockIdx.x", "blockIdx.y", "i", "j")


def _brute(request: PlanRequest, index: int, before: int | None = None) -> list[int]:
    """Owners by walking every (block, thread, loop) tuple in pure Python."""
    buffer = request.buffers[index]
    block = [*(request.block or []), 1, 1, 1][:3]
    grid = [*(request.grid or []), 1, 1, 1][:3]
    seen: list[set[int]] = [set() for _ in range(buffer.size)]
    for a in buffer.accesses:
        if before is not None and a.at >= before:
            continue
        for bz, by, bx in itertools.product(*(range(d) for d in reversed(grid))):
            for z, y, x in itertools.product(*(range(d) for d in reversed(block))):
                t = x + y * block[0] + z * block[0] * block[1]
                if a.index is None:
                    for byte in range(buffer.size // a.bytes * a.bytes):
                        seen[byte].add(t)
                    continue
                env = {"threadIdx.x": x, "threadIdx.y": y, "threadIdx.z": z}
                env |= {"blockIdx.x": bx, "blockIdx.y": by, "blockIdx.z": bz}
                names = list(a.loops)
                for values in itertools.product(*(range(a.loops[n]) for n in names)):
                    env.update(zip(names, values, strict=True))
                    e = a.offset + sum(c * env[v] for v, c in a.index.items())
                    for byte in range(e * a.bytes, (e + 1) * a.bytes):
                        seen[byte].add(t)
    return [NONE if not s else next(iter(s)) if len(s) == 1 else ANY for s in seen]


@st.composite
def _access(draw: st.DrawFn, at: int) -> dict[str, Any]:
    width = draw(st.sampled_from([1, 2, 4]))
    if draw(st.integers(0, 9)) == 0:
        return {"op": "read", "at": at, "bytes": width, "threads": "all"}
    used = draw(st.lists(st.sampled_from(VARS), min_size=1, max_size=4, unique=True))
    index = {v: draw(st.integers(-3, 4)) for v in used}
    loops = {v: draw(st.integers(1, 3)) for v in used if v in ("i", "j")}
    return {
        "op": draw(st.sampled_from(["read", "write"])),
        "at": at,
        "bytes": width,
        "index": index,
        "loops": loops,
    }


@st.composite
def _requests(draw: st.DrawFn) -> PlanRequest:
    """One buffer sized so that every drawn access fits, with offsets shifting it inward."""
    block = [draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 2))]
    grid = [draw(st.integers(1, 3)), draw(st.integers(1, 2)), 1]
    accesses = [draw(_access(at)) for at in range(draw(st.integers(1, 4)))]
    extents = dict(zip(VARS[:5], [*block, *grid[:2]], strict=True))
    need = 1  # bytes
    for a in accesses:
        if "index" not in a:  # a broadcast: at least one whole element
            need = max(need, a["bytes"])
            continue
        lo = hi = 0
        for v, c in a["index"].items():
            span = c * ((extents.get(v) or a["loops"][v]) - 1)
            lo, hi = lo + min(0, span), hi + max(0, span)
        a["offset"] = -lo + draw(st.integers(0, 2))
        need = max(need, (hi + a["offset"] + 1) * a["bytes"])
    size = need + draw(st.integers(0, 5))
    return PlanRequest.model_validate(
        {
            "block": block,
            "grid": grid,
            "buffers": [{"id": "x", "size": size, "start": 0, "end": 8, "accesses": accesses}],
        }
    )


@settings(max_examples=60, deadline=None)
@given(_requests(), st.sampled_from([None, 1, 2, 3]))
def test_owners_match_brute_force(request: PlanRequest, before: int | None) -> None:
    result = byte_owners(request, 0, before=before)
    assert result.owners.dtype == np.int32
    assert result.owners.tolist() == _brute(request, 0, before)
    assert result.exact
    points = [a.at for a in request.buffers[0].accesses if before is None or a.at < before]
    assert result.first_access == (min(points) if points else None)
    assert result.last_access == (max(points) if points else None)


@settings(max_examples=40, deadline=None)
@given(_requests())
def test_block_ranges_bound_exactly_what_each_block_touches(request: PlanRequest) -> None:
    buffer = request.buffers[0]
    grid = request.grid or [1, 1, 1]
    for bx, by in itertools.product(range(grid[0]), range(grid[1])):
        one_block = request.model_copy(update={"grid": [1, 1, 1]})
        shifted = [
            a.model_copy(
                update={
                    "index": {v: c for v, c in a.index.items() if not v.startswith("blockIdx")},
                    "offset": a.offset
                    + a.index.get("blockIdx.x", 0) * bx
                    + a.index.get("blockIdx.y", 0) * by,
                }
            )
            if a.index is not None
            else a
            for a in buffer.accesses
        ]
        one_block = one_block.model_copy(
            update={"buffers": [buffer.model_copy(update={"accesses": shifted})]}
        )
        touched = [i for i, o in enumerate(_brute(one_block, 0)) if o != NONE]
        expected = (min(touched), max(touched) + 1) if touched else (0, 0)
        assert block_byte_range(request, 0, (bx, by, 0)) == expected


def _request(accesses: list[dict[str, Any]], **extra: Any) -> PlanRequest:
    data: dict[str, Any] = {
        "block": [32, 1, 1],
        "grid": [4, 1, 1],
        "buffers": [{"id": "s", "size": 512, "start": 0, "end": 6, "accesses": accesses}],
    }
    data.update(extra)
    return PlanRequest.model_validate(data)


def test_one_owner_per_float() -> None:
    request = _request([{"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}])
    owners = byte_owners(request, 0).owners
    assert owners[:128].tolist() == [t for t in range(32) for _ in range(4)]
    assert (owners[128:] == NONE).all()


def test_blocks_that_disagree_give_any() -> None:
    same = _request([{"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}])
    moving = _request(
        [{"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1, "blockIdx.x": 1}}]
    )
    assert (byte_owners(same, 0).owners[:128] >= 0).all()
    owners = byte_owners(moving, 0).owners
    assert owners[:4].tolist() == [0] * 4  # only thread 0 of block 0 reaches element 0
    assert (owners[4:128] == ANY).all()


def test_budget_falls_back_to_any_with_a_diagnostic() -> None:
    access = {"op": "read", "at": 2, "bytes": 1, "index": {"threadIdx.x": 1, "i": 1}}
    request = _request([{**access, "loops": {"i": 64}}])
    assert enumeration_size(request, request.buffers[0].accesses[0]) == 32 * 64
    exact = byte_owners(request, 0, budget=32 * 64)
    assert exact.exact
    fallback = byte_owners(request, 0, budget=32 * 64 - 1)
    assert not fallback.exact
    assert (fallback.owners == ANY).all()
    assert (fallback.first_access, fallback.last_access) == (2, 2)
    assert over_budget(request, budget=100) == ["s"]
    assert over_budget(request) == []
    (diag,) = budget_diagnostics(request, budget=100)
    assert diag.code == "owner_budget_exceeded"
    assert "'s'" in diag.message
    assert "2048" in diag.message


def test_buffer_without_patterns_is_any_over_its_lifetime() -> None:
    request = PlanRequest.model_validate(
        {"buffers": [{"id": "s", "size": 16, "start": 3, "end": 7}]}
    )
    result = byte_owners(request, 0)
    assert (result.owners == ANY).all()
    assert (result.first_access, result.last_access) == (3, 6)
    assert byte_owners(request, 0, before=5).last_access == 4
    early = byte_owners(request, 0, before=3)
    assert early.first_access is None
    assert (early.owners == NONE).all()


def test_before_keeps_earlier_accesses_only() -> None:
    request = _request(
        [
            {"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}},
            {"op": "read", "at": 4, "bytes": 4, "threads": "all"},
        ]
    )
    assert (byte_owners(request, 0, before=4).owners[:128] >= 0).all()
    assert (byte_owners(request, 0).owners[:128] == ANY).all()
    assert byte_owners(request, 0, before=1).first_access is None


def test_single_thread_block_owns_broadcasts() -> None:
    request = _request([{"op": "read", "at": 1, "bytes": 4, "threads": "all"}], block=[1])
    assert (byte_owners(request, 0).owners == 0).all()


def test_block_spans_and_index_use() -> None:
    request = _request(
        [
            {"op": "write", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1, "blockIdx.x": 32}},
            {"op": "read", "at": 2, "bytes": 4, "index": {"threadIdx.x": -1}, "offset": 31},
        ]
    )
    assert uses_block_index(request, 0)
    spans = block_spans(request, 0)
    assert [(s.block_coeffs, s.lo, s.hi) for s in spans] == [
        ((("blockIdx.x", 128),), 0, 128),
        ((), 0, 128),
    ]
    assert block_byte_range(request, 0, (2, 0, 0)) == (0, 384)
    plain = _request([{"op": "read", "at": 1, "bytes": 4, "index": {"threadIdx.x": 1}}])
    assert not uses_block_index(plain, 0)


@pytest.mark.parametrize("before", [None, 3])
def test_no_pattern_block_range_is_none(before: int | None) -> None:
    request = PlanRequest.model_validate(
        {"buffers": [{"id": "s", "size": 16, "start": 0, "end": 7}]}
    )
    assert block_byte_range(request, 0, (0, 0, 0)) is None
    assert block_spans(request, 0) == []
    assert byte_owners(request, 0, before=before).exact
