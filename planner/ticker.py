"""A line on a terminal that says how long a piece of work has run: nothing when piped."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TextIO

# Work shorter than this shows nothing; then the line is redrawn at this interval.
FIRST_AFTER = 0.5
EVERY = 0.25


class Ticker:
    """Shows ``label: 1.5 s of 10 s`` on ``stream`` while a block runs, if ``stream`` is a
    terminal, and clears it when the block ends; writes nothing to anything else."""

    def __init__(
        self,
        stream: TextIO,
        label: str,
        limit: float | None = None,
        *,
        first_after: float = FIRST_AFTER,
        every: float = EVERY,
    ) -> None:
        self.stream = stream
        self.label = label
        self.limit = limit
        self.first_after = first_after
        self.every = every
        self.live = stream.isatty()
        self.shown = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._began = 0.0

    def line(self, seconds: float) -> str:
        """The text shown after ``seconds`` of work."""
        of = f" of {self.limit:g} s" if self.limit is not None else ""
        return f"{self.label}: {seconds:.1f} s{of}"

    def _run(self) -> None:
        if self._stop.wait(self.first_after):
            return
        while True:
            self.stream.write("\r\x1b[K" + self.line(time.perf_counter() - self._began)[:120])
            self.stream.flush()
            self.shown = True
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> Ticker:
        self._began = time.perf_counter()
        if self.live:
            self._thread = threading.Thread(target=self._run, name="ticker", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
