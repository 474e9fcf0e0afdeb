"""Request files: MiniMalloc CSV in and out, and loading a request from a JSON or CSV file.

MiniMalloc's CSV has a header naming its columns, in any order: ``id,lower,upper,size`` and
optionally ``alignment`` and ``offset``. Lifetimes are half-open ``[lower, upper)``; sizes,
alignments and offsets are bytes. A CSV carries no barriers, so it reads as plain Dynamic
Storage Allocation (``options.sync = "none"``). As in MiniMalloc, ``start``/``begin`` name
``lower``, ``buffer``/``buffer_id`` name ``id``, and an ``end`` column is an inclusive end
(``upper = end + 1``, MiniMalloc's old format). An ``offset`` pins the buffer.
"""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path
from typing import Any

from planner.core.errors import FormatError, RequestError
from planner.core.io import parse_request
from planner.core.models import DEFAULT_MAX_BUFFERS, Plan, PlanRequest

__all__ = [
    "CSV_COLUMNS",
    "csv_losses",
    "is_csv",
    "load_request",
    "read_csv",
    "with_overrides",
    "write_csv",
]

CSV_COLUMNS = ("id", "lower", "upper", "size", "alignment", "offset")
_REQUIRED = ("id", "lower", "upper", "size")
_ALIASES = {
    "buffer": "id",
    "buffer_id": "id",
    "start": "lower",
    "begin": "lower",
    "end": "upper",  # inclusive: read as end + 1
}
_FIELD_OF = {"lower": "start", "upper": "end"}  # CSV column -> Buffer field
_COLUMN_OF = {"start": "lower", "end": "upper"}  # Buffer field -> CSV column
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")  # 20 digits: past any model bound, never slow


def _format_error(line: int, column: str | None, msg: str, value: Any, type_: str) -> FormatError:
    where = f"line {line}" if column is None else f"line {line}, column {column}"
    return FormatError([{"loc": [where], "msg": msg, "type": type_, "input": value}])


def _read_header(row: list[str], line: int) -> tuple[dict[str, int], bool]:
    """Column name -> field index, and whether upper came from an inclusive ``end``."""
    columns: dict[str, int] = {}
    inclusive_end = False
    for k, raw in enumerate(row):
        name = raw.strip().lower()
        if k == 0:
            name = name.lstrip("\ufeff")
        if name == "gaps":
            raise _format_error(
                line, name, "lifetimes with gaps are not supported", raw, "csv_unsupported_column"
            )
        canonical = _ALIASES.get(name, name)
        if canonical not in CSV_COLUMNS:
            expected = ",".join(_REQUIRED) + "[,alignment][,offset]"
            raise _format_error(
                line,
                raw.strip() or f"#{k + 1}",
                f"unknown column {raw.strip()!r}; expected {expected}",
                raw,
                "csv_unknown_column",
            )
        if canonical in columns:
            raise _format_error(
                line, canonical, f"column {canonical!r} appears twice", raw, "csv_duplicate_column"
            )
        columns[canonical] = k
        inclusive_end = inclusive_end or name == "end"
    for name in _REQUIRED:
        if name not in columns:
            raise _format_error(
                line,
                None,
                f"the header has no {name!r} column; expected id,lower,upper,size"
                "[,alignment][,offset]",
                ",".join(row),
                "csv_missing_column",
            )
    return columns, inclusive_end


def _integer(text: str, line: int, column: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise _format_error(line, column, f"{text!r} is not an integer", text, "csv_not_integer")
    return int(text)


def read_csv(
    text: str,
    *,
    capacity: int | None = None,
    name: str = "minimalloc",
    max_buffers: int = DEFAULT_MAX_BUFFERS,
) -> PlanRequest:
    """A request from MiniMalloc CSV text; FormatError names the line, column and value.

    The semantic checks of the request model run too; their RequestError keeps the field's
    ``loc`` (``buffers.3.end``) and its message starts with the CSV line and column.
    """
    reader = csv.reader(io.StringIO(text), strict=True)
    columns: dict[str, int] | None = None
    inclusive_end = False
    buffers: list[dict[str, Any]] = []
    lines: list[int] = []  # CSV line of each buffer, for model errors
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if columns is None:
                columns, inclusive_end = _read_header(row, line)
                continue
            if len(row) > len(columns):
                raise _format_error(
                    line,
                    None,
                    f"{len(row)} fields but the header names {len(columns)} columns",
                    ",".join(row),
                    "csv_too_many_fields",
                )
            if len(buffers) >= max_buffers:
                raise RequestError.field(
                    ("buffers",),
                    f"more than {max_buffers} buffers (line {line}); the limit is {max_buffers}",
                    "too_many_buffers",
                    max_buffers + 1,
                )
            buffers.append(_read_row(row, columns, inclusive_end, line))
            lines.append(line)
    except csv.Error as exc:
        raise _format_error(
            reader.line_num, None, f"malformed CSV: {exc}", None, "csv_malformed"
        ) from None
    if columns is None:
        raise _format_error(
            1,
            None,
            "empty file; expected a header id,lower,upper,size[,alignment][,offset]",
            text[:80],
            "csv_empty",
        )
    data: dict[str, Any] = {
        "name": name,
        "capacity": capacity,
        "buffers": buffers,
        "options": {"sync": "none"},
    }
    try:
        return parse_request(data, max_buffers=max_buffers)
    except FormatError:
        raise
    except RequestError as exc:
        raise RequestError([_at_line(err, lines) for err in exc.errors]) from None


def _read_row(
    row: list[str], columns: dict[str, int], inclusive_end: bool, line: int
) -> dict[str, Any]:
    cells = {name: row[k].strip() if k < len(row) else "" for name, k in columns.items()}
    for name in _REQUIRED:
        if not cells[name]:
            raise _format_error(line, name, "missing value", "", "csv_missing_value")
    buffer: dict[str, Any] = {"id": cells["id"]}
    for name in ("lower", "upper", "size"):
        buffer[_FIELD_OF.get(name, name)] = _integer(cells[name], line, name)
    if inclusive_end:
        buffer["end"] += 1
    for name in ("alignment", "offset"):
        if cells.get(name):
            buffer[name] = _integer(cells[name], line, name)
    return buffer


def _at_line(err: dict[str, Any], lines: list[int]) -> dict[str, Any]:
    """A model error about ``buffers.i.field`` with the CSV line and column in its message."""
    loc = err.get("loc", [])
    if len(loc) >= 2 and loc[0] == "buffers" and isinstance(loc[1], int) and loc[1] < len(lines):
        line = lines[loc[1]]
        field = loc[2] if len(loc) >= 3 else None
        column = _COLUMN_OF.get(str(field), str(field)) if field is not None else None
        where = f"line {line}" if column is None else f"line {line}, column {column}"
        return {**err, "msg": f"{where}: {err.get('msg', 'invalid')}"}
    return err


def write_csv(request: PlanRequest, plan: Plan | None = None) -> str:
    """MiniMalloc CSV of the request; the offset column holds the plan's offsets if given,
    else the pinned ones. The alignment column appears only where an alignment is not 1."""
    offsets: dict[str, int] | None = None
    if plan is not None:
        offsets = {p.id: p.offset for p in plan.placements}
        missing = [b.id for b in request.buffers if b.id not in offsets]
        if missing:
            raise RequestError.field(
                ("plan", "placements"),
                f"the plan has no placement for buffer {missing[0]!r}"
                + (f" and {len(missing) - 1} more" if len(missing) > 1 else ""),
                "missing_placement",
                missing[0],
            )
    elif any(b.offset is not None for b in request.buffers):
        offsets = {b.id: b.offset for b in request.buffers if b.offset is not None}
    with_alignment = any(request.alignment_of(b) != 1 for b in request.buffers)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    header = ["id", "lower", "upper", "size"]
    if with_alignment:
        header.append("alignment")
    if offsets is not None:
        header.append("offset")
    writer.writerow(header)
    for b in request.buffers:
        row: list[str | int] = [b.id, b.start, b.end, b.size]
        if with_alignment:
            row.append(request.alignment_of(b))
        if offsets is not None:
            row.append(offsets.get(b.id, ""))
        writer.writerow(row)
    return out.getvalue()


def csv_losses(request: PlanRequest) -> list[str]:
    """What of the request a CSV cannot carry (empty when the CSV says everything)."""
    losses: list[str] = []
    if request.barriers:
        losses.append(f"{len(request.barriers)} barriers")
    n_accesses = sum(len(b.accesses) for b in request.buffers)
    if n_accesses:
        losses.append(f"{n_accesses} access patterns")
    if request.options.sync != "none":
        losses.append(f"sync policy {request.options.sync!r} (a CSV reads back as 'none')")
    if request.target is not None:
        losses.append(f"target {request.target!r}")
    if request.capacity is not None:
        losses.append(f"capacity {request.capacity}")
    if request.block is not None or request.grid is not None:
        losses.append("block and grid dimensions")
    return losses


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read().lstrip("\ufeff")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise _file_error(path, "no such file", "file_not_found") from None
    except IsADirectoryError:
        raise _file_error(path, "is a directory, not a request file", "file_unreadable") from None
    except OSError as exc:
        raise _file_error(path, exc.strerror or str(exc), "file_unreadable") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _file_error(path, f"not UTF-8 text (byte {exc.start})", "file_not_utf8") from None


def _file_error(path: str, msg: str, type_: str) -> FormatError:
    return FormatError([{"loc": [], "msg": msg, "type": type_, "input": path}])


def is_csv(path: str, text: str | None = None) -> bool:
    """CSV by extension; for stdin (``-``), anything that does not open like JSON."""
    if path == "-":
        return text is not None and not text.lstrip().startswith(("{", "["))
    return Path(path).suffix.lower() == ".csv"


def load_request(
    path: str,
    *,
    capacity: int | None = None,
    max_buffers: int = DEFAULT_MAX_BUFFERS,
) -> PlanRequest:
    """A request from a JSON or MiniMalloc CSV file (by extension; ``-`` reads stdin).

    ``capacity`` replaces the file's. Raises FormatError for an unreadable or malformed file
    (``loc`` empty: the file itself is at fault) and RequestError for a bad request.
    """
    text = _read_text(path)
    if not text.strip():
        what = "stdin" if path == "-" else path
        raise _file_error(
            what, "empty input; expected a JSON request or a MiniMalloc CSV", "file_empty"
        )
    if is_csv(path, text):
        name = "stdin" if path == "-" else Path(path).stem
        return read_csv(text, capacity=capacity, name=name, max_buffers=max_buffers)
    request = parse_request(text, max_buffers=max_buffers)
    return with_overrides(request, capacity=capacity)


def with_overrides(
    request: PlanRequest,
    *,
    capacity: int | None = None,
    solver: str | None = None,
    sync: str | None = None,
    time_limit: float | None = None,
    target: str | None = None,
) -> PlanRequest:
    """The request with the given fields replaced, checked again; unchanged if none given."""
    options: dict[str, Any] = {}
    if solver is not None:
        options["solver"] = solver
    if sync is not None:
        options["sync"] = sync
    if time_limit is not None:
        options["time_limit"] = time_limit
    if capacity is None and target is None and not options:
        return request
    data = request.model_dump()
    if capacity is not None:
        data["capacity"] = capacity
    if target is not None:
        data["target"] = target
    data["options"] = {**data["options"], **options}
    return parse_request(data, max_buffers=max(len(request.buffers), DEFAULT_MAX_BUFFERS))
