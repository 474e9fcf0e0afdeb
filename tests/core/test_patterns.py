"""First and last access, and the per-block slice of a buffer indexed by blockIdx."""

from __future__ import annotations

from typing import Any

from planner.core.models import PlanRequest
from planner.core.patterns import BlockSlice, access_span, block_slice


def _request(accesses: list[dict[str, Any]], size: int = 4096, grid: int = 4) -> PlanRequest:
    return PlanRequest.model_validate(
        {
            "block": [32],
            "grid": [grid],
            "buffers": [{"id": "w", "size": size, "start": 0, "end": 8, "accesses": accesses}],
        }
    )


def _read(at: int, index: dict[str, int], **extra: Any) -> dict[str, Any]:
    return {"op": "read", "at": at, "bytes": 4, "index": index, **extra}


def test_access_span_defaults_to_the_lifetime() -> None:
    request = _request([])
    assert access_span(request.buffers[0]) == (0, 7)
    request = _request([_read(5, {"threadIdx.x": 1}), _read(2, {"threadIdx.x": 1})])
    assert access_span(request.buffers[0]) == (2, 5)


def test_rows_of_one_block() -> None:
    # 4 blocks x 8 rows x 32 floats; block b reads rows 8b .. 8b+7.
    request = _request([_read(1, {"blockIdx.x": 256, "r": 32, "threadIdx.x": 1}, loops={"r": 8})])
    assert block_slice(request, request.buffers[0]) == BlockSlice(1024, {"blockIdx.x": 1024}, 0)


def test_constant_offset_is_kept_element_aligned() -> None:
    # Block b touches floats 256b + 3 .. 256b + 3 + 31: base 12 bytes, 128 bytes planned.
    index = {"blockIdx.x": 256, "threadIdx.x": 1}
    request = _request([_read(1, index, offset=3)])
    assert block_slice(request, request.buffers[0]) == BlockSlice(128, {"blockIdx.x": 1024}, 12)


def test_no_slice_without_a_moving_block_term() -> None:
    rows = {"blockIdx.x": 256, "threadIdx.x": 1}
    cases = [
        _request([_read(1, {"threadIdx.x": 1})]),  # no blockIdx
        _request([_read(1, rows)], grid=1),  # one block
        _request([_read(1, rows), _read(2, {"threadIdx.x": 1})]),  # strides differ
        _request([_read(1, rows), {"op": "read", "at": 2, "bytes": 4, "threads": "all"}]),
    ]
    for request in cases:
        assert block_slice(request, request.buffers[0]) is None
