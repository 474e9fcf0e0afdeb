"""Counting what the emulator enumerates, where it does it."""

from __future__ import annotations

from typing import Any

import pytest

from planner.validators import emulator


class EmulationWork:
    """What the emulator enumerates, counted where it does it: elements of (thread, loop
    iteration) before two threads per element are kept, and (thread, byte) pairs per block."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.units = 0
        extremes, bytes_in = emulator._extremes, emulator._Shape.bytes_in

        def counted_extremes(elements: Any, threads: Any) -> Any:
            self.units += int(elements.size)
            return extremes(elements, threads)

        def counted_bytes_in(shape: Any, block: Any) -> Any:
            rel, threads, outside = bytes_in(shape, block)
            self.units += int(rel.size)
            return rel, threads, outside

        monkeypatch.setattr(emulator, "_extremes", counted_extremes)
        monkeypatch.setattr(emulator._Shape, "bytes_in", counted_bytes_in)
