"""The request's columns: the buffers' fields as arrays, read once per request object."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from planner.core import columns as columns_module
from planner.core.columns import columns
from planner.core.graph import access_bounds, build_graph
from planner.core.models import PlanRequest


def _request() -> PlanRequest:
    return PlanRequest.model_validate(
        {
            "alignment": 16,
            "buffers": [
                {"id": "plain", "size": 100, "start": 0, "end": 4},
                {"id": "own", "size": 64, "start": 1, "end": 3, "alignment": 4, "offset": 512},
                {"id": "wide", "size": 40, "start": 2, "end": 9, "alignment": 4, "dtype": "f64"},
                {"id": "bar", "size": 8, "start": 0, "end": 6, "alignment": 2, "kind": "mbarrier"},
                {
                    "id": "touched",
                    "size": 32,
                    "start": 0,
                    "end": 10,
                    "accesses": [
                        {"op": "write", "at": 3, "bytes": 4, "threads": "all"},
                        {"op": "read", "at": 7, "bytes": 4, "threads": "all"},
                    ],
                },
            ],
        }
    )


def test_each_column_holds_the_field_it_names() -> None:
    cols = columns(_request())
    assert cols.start.tolist() == [0, 1, 2, 0, 0]
    assert cols.end.tolist() == [4, 3, 9, 6, 10]
    assert cols.size.tolist() == [100, 64, 40, 8, 32]
    # the request's 16 unless a buffer says otherwise; an f64 needs 8, an mbarrier 8
    assert cols.alignment.tolist() == [16, 4, 8, 8, 16]
    assert cols.pinned.tolist() == [-1, 512, -1, -1, -1]
    # without patterns the lifetime; with them the first access and the last one + 1
    assert cols.first_access.tolist() == [0, 1, 2, 0, 3]
    assert cols.access_end.tolist() == [4, 3, 9, 6, 8]


def test_columns_are_read_once_and_cannot_be_written() -> None:
    request = _request()
    cols = columns(request)
    assert columns(request) is cols
    with pytest.raises(ValueError, match="read-only"):
        cols.size[0] = 1


def test_a_copy_with_other_buffers_gets_its_own_columns() -> None:
    request = _request()
    before = columns(request)
    bigger = request.buffers[0].model_copy(update={"size": 4096})
    changed = request.model_copy(update={"buffers": [bigger, *request.buffers[1:]]})
    assert columns(changed).size.tolist() == [4096, 64, 40, 8, 32]
    realigned = request.model_copy(update={"alignment": 64})
    assert columns(realigned).alignment.tolist() == [64, 4, 8, 8, 64]
    assert columns(request) is before


def test_the_columns_go_with_their_request() -> None:
    request = _request()
    columns(request)
    key = id(request)
    assert key in columns_module._HELD
    del request
    gc.collect()
    assert key not in columns_module._HELD


def test_readers_get_arrays_of_their_own() -> None:
    request = _request()
    g = build_graph(request)
    first, after_last = access_bounds(request)
    g.size[0] = 1
    first[4] = 0
    after_last[4] = 0
    assert columns(request).size[0] == 100
    assert columns(request).first_access[4] == 3
    assert columns(request).access_end[4] == 8
    assert np.array_equal(build_graph(request).size, [100, 64, 40, 8, 32])
