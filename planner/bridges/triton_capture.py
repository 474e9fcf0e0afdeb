"""Takes Triton's own shared-memory plan from inside its compile (docs/bridges.md, Triton).

Triton's NVIDIA backend runs its allocation and barrier passes in one pass manager with the
lowering to LLVM (``make_llir``), so a compiled kernel keeps only the TTGIR from before them.
While ``capturing()`` is open, Triton's stages-inspection hook (``knobs.runtime``) wraps that
stage: the pass manager it builds is recorded instead, then run as the same passes in the same
order, in three runs, and the module is printed between them: before ``scf_to_cf`` (the
structured form, after Triton's own passes that precede it), after the allocation, and after
the barrier passes (proxy fences, tensor-memory barriers, ``membar``). No pass runs twice, and
the compile's output is Triton's. The time the capture adds to the stage (everything in it but
the passes themselves) is measured and kept.

A stage the capture cannot follow (an instrumentation callback registered on Triton's pass
managers, a pipeline without those passes) runs as Triton wrote it, and nothing is captured
for that kernel.
"""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Captured", "capturing"]

_KEY = "planner-capture"  # in the cache key of a kernel compiled while capturing
# The three prints: before the first pass named here, and after the last one.
_STRUCTURED_BEFORE = "add_scf_to_cf"
_ALLOCATED_BEFORE = "add_proxy_fence_insertion"
_SYNCHRONIZED_AFTER = "add_membar"


@dataclass(frozen=True)
class Captured:
    """One kernel's module as Triton's own compile had it: structured, before ``scf_to_cf``;
    on its CFG form after the allocation (``allocated``) and after the barrier passes
    (``synchronized``). ``seconds``: what the capture added to the stage."""

    structured: str
    allocated: str
    synchronized: str
    capability: int
    seconds: float


class _Recorded:
    """A pass manager that records the passes added to it, then runs them in three real pass
    managers with the module printed between them."""

    def __init__(self, real_ir: Any, context: Any, sink: Callable[[dict[str, str], float], None]):
        self._ir = real_ir
        self._context = context
        self._sink = sink
        self._debug = False
        self.passes: list[tuple[str, Callable[..., None], tuple[Any, ...]]] = []

    def enable_debug(self) -> Any:
        self._debug = True
        return self._fresh().enable_debug()

    def _fresh(self) -> Any:
        return self._ir.pass_manager(self._context)

    def run(self, module: Any, label: str) -> None:
        names = [name for name, _, _ in self.passes]
        cuts: dict[int, str] = {}
        if {_STRUCTURED_BEFORE, _ALLOCATED_BEFORE, _SYNCHRONIZED_AFTER} <= set(names):
            cuts[names.index(_STRUCTURED_BEFORE)] = "structured"
            cuts[names.index(_ALLOCATED_BEFORE)] = "allocated"
            cuts[names.index(_SYNCHRONIZED_AFTER) + 1] = "synchronized"
        began = time.perf_counter()
        in_passes = 0.0
        printed: dict[str, str] = {}
        manager = self._new()
        for index, (_, add, args) in enumerate(self.passes):
            if index in cuts:
                start = time.perf_counter()
                manager.run(module, label)
                in_passes += time.perf_counter() - start
                printed[cuts[index]] = str(module.str_nodebug())
                manager = self._new()
            add(manager, *args)
        start = time.perf_counter()
        manager.run(module, label)
        in_passes += time.perf_counter() - start
        if len(printed) == 3:
            self._sink(printed, time.perf_counter() - began - in_passes)

    def _new(self) -> Any:
        manager = self._fresh()
        if self._debug:
            manager.enable_debug()
        return manager


class _Adds:
    """A namespace of Triton's pass bindings whose ``add_*`` functions record into a
    ``_Recorded`` pass manager (and add to a real one as before)."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if isinstance(value, types.ModuleType):
            return _Adds(value)
        if name.startswith("add_") and callable(value):

            def add(manager: Any, *args: Any) -> None:
                if isinstance(manager, _Recorded):
                    manager.passes.append((name, value, args))
                else:
                    value(manager, *args)

            return add
        return value


class _Ir:
    """Triton's ``ir`` bindings with ``pass_manager`` recording, in the thread that runs the
    wrapped stage only (another thread's compile gets Triton's own pass managers)."""

    def __init__(self, real: Any, sink: Callable[[dict[str, str], float], None]) -> None:
        self._real = real
        self._sink = sink
        self._thread = threading.get_ident()

    def __getattr__(self, name: str) -> Any:
        if name == "pass_manager" and threading.get_ident() == self._thread:
            return lambda context: _Recorded(self._real, context, self._sink)
        return getattr(self._real, name)


_SWAP = threading.Lock()  # one stage at a time runs with the backend's bindings swapped


def _instrumented() -> bool:
    """Whether an instrumentation callback may receive the backend's pass managers."""
    try:
        from triton import _instrumentation
    except ImportError:
        return False
    return bool(getattr(_instrumentation, "_callbacks", {}))


class _Stage:
    """The backend's ``llir`` stage, run with its pass managers recorded; each capture goes to
    every list of ``outs`` (one per open ``capturing()``)."""

    def __init__(self, stage: Callable[[Any, Any], Any], capability: int) -> None:
        self.stage = stage
        self.capability = capability
        self.outs: list[list[Captured]] = []

    def _sink(self, printed: dict[str, str], seconds: float) -> None:
        one = Captured(
            printed["structured"],
            printed["allocated"],
            printed["synchronized"],
            self.capability,
            seconds,
        )
        for out in self.outs:
            out.append(one)

    def __call__(self, src: Any, metadata: Any) -> Any:
        from triton.backends.nvidia import compiler

        if _instrumented():
            return self.stage(src, metadata)
        with _SWAP:
            held = (compiler.ir, compiler.passes, compiler.nvidia)
            compiler.ir = _Ir(held[0], self._sink)
            compiler.passes = _Adds(held[1])
            compiler.nvidia = _Adds(held[2])
            try:
                return self.stage(src, metadata)
            finally:
                compiler.ir, compiler.passes, compiler.nvidia = held


@contextmanager
def capturing() -> Iterator[list[Captured]]:
    """Within: each ``triton.compile`` for an NVIDIA target that compiles (not a cache hit)
    appends its ``Captured`` to the list this yields."""
    from triton import knobs

    out: list[Captured] = []
    previous = knobs.runtime.add_stages_inspection_hook

    def hook(*args: Any) -> Any:
        if not args:  # asked for the cache key
            key, digest = previous() if previous is not None else ("", "")
            return key + _KEY, digest
        if previous is not None:
            previous(*args)
        backend, stages, _options, _language, capability = args
        if type(backend).__module__ != "triton.backends.nvidia.compiler" or "llir" not in stages:
            return None
        if not isinstance(stages["llir"], _Stage):  # an enclosing capturing() wraps it first
            stages["llir"] = _Stage(stages["llir"], int(capability))
        stages["llir"].outs.append(out)
        return None

    knobs.runtime.add_stages_inspection_hook = hook
    try:
        yield out
    finally:
        knobs.runtime.add_stages_inspection_hook = previous
