"""Each extra works on its own: the wheel is built once and installed into a fresh virtual
environment per combination, and each one plans, serves or says in one line what is missing.
The ``image`` combination is built the way docker/Dockerfile builds the image (a virtual
environment with its own pip, the server and exact extras, then ``planner warm``) and starts
the service the way the image does. The other environments are made without pip, and this
interpreter's pip installs into them (``pip --python``): what they hold is the same, without
each one's seconds of installing pip itself.

Kernels run uncompiled (NUMBA_DISABLE_JIT) except in the image, which compiles them as the
image build does: the other combinations test the packaging, not the compiler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

import planner
from planner.core.io import parse_plan
from planner.selftest import subjects
from tests.support.paths import ROOT
from tests.support.server_process import free_port

pytestmark = pytest.mark.slow

ROOT = ROOT
EXAMPLE = ROOT / "examples" / "tvm_tiled_gemm.json"
COMBINATIONS = {
    "base": "",
    "server": "server",
    "exact": "exact",
    "gpu": "gpu",
    "image": "server,exact",
}
INSTALL_SECONDS = 600
# Two at a time: with the other tests running beside this file, more would only take the
# cores from them (and from the clock some of them plan against).
INSTALLS_AT_ONCE = 2
# setuptools builds wheels without the separate ``wheel`` package from 70.1 on.
OWN_BUILD_SETUPTOOLS = (70, 1)


def _run(
    argv: list[str], env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, check=False, cwd="/"
    )


def _clean_env() -> dict[str, str]:
    """The environment without this interpreter's paths: a new user's shell."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


def _has_build_backend() -> bool:
    """Whether this interpreter's setuptools meets pyproject.toml's build requirement and
    builds a wheel by itself: then the build may use it instead of an isolated one."""
    try:
        version = metadata.version("setuptools")
    except metadata.PackageNotFoundError:
        return False
    numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    return numbers >= OWN_BUILD_SETUPTOOLS


def _pip_argv(venv: Path) -> list[str]:
    """pip for ``venv``: its own where it has one (the image), else this interpreter's."""
    own = venv / "bin" / "pip"
    if own.exists():
        return [str(venv / "bin" / "python"), "-m", "pip"]
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: building writes build/ and egg-info beside the sources.
    source = tmp_path_factory.mktemp("source") / "alloc-planner"
    skip = shutil.ignore_patterns(".*", "build", "*.egg-info", "__pycache__", "tests", "docs")
    shutil.copytree(ROOT, source, ignore=skip)
    out = tmp_path_factory.mktemp("wheel")
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)]
    if _has_build_backend():
        argv.append("--no-build-isolation")  # no build environment to make and fill
    built = _run(argv, _clean_env(), INSTALL_SECONDS)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("alloc_planner-*.whl")
    return path


@pytest.fixture(scope="module")
def venvs(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One fresh environment per combination, installed ``INSTALLS_AT_ONCE`` at a time."""
    root = tmp_path_factory.mktemp("venvs")

    def make(name: str) -> tuple[str, Path]:
        venv = root / name
        without_pip = [] if name == "image" else ["--without-pip"]
        made = _run([sys.executable, "-m", "venv", *without_pip, str(venv)], _clean_env())
        assert made.returncode == 0, made.stderr
        extra = COMBINATIONS[name]
        spec = f"alloc-planner[{extra}] @ {wheel.as_uri()}" if extra else str(wheel)
        started = time.perf_counter()
        pip = [*_pip_argv(venv), "install", "-q", spec]
        if name != "image":
            # Packaging only: byte-compiling every dependency is half the install time, and
            # Python compiles what it imports anyway. The image is installed as it ships.
            pip.append("--no-compile")
        done = _run(pip, _clean_env(), INSTALL_SECONDS)
        assert done.returncode == 0, done.stderr[-2000:]
        print(f"{name}: installed in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return name, venv

    with ThreadPoolExecutor(INSTALLS_AT_ONCE) as pool:  # the image, the longest install, first
        return dict(pool.map(make, sorted(COMBINATIONS, key=lambda name: name != "image")))


def _env(venv: Path, *, jit: bool) -> dict[str, str]:
    env = _clean_env()
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env["NUMBA_CACHE_DIR"] = str(venv / "numba-cache")
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    return env


def _planner(venv: Path, *args: str, jit: bool = False) -> subprocess.CompletedProcess[str]:
    return _run([str(venv / "bin" / "planner"), *args], _env(venv, jit=jit))


def _error_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("planner: error:")]
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    return lines[0]


def _checked_plan(text: str) -> planner.Plan:
    plan = parse_plan(text)
    assert planner.validate(json.loads(EXAMPLE.read_text()), plan).valid
    return plan


def _get(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as answer:
            return int(answer.status), bytes(answer.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())


def _serve(argv: list[str], env: dict[str, str], port: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        argv, env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read() if process.stdout else ""
            pytest.fail(f"the service exited with {process.returncode}: {out[-2000:]}")
        try:
            if _get(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                return process
        except OSError:
            pass
        time.sleep(0.5)
    process.kill()
    pytest.fail("the service did not answer /healthz in time")


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(20)


def _plan_over_http(port: int) -> None:
    status, body = _get(f"http://127.0.0.1:{port}/plan", EXAMPLE.read_bytes())
    assert status == 200, body[:2000]
    _checked_plan(body.decode())


def test_base_plans_and_names_what_is_missing(venvs: dict[str, Path]) -> None:
    venv = venvs["base"]
    run = _planner(venv, "plan", str(EXAMPLE))
    assert run.returncode == 0, run.stderr
    _checked_plan(run.stdout)
    searched = _planner(venv, "plan", str(EXAMPLE), "--solver", "search")
    assert searched.returncode == 0, searched.stderr
    _checked_plan(searched.stdout)
    cpsat = _planner(venv, "plan", str(EXAMPLE), "--solver", "cpsat")
    assert cpsat.returncode == 2
    assert "[exact]" in _error_line(cpsat)
    serve = _planner(venv, "serve", "--port", str(free_port()))
    assert serve.returncode == 2
    line = _error_line(serve)
    assert "is not installed" in line
    assert "[server]" in line
    gpu = _planner(venv, "selftest", "--gpu")
    assert gpu.returncode == 2
    assert "[gpu]" in _error_line(gpu)


def test_server_alone_serves(venvs: dict[str, Path]) -> None:
    venv = venvs["server"]
    port = free_port()
    argv = [str(venv / "bin" / "planner"), "serve", "--port", str(port)]
    process = _serve(argv, _env(venv, jit=False), port)
    try:
        _plan_over_http(port)
        cpsat = json.loads(EXAMPLE.read_text())
        cpsat["options"] = {"solver": "cpsat"}
        status, body = _get(f"http://127.0.0.1:{port}/plan", json.dumps(cpsat).encode())
        assert status == 422
        assert "[exact]" in json.loads(body)["detail"][0]["msg"]
    finally:
        _stop(process)


def test_exact_adds_cpsat(venvs: dict[str, Path]) -> None:
    venv = venvs["exact"]
    run = _planner(venv, "plan", str(EXAMPLE), "--solver", "cpsat")
    assert run.returncode == 0, run.stderr
    assert _checked_plan(run.stdout).status == "optimal"


def test_gpu_adds_cupy(venvs: dict[str, Path]) -> None:
    venv = venvs["gpu"]
    code = "import cupy; print(cupy.__version__)"
    imported = _run([str(venv / "bin" / "python"), "-c", code], _clean_env())
    assert imported.returncode == 0, imported.stderr
    _planner_whole(venv)
    # CuPy is there; whether a device is depends on the machine: with one the self-test runs
    # on it, without one it says so in one line.
    selftest = _planner(venv, "selftest", "--gpu", jit=True)
    if selftest.returncode == 2:
        assert "CUDA device is missing" in _error_line(selftest)
    else:
        assert selftest.returncode == 0, selftest.stdout + selftest.stderr


def test_image_warms_serves_and_selftests(venvs: dict[str, Path]) -> None:
    venv = venvs["image"]
    warm = _planner(venv, "warm", jit=True)
    assert warm.returncode == 0, warm.stderr
    assert "compiled and loaded greedy" in warm.stderr
    port = free_port()
    env = {**_env(venv, jit=True), "PLANNER_PORT": str(port), "PLANNER_SOLVER_WORKERS": "1"}
    process = _serve([str(venv / "bin" / "python"), "-m", "planner.api"], env, port)
    try:
        _plan_over_http(port)
    finally:
        _stop(process)
    selftest = _planner(venv, "selftest", "--random", "4", jit=True)
    assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    # The wheel ships the examples: the installed self-test covers what the checkout's does.
    expected = len(subjects(4, 0))
    assert f"selftest ok: {expected} correct plans" in selftest.stdout + selftest.stderr


def _pip(venv: Path, *args: str) -> None:
    done = _run([*_pip_argv(venv), *args], _clean_env(), INSTALL_SECONDS)
    assert done.returncode == 0, done.stderr[-2000:]


def _validators_whole(venv: Path) -> None:
    """PyPI's ``validators`` package imports and its ``email`` check works."""
    code = "import validators; assert validators.email('a@example.com') is True"
    run = _run([str(venv / "bin" / "python"), "-c", code], _clean_env())
    assert run.returncode == 0, run.stderr


def _planner_whole(venv: Path) -> None:
    run = _planner(venv, "plan", str(EXAMPLE))
    assert run.returncode == 0, run.stderr
    _checked_plan(run.stdout)


def test_no_clash_with_other_distributions(venvs: dict[str, Path], wheel: Path) -> None:
    # PyPI's ``validators`` installs a top-level ``validators`` package: installing this
    # project before or after it, and removing either, must leave the other whole.
    venv = venvs["base"]
    _pip(venv, "install", "-q", "validators")  # after this project
    _validators_whole(venv)
    _planner_whole(venv)
    _pip(venv, "uninstall", "-y", "-q", "alloc-planner")
    _validators_whole(venv)
    _pip(venv, "install", "-q", str(wheel))  # before... now after it
    _validators_whole(venv)
    _planner_whole(venv)
    _pip(venv, "uninstall", "-y", "-q", "validators")
    _planner_whole(venv)


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/", 1)[0] for name in archive.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"planner"}
