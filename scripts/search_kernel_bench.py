"""CPU time per node of the canonical search kernel on fixed work, against the kernel of an
earlier revision, the two alternating in one process.

The work: the cases of ``tests/solvers/test_search_steps.py`` (each order of the portfolio
at the bound and 1 % above, on the case's node budget) and ``--count`` instances of the
challenging family (``scripts/challenge_bench.py``'s generator, 300-450 buffers, each order
at the bound on 4000 nodes), compiled and warm. Both kernels must return the same status,
nodes and offsets on every member; then each repeat runs both on each member, taking turns
at going first, and prints the sums of this thread's CPU seconds. The medians and ratios
close the output.

    $ python scripts/search_kernel_bench.py --against 32d16ac --count 6 --repeat 7
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from challenge_bench import _instances as challenge  # noqa: E402  (beside this script)

from planner.core.graph import build_graph  # noqa: E402
from planner.solvers import _search_kernel  # noqa: E402
from planner.solvers._pace_kernel import member_cap  # noqa: E402
from planner.solvers._search_kernel import STATS  # noqa: E402
from planner.solvers.search import ORDERS, _Instance, _instances  # noqa: E402
from tests.solvers.test_search_steps import CASES, PINNED  # noqa: E402
from tests.support.kernel_cases import kernel_case  # noqa: E402

FIELDS = _search_kernel.SearchArrays._fields
Work = list[tuple[_Instance, int, int]]  # member, capacity (bytes), node budget
Result = tuple[int, Any, int]
Call = Callable[[_Instance, int, int], Result]


def _work(count: int) -> Work:
    out: Work = []
    for family, n, seed, nodes in CASES:
        _, g = kernel_case(family, n, seed, (family, n, seed) in PINNED)
        bound = g.aligned_bound.bytes
        for inst in _instances(g, ORDERS):
            out += [(inst, bound, nodes), (inst, bound + bound // 100, nodes)]
    for _, request in challenge(count, (300, 450), 7_000):
        options = request.options.model_copy(update={"sync": "none"})
        asked = request.model_copy(update={"capacity": None, "target": None, "options": options})
        g = build_graph(asked, "none")
        out += [(inst, g.aligned_bound.bytes, 4_000) for inst in _instances(g, ORDERS)]
    return out


def _kernel_at(rev: str) -> ModuleType:
    """``solvers/_search_kernel.py`` as it was at ``rev``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:solvers/_search_kernel.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "search_kernel_then.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("search_kernel_then", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _caller(kernel: ModuleType) -> Call:
    """One member's decision by ``kernel``, whichever arguments its ``decide`` takes."""
    records = hasattr(kernel, "SearchArrays")

    def call(inst: _Instance, capacity: int, nodes: int) -> Result:
        arrays = [getattr(inst, f) for f in FIELDS]
        head = [kernel.SearchArrays(*arrays)] if records else arrays
        # As many stats as the newest kernel counts: an older one counts fewer.
        alone, stats = np.zeros(0, dtype=np.int64), np.zeros(STATS, dtype=np.int64)
        return kernel.decide(*head, capacity, nodes, member_cap(nodes), alone, stats)  # type: ignore[no-any-return]

    return call


def _seconds(kernels: dict[str, Call], work: Work, flip: int) -> dict[str, float]:
    """This thread's CPU seconds of each kernel over the work, the two taking turns on each
    member (in turn first): the machine's load drifts alike for both."""
    spent = dict.fromkeys(kernels, 0.0)
    names = list(kernels)
    for k, (inst, capacity, budget) in enumerate(work):
        for name in names if (k + flip) % 2 == 0 else names[::-1]:
            began = time.thread_time()
            kernels[name](inst, capacity, budget)
            spent[name] += time.thread_time() - began
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD", help="the revision to compare with")
    parser.add_argument("--count", type=int, default=6, help="challenging instances")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    work = _work(args.count)
    kernels = {"then": _caller(_kernel_at(args.against)), "now": _caller(_search_kernel)}
    for inst, capacity, budget in work:
        then, now = (kernels[k](inst, capacity, budget) for k in ("then", "now"))
        same = then[0] == now[0] and then[2] == now[2] and np.array_equal(then[1], now[1])
        assert same, f"the kernels differ at {capacity} bytes: {then[0::2]} {now[0::2]}"
    print(f"members {len(work)}: the same status, nodes and offsets")
    nodes = sum(kernels["now"](inst, capacity, budget)[2] for inst, capacity, budget in work)
    times: dict[str, list[float]] = {"then": [], "now": []}
    for r in range(args.repeat):
        spent = _seconds(kernels, work, r)
        for name, seconds in spent.items():
            times[name].append(seconds)
        print(f"repeat {r}: then {spent['then']:.3f} s, now {spent['now']:.3f} s")
    old, new = statistics.median(times["then"]), statistics.median(times["now"])
    ratios = [b / a for a, b in zip(times["then"], times["now"], strict=True)]
    print(f"nodes {nodes} a repeat; median CPU then {old:.3f} s ({old / nodes * 1e6:.2f} us a")
    print(f"node), now {new:.3f} s ({new / nodes * 1e6:.2f} us a node); ratio of the medians")
    print(f"{new / old:.3f}, median ratio in a repeat {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
