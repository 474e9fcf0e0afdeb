"""Random requests whose buffers carry thread-access patterns (hypothesis strategies)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

THREADS = 32  # block size of every generated request
WIDTH = 4  # bytes per element

# Element maps of one access over THREADS threads and ``i`` in [0, rows): "row" and "column"
# touch the same elements with different threads; "all" is a broadcast.
MAPPINGS = ("row", "column", "all")


def access(op: str, at: int, mapping: str, rows: int) -> dict[str, Any]:
    """One access of a ``rows x THREADS`` float tile."""
    if mapping == "all":
        return {"op": op, "at": at, "bytes": WIDTH, "threads": "all"}
    row = {"threadIdx.x": 1, "i": THREADS}
    column = {"threadIdx.x": rows, "i": 1}
    index = row if mapping == "row" else column
    return {"op": op, "at": at, "bytes": WIDTH, "index": index, "loops": {"i": rows}}


TILE = 2 * THREADS * WIDTH  # bytes: a 2 x 32 float tile


def tile(ident: str, start: int, end: int, write: str, read: str) -> dict[str, Any]:
    """A TILE-byte buffer written at ``start`` and read at ``end - 1`` with those mappings."""
    return {
        "id": ident,
        "size": TILE,
        "start": start,
        "end": end,
        "accesses": [access("write", start, write, 2), access("read", end - 1, read, 2)],
    }


@st.composite
def patterned_dicts(
    draw: st.DrawFn, *, max_buffers: int = 8, horizon: int = 12, sync: str | None = None
) -> dict[str, Any]:
    """A valid request of tiles written at their start and read at their last point."""
    n = draw(st.integers(1, max_buffers))
    buffers: list[dict[str, Any]] = []
    for i in range(n):
        start = draw(st.integers(0, horizon - 2))
        end = draw(st.integers(start + 1, min(horizon, start + 4)))
        rows = draw(st.sampled_from([1, 2, 4]))
        write = draw(st.sampled_from(("row", "row", "column")))
        read = draw(st.sampled_from(MAPPINGS))
        accesses = [access("write", start, write, rows)]
        if end - 1 > start:
            accesses.append(access("read", end - 1, read, rows))
        buffers.append(
            {
                "id": f"t{i}",
                "size": rows * THREADS * WIDTH,
                "start": start,
                "end": end,
                "alignment": draw(st.sampled_from([None, 16, 128])),
                "accesses": accesses,
            }
        )
    top = max(b["end"] for b in buffers)
    options: dict[str, Any] = {
        "sync": sync or draw(st.sampled_from(["existing", "insert"])),
        "time_limit": 0.5,  # seconds
    }
    if options["sync"] == "insert" and draw(st.booleans()):
        options["max_new_barriers"] = draw(st.integers(0, 2))
    return {
        "block": [THREADS],
        "alignment": 4,
        "barriers": draw(st.lists(st.integers(0, top), max_size=3)),
        "buffers": buffers,
        "options": options,
    }
