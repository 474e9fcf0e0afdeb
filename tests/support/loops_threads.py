"""Brute force at thread level for programs with loops, branches and access patterns: every
unrolled execution (tests/loops_brute.py) run step by step, every thread's every access
turned into the arena bytes it touches, and two accesses to one byte by different threads (one
of them a write) flagged unless a barrier runs between them. Independent of the planner's and
the validators' owner maps: it evaluates the index formulas itself."""

from __future__ import annotations

import itertools
import random
from typing import Any

from planner.core.models import Access, Plan, PlanRequest
from tests.support.loops_brute import executions, expanded, instances

ANY = -1  # a broadcast access: every thread


def _threads(req: PlanRequest) -> list[tuple[int, int, int]]:
    bx, by, bz = (req.block or [1, 1, 1]) + [1] * (3 - len(req.block or []))
    return list(itertools.product(range(bx), range(by), range(bz)))


def _touched(req: PlanRequest, a: Access, size: int) -> list[tuple[int, int]]:
    """(thread, byte) pairs of one access, bytes inside the buffer."""
    if a.index is None:
        return [(ANY, byte) for byte in range(size)]
    out: list[tuple[int, int]] = []
    names = sorted(a.loops)
    for t, (x, y, z) in enumerate(_threads(req)):
        env = {"threadIdx.x": x, "threadIdx.y": y, "threadIdx.z": z}
        for values in itertools.product(*(range(a.loops[n]) for n in names)):
            env.update(zip(names, values, strict=True))
            element = sum(c * env[v] for v, c in a.index.items()) + a.offset
            out.extend((t, element * a.bytes + k) for k in range(a.bytes))
    return out


def races(req: PlanRequest, plan: Plan) -> list[str]:
    """Every race or live overlap the plan leaves on some execution."""
    horizon = max(
        [b.end for b in req.buffers]
        + [lp.end for lp in req.loops]
        + [br.end for br in req.branches]
    )
    offset = {p.id: p.offset for p in plan.placements}
    extra = plan.barriers.required if req.options.sync == "none" else plan.barriers.inserted
    barriers = set(plan.barriers.existing) | set(extra)
    touches = {
        (i, k): _touched(req, a, b.size)
        for i, b in enumerate(req.buffers)
        for k, a in enumerate(b.accesses)
    }
    # Loops wholly around each (expanded) range: an instance is one copy of them.
    around = {
        (i, k): [
            j
            for j, lp in enumerate(req.loops)
            for s, e in [expanded(req, *r)]
            if lp.start <= s and e <= lp.end
        ]
        for i, b in enumerate(req.buffers)
        for k, r in enumerate(b.lifetimes)
    }
    part = {
        (i, k): next(n for n, (s, e) in enumerate(b.lifetimes) if s <= a.at < e)
        for i, b in enumerate(req.buffers)
        for k, a in enumerate(b.accesses)
    }
    problems: list[str] = []
    for trace in executions(req, 0, horizon):
        points = [p for p, _ in trace]
        # Live overlap of two buffers sharing bytes.
        inst = instances(req, trace)
        for x, y in itertools.combinations(inst, 2):
            bx, by = req.buffers[x.buffer], req.buffers[y.buffer]
            lo, hi = offset[bx.id], offset[by.id]
            if x.buffer == y.buffer or not (lo < hi + by.size and hi < lo + bx.size):
                continue
            if x.first_step <= y.last_step and y.first_step <= x.last_step:
                problems.append(f"overlap {bx.id} {by.id} in {points}")
        # Per arena byte: the accesses in order, and the epoch (barriers run so far).
        history: dict[int, list[tuple[int, int, int, bool, Any]]] = {}
        epoch = 0
        for t, (p, copies) in enumerate(trace):
            if p in barriers:
                epoch += 1
            for i, b in enumerate(req.buffers):
                for k, a in enumerate(b.accesses):
                    if a.at != p:
                        continue
                    write = a.op == "write"
                    r = part[i, k]
                    copy = dict(copies)
                    key = (b.id, r, tuple(copy[j] for j in around[i, r]))
                    for thread, byte in touches[i, k]:
                        at = offset[b.id] + byte
                        for t0, e0, th0, w0, who in history.get(at, []):
                            if (
                                who != key
                                and e0 == epoch
                                and (write or w0)
                                and (thread != th0 or thread == ANY)
                            ):
                                problems.append(
                                    f"race on byte {at}: {who} at step {t0} and {key} at step "
                                    f"{t} (threads {th0}, {thread}) in {points}"
                                )
                        history.setdefault(at, []).append((t, epoch, thread, write, key))
    return problems


PATTERNS: dict[str, dict[str, Any]] = {
    # element = thread + 8 i: each thread its own elements, the same in every buffer
    "own": {"index": {"threadIdx.x": 1, "i": 8}, "loops": {"i": 2}},
    # element = 2 thread + i: another thread owns each element
    "transposed": {"index": {"threadIdx.x": 2, "i": 1}, "loops": {"i": 2}},
    "broadcast": {"threads": "all"},
}


def random_patterned(rng: random.Random) -> dict[str, Any]:
    """A small program whose buffers (16 four-byte elements, 8 threads) are written at the
    start of their range and read at its last point, each by one of ``PATTERNS`` (mostly
    the same-thread one), in loops and branches."""
    from tests.support.loops_brute import random_request

    data = random_request(rng)
    for b in data["buffers"]:
        b["size"] = 64
        name = rng.choice(["own", "own", "own", "transposed", "broadcast"])
        ranges = b.get("ranges") or [[b["start"], b["end"]]]
        b["accesses"] = [
            {"op": op, "at": at, "bytes": 4, **PATTERNS[name]}
            for s, e in ranges
            for op, at in (("write", s), ("read", e - 1))
        ]
    data["block"] = [8, 1, 1]
    data["name"] = "random_patterned"
    return data
