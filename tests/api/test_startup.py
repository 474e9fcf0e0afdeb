"""Start-up: a small request a greedy heuristic solves at its bound needs no compiled code,
no exact method and no heavy import; kernels run interpreted until they are loaded, with the
same plans."""

from __future__ import annotations

import contextvars
import json
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import planner
from planner.core import _jit, clock
from tests.support.paths import ROOT

ROOT = ROOT


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_small_request_loads_nothing_heavy() -> None:
    out = _run(
        """
        import json, sys
        import planner
        request = json.load(open("examples/tvm_tiled_gemm.json"))
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        heavy = ["numba", "ortools", "networkx", "fastapi", "uvicorn",
                 "planner.solvers.search", "planner.solvers.cpsat", "planner.api", "httpx"]
        print(json.dumps({"status": plan.status, "loaded": [m for m in heavy if m in sys.modules]}))
        """
    )
    report = json.loads(out)
    assert report["status"] == "optimal"
    assert report["loaded"] == []


# Modules that only other commands (bench, batch, selftest, warm, emitters) or the clients
# need; np.unique's first call loads numpy.ma.
OTHER_COMMANDS = [
    "planner.batch",
    "planner.bench",
    "planner.scaling",
    "planner.selftest",
    "planner.families",
    "planner.generate",
    "planner.emit",
    "planner.pipeline.warm",
    "planner.client",
    "numpy.ma",
]


def _cli_probe(*argv: str) -> list[str]:
    """Which of ``OTHER_COMMANDS`` a fresh ``planner`` process running ``argv`` loaded."""
    out = _run(
        f"""
        import json, sys
        from planner.cli import main
        code = main({list(argv)!r})
        assert code == 0, code
        watched = {OTHER_COMMANDS!r}
        print(json.dumps([m for m in watched if m in sys.modules]))
        """
    )
    loaded: list[str] = json.loads(out.strip().splitlines()[-1])
    return loaded


def test_plan_command_loads_only_what_it_runs(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    assert _cli_probe("plan", "examples/tvm_tiled_gemm.json", "-o", str(out)) == []
    plan = json.loads(out.read_text())
    request = json.loads((ROOT / "examples" / "tvm_tiled_gemm.json").read_text())
    assert planner.validate(request, plan).valid
    assert plan["status"] == "optimal"


def test_plan_command_loads_the_emitter_it_is_asked_for(tmp_path: Path) -> None:
    # The counter-check: the probe sees a module the command did load.
    svg = str(tmp_path / "map.svg")
    argv = ("plan", "examples/tvm_tiled_gemm.json", "-o", str(tmp_path / "p.json"), "--svg", svg)
    assert _cli_probe(*argv) == ["planner.emit"]


def test_a_request_that_needs_the_search_loads_it() -> None:
    # The counter-check: the probe above can see a module that is loaded.
    out = _run(
        """
        import sys
        import planner
        from planner.generate import random_kernel
        request = random_kernel(3, max_buffers=32)
        plan = planner.plan(request)
        assert planner.validate(request, plan).valid
        print("numba" in sys.modules, "planner.solvers.search" in sys.modules)
        """
    )
    assert out.split() == ["True", "True"]


@pytest.mark.slow
def test_first_plans_of_a_fresh_process_match_the_fixture() -> None:
    # A fresh process, no warm-up: the small requests' kernels run interpreted until some
    # request loads them; every plan must still be the recorded one (tests/data).
    out = _run(
        """
        import json
        import planner
        from planner.pipeline.facade import INTERPRETED_MAX_BUFFERS
        from tests.support.corpus import corpus, load_fixture, plan_hash
        expected = load_fixture()
        checked, changed = 0, []
        for name, request in corpus():
            if len(request.buffers) > INTERPRETED_MAX_BUFFERS:
                continue
            plan = planner.plan(request)
            assert planner.validate(request, plan).valid, name
            checked += 1
            if plan_hash(plan) != expected[name]:
                changed.append(name)
        print(json.dumps({"checked": checked, "changed": changed}))
        """
    )
    report = json.loads(out.strip().splitlines()[-1])
    assert report["checked"] > 250
    assert report["changed"] == []


def test_a_kernels_first_call_on_a_worker_thread_is_paused_on_the_requests_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The greedy portfolio runs on threads for large requests, where kernels may load for
    # the first time: that loading (made 1.5 s here) must move the deadline the request's
    # threads share, or the first plan of a process would stop short of later ones.
    kernel = _jit.Kernel(lambda x: x + 1, small=False)

    def slow(x: int) -> int:
        time.sleep(1.5)
        return x + 1

    monkeypatch.setattr(kernel, "load", lambda: slow)
    with clock.deadline(1.0):
        context = contextvars.copy_context()
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(context.run, kernel, 1).result() == 2
        assert not clock.expired()
        assert clock.wall_limit(1.0) > 0.5
    # The same work, not a kernel's first call, runs past the deadline.
    with clock.deadline(1.0):
        context = contextvars.copy_context()
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(context.run, slow, 1).result() == 2
        assert clock.expired()
