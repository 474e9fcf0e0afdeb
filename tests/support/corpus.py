"""A fixed corpus of varied requests whose plans must never change (see test_determinism).

Every request is built from seeded generators, so the corpus is the same on every machine:
random lifetimes with pins, barriers, capacities and each sync policy; tiles with thread-access
patterns (aliases); kernel-sized requests with mixed alignments; larger random requests; and the
example requests.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest
from planner.generate import random_kernel, random_request
from tests.support.paths import ROOT, TESTS
from tests.support.patterned import MAPPINGS, THREADS, WIDTH, access

EXAMPLES = ROOT / "examples"
FIXTURE = TESTS / "data" / "plan_hashes.json"
# Seconds per request: long enough that a busy machine's clock never cuts a plan short of its
# deterministic budgets (the planner.pipeline.facade docstring), so the hashes hold anywhere.
TIME_LIMIT = 2.0


def _lifetimes(rng: random.Random, index: int) -> dict[str, Any]:
    """Random lifetimes, sizes, alignments, pins, barriers, capacity and policy."""
    n = rng.randint(0, 14)
    horizon = rng.choice([8, 16, 40])
    buffers: list[dict[str, Any]] = []
    for i in range(n):
        start = rng.randrange(horizon - 1)
        buffers.append(
            {
                "id": f"b{i}",
                "size": rng.randint(1, 96),
                "start": start,
                "end": rng.randint(start + 1, horizon),
                "alignment": rng.choice([None, 1, 4, 16]),
            }
        )
    base = 0
    for i in rng.sample(range(n), min(n, rng.randint(0, 2))):
        align = buffers[i]["alignment"] or 1
        base = (base + align - 1) // align * align
        buffers[i]["offset"] = base
        base += buffers[i]["size"]
    top = max((b["end"] for b in buffers), default=0)
    sync = ["existing", "insert", "none"][index % 3]
    options: dict[str, Any] = {"sync": sync, "time_limit": TIME_LIMIT}
    if sync == "insert" and rng.random() < 0.3:
        options["barrier_candidates"] = sorted(rng.sample(range(top + 1), min(top + 1, 4)))
    if sync == "insert" and rng.random() < 0.3:
        options["max_new_barriers"] = rng.randint(0, 3)
    if sync == "insert" and rng.random() < 0.15:
        options["pareto"] = True
    request: dict[str, Any] = {
        "name": f"lifetimes-{index}",
        "buffers": buffers,
        "barriers": [rng.randint(0, top) for _ in range(rng.randint(0, 4))],
        "options": options,
    }
    if rng.random() < 0.4:
        request["capacity"] = rng.randint(64, 800)
    return request


def _patterned(rng: random.Random, index: int) -> dict[str, Any]:
    """Tiles written at their start and read at their last point, with thread mappings."""
    n = rng.randint(1, 8)
    horizon = 12
    buffers: list[dict[str, Any]] = []
    for i in range(n):
        start = rng.randrange(horizon - 1)
        end = rng.randint(start + 1, min(horizon, start + 4))
        rows = rng.choice([1, 2, 4])
        accesses = [access("write", start, rng.choice(("row", "row", "column")), rows)]
        if end - 1 > start:
            accesses.append(access("read", end - 1, rng.choice(MAPPINGS), rows))
        buffers.append(
            {
                "id": f"t{i}",
                "size": rows * THREADS * WIDTH,
                "start": start,
                "end": end,
                "alignment": rng.choice([None, 16, 128]),
                "accesses": accesses,
            }
        )
    top = max(b["end"] for b in buffers)
    options: dict[str, Any] = {"sync": ["existing", "insert"][index % 2], "time_limit": TIME_LIMIT}
    if options["sync"] == "insert" and rng.random() < 0.4:
        options["max_new_barriers"] = rng.randint(0, 2)
    return {
        "name": f"patterned-{index}",
        "block": [THREADS],
        "alignment": 4,
        "barriers": [rng.randint(0, top) for _ in range(rng.randint(0, 3))],
        "buffers": buffers,
        "options": options,
    }


def _footprint_or_spill(rng: random.Random, index: int) -> dict[str, Any]:
    """Per-block footprints (shrink) or a capacity below the peak (spill), alternately."""
    if index % 2 == 0:
        blocks = rng.choice([2, 4])
        buffers = []
        for i in range(rng.randint(1, 5)):
            rows = rng.choice([2, 4, 8])
            start = rng.randrange(6)
            read = {
                "op": "read",
                "at": start,
                "bytes": 4,
                "index": {"blockIdx.x": rows * 32, "r": 32, "threadIdx.x": 1},
                "loops": {"r": rows},
            }
            buffers.append(
                {
                    "id": f"w{i}",
                    "size": blocks * rows * 32 * 4,
                    "start": start,
                    "end": start + rng.randint(1, 3),
                    "accesses": [read],
                }
            )
        return {
            "name": f"footprint-{index}",
            "block": [32],
            "grid": [blocks],
            "buffers": buffers,
            "options": {"shrink": True, "sync": rng.choice(["existing", "insert"])},
        }
    request = _lifetimes(rng, index)
    total = sum(b["size"] for b in request["buffers"])
    request["name"] = f"spill-{index}"
    request["capacity"] = max(1, total // rng.randint(2, 4))
    request["options"]["overflow"] = "spill"
    for buffer in request["buffers"]:
        buffer.pop("offset", None)
    return request


def corpus() -> list[tuple[str, PlanRequest]]:
    """(name, request) pairs, in a fixed order."""
    rng = random.Random(20261123)
    out: list[tuple[str, PlanRequest]] = []
    for i in range(150):
        out.append((f"lifetimes-{i}", parse_request(_lifetimes(rng, i))))
    for i in range(80):
        out.append((f"patterned-{i}", parse_request(_patterned(rng, i))))
    extra = random.Random(20261124)  # its own stream: the cases above keep their requests
    for i in range(30):
        out.append((f"extra-{i}", parse_request(_footprint_or_spill(extra, i))))
    for seed in range(30):
        kernel = random_kernel(seed, max_buffers=40)
        out.append((f"kernel-{seed}", kernel))
    # Larger requests whose exact solve ends by its node budgets. (At 3 000 buffers CP-SAT
    # fills the default limit and the clock, not a budget, ends it: such a plan depends on
    # the machine's speed by design, see the planner.pipeline docstring.)
    for i, (n, sync) in enumerate(
        [(200, "none"), (500, "existing"), (1000, "insert"), (2000, "none")]
    ):
        out.append((f"random-{n}-{sync}", random_request(n, seed=i, sync=sync)))
    out.append(("random-800-overlap0.2", random_request(800, overlap=0.2, seed=7)))
    for path in request_files(EXAMPLES):
        out.append((f"example-{path.stem}", parse_request(path.read_text())))
    return out


def plan_hash(plan: Plan) -> str:
    """SHA-256 of the plan's JSON, as the service sends it."""
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()


def load_fixture() -> dict[str, str]:
    data: dict[str, str] = json.loads(FIXTURE.read_text())
    return data


def write_fixture() -> None:
    """Record the hashes of this version's plans (after a change meant to alter plans)."""
    import planner
    from planner.pipeline.warm import ensure_warm

    ensure_warm(planner.plan)
    hashes = {name: plan_hash(planner.plan(request)) for name, request in corpus()}
    FIXTURE.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_fixture()
