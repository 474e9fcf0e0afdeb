"""Loading compiled kernels: a kernel's dispatcher reaches other threads only once the
kernels it calls are loaded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from planner.core import _jit


def _pair() -> tuple[_jit.Kernel, _jit.Kernel]:
    scope: dict[str, Any] = {"__name__": "tests.jit_pair"}
    exec("def callee(x):\n    return x + 1\n\ndef caller(x):\n    return callee(x) * 2\n", scope)
    callee = _jit.Kernel(scope["callee"], small=False)
    caller = _jit.Kernel(scope["caller"], small=False)
    scope["callee"], scope["caller"] = callee, caller
    return caller, callee


def test_another_thread_waits_while_the_kernels_called_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", None)  # functions made by exec have no cache
    caller, callee = _pair()
    inside, go = threading.Event(), threading.Event()
    load = callee.load

    def held() -> Callable[..., Any]:
        inside.set()
        go.wait(10)
        return load()

    monkeypatch.setattr(callee, "load", held)
    first = threading.Thread(target=caller.load)
    first.start()
    assert inside.wait(10)  # the caller is loading its callee
    got: list[Callable[..., Any]] = []
    second = threading.Thread(target=lambda: got.append(caller.load()))
    second.start()
    second.join(0.3)
    waited = not got  # no dispatcher while its callee is still a plain function
    go.set()
    first.join(10)
    second.join(10)
    assert waited
    assert len(got) == 1
    assert caller(1) == 4


def _kernel(source: str, name: str, *, small: bool) -> _jit.Kernel:
    scope: dict[str, Any] = {"__name__": f"tests.jit_{name}"}
    exec(source, scope)
    return _jit.Kernel(scope[name], small=small)


def test_a_small_kernel_runs_interpreted_until_a_compiled_one_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", None)  # functions made by exec have no cache
    monkeypatch.setattr(_jit, "_loaded_any", False)
    small = _kernel("def twice(x):\n    return 2 * x\n", "twice", small=True)
    with _jit.interpreted():
        assert small(3) == 6
        assert small._compiled is None  # ran as Python: nothing was loaded for it
        other = _kernel("def inc(x):\n    return x + 1\n", "inc", small=False)
        assert other(1) == 2  # a compiled kernel: numba is in now
        assert small(4) == 8
        assert small._compiled is not None  # so the small one loads on its next call
