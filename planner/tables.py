"""Fixed-width text tables, as the command line prints them (bench, batch, selftest, targets)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Column", "format_columns", "format_row"]

Column = tuple[str, str]  # (heading, "<" aligned left or ">" aligned right)


def format_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> str:
    """The headings, then one line per row: each column as wide as its widest cell, two
    spaces between columns, no blanks at the end of a line."""
    widths = [
        max([len(name), *(len(row[k]) for row in rows)]) for k, (name, _) in enumerate(columns)
    ]
    return "\n".join(
        format_row(columns, widths, cells) for cells in [[name for name, _ in columns], *rows]
    )


def format_row(columns: Sequence[Column], widths: Sequence[int], cells: Sequence[str]) -> str:
    """One line of a table whose columns have the given widths (a wider cell widens its
    line only): for rows printed as they come."""
    parts = [
        f"{cell:{align}{width}}"
        for cell, (_, align), width in zip(cells, columns, widths, strict=True)
    ]
    return "  ".join(parts).rstrip()
