"""Loading compiled kernels: a kernel's dispatcher reaches other threads only once the
kernels it calls are loaded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
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


_RUN = """
import sys
from pathlib import Path
from planner.core import _jit
_jit._SOURCES = ("kernelpkg",)
_jit.CACHE_DIR = Path(sys.argv[1])
from kernelpkg.caller import twice
print(twice(1))
"""


def _run_caller(tmp_path: Path) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return int(done.stdout.split()[-1])


def test_a_cached_kernel_runs_the_new_code_of_a_kernel_it_calls(tmp_path: Path) -> None:
    # numba keys a cached kernel by its own file's contents; the caller's file stays the same
    # here while its callee's changes, and the next process must run the new callee.
    package = tmp_path / "kernelpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "caller.py").write_text(
        "from planner.core._jit import njit\n"
        "from kernelpkg.callee import one\n\n\n"
        "@njit\ndef twice(x):\n    return 2 * one(x)\n"
    )
    callee = package / "callee.py"
    callee.write_text("from planner.core._jit import njit\n\n\n@njit\ndef one(x):\n    return x\n")
    assert _run_caller(tmp_path) == 2
    assert _run_caller(tmp_path) == 2  # from the cache
    callee.write_text(
        "from planner.core._jit import njit\n\n\n@njit\ndef one(x):\n    return x + 10\n"
    )
    assert _run_caller(tmp_path) == 22
    assert len(list((tmp_path / "cache").glob("kernels-*"))) == 2


def test_only_the_latest_kernel_caches_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = []
    for step, digest in enumerate(["a", "b", "c", "d", "e"]):
        monkeypatch.setattr(_jit, "_digest", lambda digest=digest: digest)
        made.append(_jit._version_dir(tmp_path))
        os.utime(made[-1], (1_000_000 + step, 1_000_000 + step))  # made in this order
        assert made[-1] == tmp_path / f"kernels-{digest}"
        assert made[-1].is_dir()
    kept = sorted(p.name for p in tmp_path.glob("kernels-*"))
    assert kept == ["kernels-c", "kernels-d", "kernels-e"][-_jit.KEEP_VERSIONS :]
    assert _jit._version_dir(tmp_path) == made[-1]  # an existing one is used as it is


def _borrowing(source: str) -> _jit.Kernel:
    """``caller`` of ``source``, its ``step`` made a kernel that borrows its arrays."""
    scope: dict[str, Any] = {"__name__": "tests.jit_borrows", "np": np}
    exec(source, scope)
    step = _jit.Kernel(scope["step"], small=False, borrows=True)
    caller = _jit.Kernel(scope["caller"], small=False)
    scope["step"], scope["caller"] = step, caller
    return caller


def test_a_step_that_borrows_its_arrays_computes_as_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", None)
    caller = _borrowing(
        "def step(a, b, k):\n    for i in range(a.size):\n        b[i] += a[i] * k\n"
        "    return b.sum()\n\n"
        "def caller(n):\n    a = np.arange(n)\n    b = np.ones(n, dtype=np.int64)\n"
        "    total = 0\n    for k in range(3):\n        total += step(a, b, k)\n"
        "    return total + b[-1]\n"
    )
    assert caller(50) == caller.py_func(50)


def test_a_step_that_borrows_its_arrays_may_not_make_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numba

    monkeypatch.setattr(_jit, "CACHE_DIR", None)
    caller = _borrowing(
        "def step(a):\n    return np.zeros(a.size).size\n\n"
        "def caller(n):\n    return step(np.arange(n))\n"
    )
    with pytest.raises(numba.core.errors.NumbaError):
        caller(5)


def test_a_step_inlined_by_numba_makes_arrays_and_computes_as_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", None)
    scope: dict[str, Any] = {"__name__": "tests.jit_inline", "np": np}
    exec(
        "def made(n):\n    a = np.arange(n)\n    return a, a * 2\n\n"
        "def caller(n):\n    total = 0\n    for k in range(3):\n"
        "        a, b = made(n + k)\n        total += a.sum() + b[-1]\n    return total\n",
        scope,
    )
    made = _jit.Kernel(scope["made"], small=False, inline=True)
    caller = _jit.Kernel(scope["caller"], small=False)
    scope["made"], scope["caller"] = made, caller
    assert caller(50) == caller.py_func(50)
    dispatcher: Any = caller.load()
    ir = "".join(dispatcher.inspect_llvm().values())
    assert "jit_inline4made" not in ir  # no call of the step: numba inlined it
    assert "jit_inline6caller" in ir
