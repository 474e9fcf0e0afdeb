"""First use: install hints that work from where the user is, the warm-up of what is
installed, the compile notice, and the command-line conventions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import planner
from planner.cli import main
from planner.core import _jit, install
from planner.core.errors import FormatError
from planner.core.io import parse_plan
from planner.core.targets import TARGETS
from planner.pipeline import warm
from tests.support.paths import ROOT

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "tvm_tiled_gemm.json"

Capture = pytest.CaptureFixture[str]


class _Dist:
    def __init__(self, direct_url: str | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        return self.direct_url


def _installed_from(monkeypatch: pytest.MonkeyPatch, direct_url: dict[str, object] | None) -> None:
    text = None if direct_url is None else json.dumps(direct_url)
    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(text))


def test_hint_for_an_editable_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_from(
        monkeypatch, {"url": "file:///src/my%20planner", "dir_info": {"editable": True}}
    )
    assert install.install_hint("exact") == "pip install -e '/src/my planner[exact]'"


def test_hint_for_a_plain_install_of_a_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed_from(monkeypatch, {"url": "file:///src/planner", "dir_info": {}})
    assert install.install_hint("server") == "pip install '/src/planner[server]'"


def test_hint_for_a_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = "/dist/alloc_planner-0.1.0-py3-none-any.whl"
    _installed_from(monkeypatch, {"url": f"file://{wheel}", "archive_info": {}})
    assert install.install_hint("gpu") == f"pip install 'alloc-planner[gpu] @ file://{wheel}'"


def test_hint_without_a_known_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _installed_from(monkeypatch, None)
    monkeypatch.setattr(install, "_ROOT", tmp_path)  # no pyproject.toml there
    hint = install.install_hint("exact")
    assert hint == "pip install '<path to the alloc-planner checkout>[exact]'"


def test_hint_never_names_the_package_index() -> None:
    # The distribution is not on the index: a bare "alloc-planner[x]" would fail or worse.
    for extra in ("server", "exact", "gpu", "compare"):
        hint = install.install_hint(extra)
        assert f"'alloc-planner[{extra}]'" not in hint
        assert f"[{extra}]" in hint


def test_warm_up_skips_cpsat_without_the_exact_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm, "available", lambda extra: extra != "exact")
    solvers = [r["options"]["solver"] for r in warm.warm_up_requests()]
    assert "cpsat" not in solvers
    assert "search" in solvers
    monkeypatch.setattr(warm, "available", lambda extra: True)
    assert "cpsat" in [r["options"]["solver"] for r in warm.warm_up_requests()]


def test_warm_up_requests_plan_and_validate() -> None:
    for request in warm.warm_up_requests():
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid


# In a fresh process: the warm-up, then a model-like request of another shape (nested
# lifetimes, every buffer meeting the others: dense); prints the kernels that request loaded.
_LOADED_AFTER_WARM_UP = """
import json, sys
import planner
from planner.core._jit import Kernel
from planner.pipeline.warm import ensure_warm
from planner.solvers.greedy import DENSE_DEGREE, SKYLINE_MAX_BUFFERS

def unloaded():
    return {
        f"{name}.{key}"
        for name, module in list(sys.modules.items())
        if name.startswith("planner.")
        for key, value in list(vars(module).items())
        if isinstance(value, Kernel) and value._compiled is None
    }

ensure_warm(planner.plan)
before = unloaded()
n = max(SKYLINE_MAX_BUFFERS, DENSE_DEGREE) + 400
request = {
    "options": {"time_limit": 2.0},
    "buffers": [
        {"id": f"t{i}", "size": 64 * (1 + i % 13), "start": i // 4, "end": 2 * n - i // 4}
        for i in range(n)
    ],
}
plan = planner.plan(request)
assert planner.validate(request, plan).valid
print(json.dumps(sorted(before - unloaded())))
"""


@pytest.mark.slow
def test_a_dense_model_like_request_loads_no_kernel_after_the_warm_up() -> None:
    # Its greedy fits run on the segment tree; loading those kernels on its first call would
    # make the first such request after a start wait for them (seconds, compiling after an
    # install).
    run = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER_WARM_UP],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.splitlines()[-1]) == []


def test_compile_notice_once_then_quiet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Capture
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(_jit, "_said", set())
    _jit.announce("core")
    first = capsys.readouterr().err
    assert "compiling planner kernels (core), once" in first
    _jit.announce("core")  # the same process
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_jit, "_said", set())  # a later process, same cache
    _jit.announce("core")
    assert capsys.readouterr().err == ""
    _jit.announce("search")  # another part is announced on its own
    assert "(search)" in capsys.readouterr().err


def test_compile_notice_without_a_writable_cache(
    monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    monkeypatch.setattr(_jit, "CACHE_DIR", None)
    monkeypatch.setattr(_jit, "_said", set())
    _jit.announce("core")
    assert "no writable cache for compiled kernels" in capsys.readouterr().err


def test_cache_dir_falls_back_when_the_package_is_read_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The fallback tells numba through the environment: a copy here, so the choice made for
    # this test's home does not reach the processes later tests start.
    monkeypatch.setattr(os, "environ", dict(os.environ))
    os.environ.pop("NUMBA_CACHE_DIR", None)
    monkeypatch.setattr(_jit, "_PACKAGE", tmp_path / "missing")  # not writable: absent
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    assert _jit._cache_dir() == tmp_path / ".cache" / "alloc-planner" / "numba"
    assert os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / ".cache" / "alloc-planner" / "numba")
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/proc/no-such-place")
    assert _jit._cache_dir() is None


def test_version(capsys: Capture) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("planner ")
    assert out.split()[1][0].isdigit()


def test_python_dash_m_planner() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "planner", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("planner ")


def test_help_shows_the_defaults(capsys: Capture) -> None:
    assert main(["plan", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "else 10)" in text  # time limit
    assert "else insert)" in text  # sync
    assert "else auto)" in text  # solver


def test_plan_with_a_target(tmp_path: Path, capsys: Capture) -> None:
    out = tmp_path / "plan.json"
    assert main(["plan", str(EXAMPLE), "--target", "sm_75", "-o", str(out)]) == 0
    plan = parse_plan(out.read_text())
    assert plan.capacity == TARGETS["sm_75"].max_smem_per_block
    request = json.loads(EXAMPLE.read_text())
    request["target"] = "sm_75"
    assert planner.validate(request, plan).valid
    assert main(["plan", str(EXAMPLE), "--target", "sm_11"]) == 2
    assert "sm_11" in capsys.readouterr().err


def test_plan_takes_a_path_and_says_what_a_string_must_be() -> None:
    plan = planner.plan(EXAMPLE)
    assert planner.validate(json.loads(EXAMPLE.read_text()), plan).valid
    assert plan.model_dump_json() == planner.plan(EXAMPLE.read_text()).model_dump_json()
    assert plan.model_dump_json() == planner.plan(str(EXAMPLE)).model_dump_json()
    with pytest.raises(FormatError, match=r"a file is planned by its path"):
        planner.validate(str(EXAMPLE), plan)


def test_warm_says_what_it_compiled_once_each(capsys: Capture) -> None:
    assert main(["warm"]) == 0
    err = capsys.readouterr().err
    assert "ahead of time" not in err  # no advice to run what is running
    (line,) = [x for x in err.splitlines() if x.startswith("planner: warm: compiled and loaded")]
    names = line.split("compiled and loaded ", 1)[1].split(" in ", 1)[0].split(", ")
    assert "greedy" in names
    assert "search" in names
    assert len(names) == len(set(names))


def test_serve_on_a_taken_address_is_one_line(capsys: Capture) -> None:
    pytest.importorskip("uvicorn")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--host", "127.0.0.1", "--port", str(port)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"planner: error: serve: cannot listen on 127.0.0.1:{port}")


@pytest.mark.parametrize("which", ["request", "plan"])
def test_schema_command(which: str, capsys: Capture) -> None:
    assert main(["schema", which]) == 0
    schema = json.loads(capsys.readouterr().out)
    if "$ref" in schema:  # a model that contains itself is a reference into $defs
        schema = schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    assert schema["type"] == "object"
    assert ("buffers" if which == "request" else "placements") in schema["properties"]
    assert main(["schema", "model"]) == 2
