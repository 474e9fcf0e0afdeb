"""Start-up: a small request a greedy heuristic solves at its bound needs no compiled code,
no exact method and no heavy import; kernels run interpreted until they are loaded, with the
same plans."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import planner

ROOT = Path(__file__).resolve().parents[1]


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
        from tests.corpus import corpus, load_fixture, plan_hash
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


@pytest.mark.slow
def test_kernels_first_loaded_on_worker_threads_do_not_cut_the_first_plan() -> None:
    # 3 000 buffers: the greedy portfolio runs on threads, where kernels load for the first
    # time; the time they take to load (made long here: a first compile) must be paused on
    # the request's deadline there too, or the first plan stops short of later ones.
    out = _run(
        """
        import json, threading, time
        import planner
        from planner.core import _jit, clock
        from planner.generate import random_request
        load = _jit.Kernel.load
        def slow_load(self):
            if self._compiled is None and threading.current_thread() is not threading.main_thread():
                with clock.paused():
                    time.sleep(1.0)
            return load(self)
        _jit.Kernel.load = slow_load
        request = random_request(3000, overlap=0.02, seed=11, sync="insert").model_dump()
        request["options"]["time_limit"] = 2.0
        plans = [planner.plan(request) for _ in range(2)]
        assert planner.validate(request, plans[0]).valid
        print(json.dumps([p.model_dump_json() for p in plans]))
        """
    )
    first, later = json.loads(out.strip().splitlines()[-1])
    assert first == later
