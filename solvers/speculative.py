"""A method's run started ahead of its turn, on a thread of its own.

``solvers.auto`` runs the exact methods on a kernel-sized part in turn, each from what the
ones before it left: the bound and the plan. The window bound mostly leaves both as they
were, and it runs on one core. So the run that follows it (CP-SAT asked for a plan at the
bound) starts beside it, on the arguments it would get if the windows change nothing. When
its turn comes with those same arguments, its result is taken as if it had run then;
otherwise it is stopped and thrown away, and the method runs again on the new ones. Where it
finds a plan at the bound, the bound is proved and the windows cannot raise it: they are
told to stop (``settled``). Either way the plan is the one that running in turn gives: only
the wall time differs.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import numpy as np

from planner.core.graph import InterferenceGraph
from planner.solvers import registry
from planner.solvers.exact import Stop
from planner.solvers.solution import Solution

__all__ = ["SpeculativeRun"]

STOP_POLL = 0.002  # seconds between requests to stop, until the run has ended


class SpeculativeRun:
    """One run of ``method`` on ``g`` with ``arguments``, started now on another thread (in
    the caller's context: the request's deadline holds there too)."""

    def __init__(
        self, method: registry.ExactMethod, g: InterferenceGraph, arguments: dict[str, Any]
    ) -> None:
        self.arguments = arguments
        self.settled = Stop()  # stopped once the run has found a plan at the bound
        self._stop = Stop()
        self._result: Solution | None = None
        self._error: BaseException | None = None
        context = contextvars.copy_context()

        def run() -> None:
            try:
                result = method(g, **arguments, stop=self._stop)
                self._result = result
                found = result.arena_bytes
                if found is not None and found <= arguments["lower_bound"]:
                    # Optimal: no sound method running beside it can raise the bound now.
                    self.settled.stop()
            except BaseException as exc:  # raised again on the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=context.run, args=(run,), daemon=True)
        self._thread.start()

    def matches(self, arguments: dict[str, Any]) -> bool:
        """Whether the run was started on these arguments (progress listeners aside)."""
        mine = self.arguments
        if mine.keys() - {"on_progress"} != arguments.keys() - {"on_progress"}:
            return False
        for key, value in arguments.items():
            if key == "on_progress":
                continue
            if isinstance(value, np.ndarray) or isinstance(mine[key], np.ndarray):
                if not np.array_equal(value, mine[key]):
                    return False
            elif value != mine[key]:
                return False
        return True

    def result(self) -> Solution:
        """The run's result, once it has ended."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        """Stop the run and wait until it has ended; its result is thrown away. (Asked again
        until it ends: a request made just before the run begins could be missed.)"""
        while self._thread.is_alive():
            self._stop.stop()
            self._thread.join(STOP_POLL)
