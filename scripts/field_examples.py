"""What planning with barriers and thread mappings saves on the example kernels.

    python scripts/field_examples.py [examples/*.json]

Per example: the arena as requested, the arena under ``"sync": "existing"`` (only the
request's barriers count) and the bytes saved against it; the barriers the plan inserts, the
barriers a planner would insert placing one before every reuse that no existing barrier
covers (one per reusing buffer, nvFuser's ``promoteReuse``), and the barriers saved.
"""

from __future__ import annotations

import bisect
import sys
from dataclasses import dataclass
from pathlib import Path

import planner
from planner.batch import request_files
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@dataclass(frozen=True)
class Savings:
    """One example's figures: bytes and barrier counts."""

    name: str
    arena: int  # bytes, as requested
    existing_arena: int  # bytes, sync "existing"
    inserted: int  # barriers the plan inserts
    one_per_reuse: int  # barriers inserting one before every unprotected reuse

    @property
    def bytes_saved(self) -> int:
        return self.existing_arena - self.arena

    @property
    def barriers_saved(self) -> int:
        return self.one_per_reuse - self.inserted


def one_per_reuse(request: PlanRequest, plan: Plan) -> int:
    """Buffers of the plan that reuse bytes of an earlier one with no existing barrier after
    its last access and before their first: each would get a barrier of its own."""
    existing = sorted(set(request.barriers))
    placed = {p.id: (p.offset, p.offset + p.size) for p in plan.placements}
    span = {b.id: [a.at for a in b.accesses] or [b.start, b.end - 1] for b in request.buffers}
    reusing: set[str] = set()
    for a in request.buffers:
        for b in request.buffers:
            lo_a, hi_a = placed[a.id]
            lo_b, hi_b = placed[b.id]
            if a.end > b.start or not (lo_a < hi_b and lo_b < hi_a):
                continue
            k = bisect.bisect_right(existing, max(span[a.id]))
            if k == len(existing) or existing[k] > min(span[b.id]):
                reusing.add(b.id)
    return len(reusing)


def savings(path: Path) -> Savings:
    """Plan one example as requested and under sync "existing"."""
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    options = request.options.model_copy(update={"sync": "existing", "pareto": False})
    existing = planner.plan(request.model_copy(update={"options": options}))
    return Savings(
        name=path.stem,
        arena=plan.arena_bytes,
        existing_arena=existing.arena_bytes,
        inserted=len(plan.barriers.inserted),
        one_per_reuse=one_per_reuse(request, plan),
    )


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or [
        # Loops, branches and ranges: scripts/loops_bench.py compares those.
        p
        for p in request_files(EXAMPLES)
        if not parse_request(p.read_text()).has_control_flow
    ]
    header = ("example", "arena", "existing", "bytes saved", "inserted", "one/reuse", "saved")
    print("{:<30} {:>8} {:>9} {:>11} {:>8} {:>9} {:>5}".format(*header))
    for path in paths:
        s = savings(path)
        print(
            f"{s.name:<30} {s.arena:>8} {s.existing_arena:>9} {s.bytes_saved:>11} "
            f"{s.inserted:>8} {s.one_per_reuse:>9} {s.barriers_saved:>5}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
