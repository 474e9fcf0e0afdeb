"""The command line's fixed-width tables."""

from __future__ import annotations

from planner.tables import format_columns


def test_columns_take_their_widest_cell_and_their_alignment() -> None:
    text = format_columns(
        [("name", "<"), ("bytes", ">"), ("note", "<")],
        [["a", "16384", "fits"], ["longer_name", "8", ""]],
    )
    assert text.splitlines() == [
        "name         bytes  note",
        "a            16384  fits",
        "longer_name      8",  # no blanks at the end of a line
    ]


def test_a_table_without_rows_is_its_headings() -> None:
    assert format_columns([("instance", "<"), ("ms", ">")], []) == "instance  ms"
