"""Brute force for programs with loops, branches and live ranges: every unrolled execution
(each loop body twice, every choice of arms in every copy), written out step by step, and the
straight-line rules checked on each. Independent of the planner's virtual timeline."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import Plan, PlanRequest

Step = tuple[int, tuple[tuple[int, int], ...]]  # (point, ((loop index, copy), ...))


def executions(req: PlanRequest, lo: int, hi: int) -> list[list[Step]]:
    """Every execution of the points [lo, hi) with its loops and branches, at top level."""
    loops = [(lp.start, lp.end, i) for i, lp in enumerate(req.loops)]
    items: list[tuple[int, int, str, int]] = []
    for s, e, i in loops:
        items.append((s, e, "loop", i))
    for j, br in enumerate(req.branches):
        items.append((br.start, br.end, "branch", j))

    def inside(s: int, e: int, lo: int, hi: int) -> bool:
        return lo <= s and e <= hi

    def expand(lo: int, hi: int, skip: tuple[str, int] | None) -> list[list[Step]]:
        # The outermost items within [lo, hi), other than the one being expanded.
        mine = [it for it in items if inside(it[0], it[1], lo, hi) and (it[2], it[3]) != skip]
        top = [
            it
            for it in mine
            if not any(
                o is not it and inside(it[0], it[1], o[0], o[1]) and (o[0], o[1]) != (it[0], it[1])
                for o in mine
            )
        ]
        # Equal ranges: a loop holds a branch over the same points; an arm holds a loop.
        top.sort(key=lambda it: (it[0], 0 if it[2] == "loop" else 1))
        seqs: list[list[list[Step]]] = []
        p = lo
        k = 0
        while p < hi:
            if k < len(top) and top[k][0] == p:
                s, e, kind, idx = top[k]
                k += 1
                if kind == "loop":
                    body = expand(s, e, ("loop", idx))
                    loop = req.loops[idx]
                    fewest = loop.trips or loop.min_trips or 0
                    most = loop.trips or loop.max_trips
                    runs: list[list[Step]] = [[]] if fewest == 0 else []  # skipped
                    times = min(2, most or 2)  # a loop that never repeats runs once
                    for iters in itertools.product(body, repeat=times):
                        runs.append(
                            [(q, ((idx, n), *c)) for n, run in enumerate(iters) for q, c in run]
                        )
                    seqs.append(runs)
                else:
                    arms = req.branches[idx].arms
                    seqs.append([r for s2, e2 in arms for r in expand(s2, e2, ("branch", idx))])
                p = e
                # Items starting inside the one just expanded are its own.
                while k < len(top) and top[k][0] < p:
                    k += 1
            else:
                seqs.append([[(p, ())]])
                p += 1
        out = []
        for combo in itertools.product(*seqs):
            out.append([step for part in combo for step in part])
        return out

    return expand(lo, hi, None)


@dataclass(frozen=True)
class Instance:
    buffer: int
    first_step: int
    last_step: int
    first_access: int  # step
    last_access: int  # step


def expanded(req: PlanRequest, s: int, e: int) -> tuple[int, int]:
    """The range grown over every loop it partially overlaps (live over the whole body)."""
    changed = True
    while changed:
        changed = False
        for lp in req.loops:
            crosses = lp.start < e and s < lp.end and not (s <= lp.start and lp.end <= e)
            if crosses and not (lp.start <= s and e <= lp.end):
                s, e = min(s, lp.start), max(e, lp.end)
                changed = True
    return s, e


def instances(req: PlanRequest, trace: list[Step]) -> list[Instance]:
    out: list[Instance] = []
    for i, b in enumerate(req.buffers):
        at = {a.at for a in b.accesses}
        for s0, e0 in b.lifetimes:
            s, e = expanded(req, s0, e0)
            around = [k for k, lp in enumerate(req.loops) if lp.start <= s and e <= lp.end]
            groups: dict[tuple[int, ...], list[int]] = {}
            for t, (p, copies) in enumerate(trace):
                if s <= p < e:
                    c = dict(copies)
                    groups.setdefault(tuple(c[k] for k in around), []).append(t)
            for steps in groups.values():
                touched = [t for t in steps if trace[t][0] in at and s0 <= trace[t][0] < e0]
                if not b.accesses or not touched:
                    touched = [steps[0], steps[-1]]
                out.append(Instance(i, steps[0], steps[-1], min(touched), max(touched)))
    return out


def check(req: PlanRequest, plan: Plan) -> tuple[list[str], int]:
    """Every hazard or overlap the plan leaves on some execution, and the largest peak of
    live bytes over the executions. A reuse with no barrier between buffers with access
    patterns that the plan lists in ``aliases`` (or of a buffer's own bytes) is judged by the
    thread-level brute force of tests/loops_threads.py instead."""
    horizon = max(
        [b.end for b in req.buffers]
        + [lp.end for lp in req.loops]
        + [br.end for br in req.branches]
    )
    offsets = {p.id: (p.offset, p.offset + p.size) for p in plan.placements}
    # Under sync "none" the caller adds the required points to the request's barriers.
    extra = plan.barriers.required if req.options.sync == "none" else plan.barriers.inserted
    barriers = set(plan.barriers.existing) | set(extra)
    cluster = plan.cluster_barriers
    if cluster is not None:
        # A cluster barrier orders the CTA's own threads too: a block barrier at its point.
        barriers |= set(cluster.existing) | set(cluster.inserted)
        if req.options.sync == "none":
            barriers |= set(cluster.required)
    problems: list[str] = []
    aliases = plan.aliases
    alias = False
    peak = 0
    for trace in executions(req, 0, horizon):
        inst = instances(req, trace)
        bar_steps = [t for t, (p, _) in enumerate(trace) if p in barriers]
        for t in range(len(trace)):
            live = sum(req.buffers[x.buffer].size for x in inst if x.first_step <= t <= x.last_step)
            peak = max(peak, live)
        for x, y in itertools.permutations(inst, 2):
            bx, by = req.buffers[x.buffer], req.buffers[y.buffer]
            (lx, hx), (ly, hy) = offsets[bx.id], offsets[by.id]
            if not (lx < hy and ly < hx):
                continue
            if x.buffer != y.buffer and x.first_step <= y.last_step and y.first_step <= x.last_step:
                problems.append(f"overlap {bx.id} {by.id} in {[p for p, _ in trace]}")
            elif x.last_step < y.first_step and not any(
                x.last_access < t <= y.first_access for t in bar_steps
            ):
                if bx.accesses and by.accesses and (bx.id == by.id or [bx.id, by.id] in aliases):
                    alias = True  # judged below, thread by thread
                    continue
                problems.append(f"hazard {bx.id} -> {by.id} in {[p for p, _ in trace]}")
    if alias:
        # A reuse with no barrier that the plan claims thread-local (or a buffer's own bytes,
        # next trip): every access to every byte, thread by thread.
        from tests.support.loops_threads import races

        problems += races(req, plan)
    return problems, peak


def reuse_windows(req: PlanRequest, plan: Plan) -> list[frozenset[int]]:
    """Per execution, per reuse of shared bytes (a piece after another on the same bytes): the
    original points a barrier at which would run between the earlier piece's last access and
    the later one's first access in that execution."""
    horizon = max(
        [b.end for b in req.buffers]
        + [lp.end for lp in req.loops]
        + [br.end for br in req.branches]
    )
    offsets = {p.id: (p.offset, p.offset + p.size) for p in plan.placements}
    found: set[frozenset[int]] = set()
    for trace in executions(req, 0, horizon):
        inst = instances(req, trace)
        for x, y in itertools.permutations(inst, 2):
            (lx, hx), (ly, hy) = (
                offsets[req.buffers[x.buffer].id],
                offsets[req.buffers[y.buffer].id],
            )
            if lx < hy and ly < hx and x.last_step < y.first_step:
                found.add(
                    frozenset(trace[t][0] for t in range(x.last_access + 1, y.first_access + 1))
                )
    return sorted(found, key=sorted)


def runs(req: PlanRequest, point: int) -> int:
    """How many times a barrier at the point runs: the trips of the loops around it
    multiplied (else the most trips, else the fewest but at least 1000)."""
    out = 1
    for lp in req.loops:
        if lp.start <= point < lp.end:
            out *= lp.trips or lp.max_trips or max(lp.min_trips or 0, 1000)
    return out


def random_request(rng: random.Random) -> dict[str, Any]:
    """A small random program that the model accepts: nested or disjoint loops, branches
    inside or around them, buffers with one or two ranges that respect the arms."""
    return first_accepted(rng, draw_request, 200)


def first_accepted(
    rng: random.Random, draw: Callable[[random.Random], dict[str, Any]], tries: int
) -> dict[str, Any]:
    """The first of ``tries`` programs drawn by ``draw`` that the model accepts."""
    for _ in range(tries):
        data = draw(rng)
        try:
            parse_request(data)
        except RequestError:
            continue
        return data
    raise AssertionError(f"no valid random program in {tries} draws")


def _range(rng: random.Random, horizon: int, arms: list[list[int]]) -> tuple[int, int]:
    """A range, often inside a random arm (so branches get buffers of their own)."""
    if arms and rng.random() < 0.5:
        s, e = rng.choice(arms)
        a = rng.randint(s, e - 1)
        return a, rng.randint(a + 1, e)
    a = rng.randint(0, horizon - 1)
    return a, rng.randint(a + 1, min(horizon, a + 6))


def draw_request(rng: random.Random) -> dict[str, Any]:
    horizon = rng.randint(10, 18)
    loops: list[dict[str, Any]] = []
    branches: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 2)):
        s = rng.randint(0, horizon - 3)
        e = rng.randint(s + 2, min(horizon, s + 8))
        loops.append({"start": s, "end": e, "trips": rng.choice([None, 1, 3, 8])})
    for _ in range(rng.randint(0, 2)):
        s = rng.randint(0, horizon - 4)
        m = rng.randint(s + 1, min(horizon - 2, s + 4))
        e = rng.randint(m + 1, min(horizon, m + 4))
        branches.append({"arms": [[s, m], [m, e]]})
    arms = [arm for br in branches for arm in br["arms"]]
    buffers: list[dict[str, Any]] = []
    for i in range(rng.randint(2, 7)):
        size = rng.choice([8, 16, 24, 32, 64])
        a, b = _range(rng, horizon, arms)
        if rng.random() < 0.3 and b < horizon:
            c, d = _range(rng, horizon, arms)
            if c >= b:
                buffers.append({"id": f"b{i}", "size": size, "ranges": [[a, b], [c, d]]})
                continue
        buffers.append({"id": f"b{i}", "size": size, "start": a, "end": b})
    sync = rng.choice(["insert", "insert", "none", "existing"])
    barriers = sorted(rng.sample(range(horizon), rng.randint(0, 3)))
    return {
        "name": "random_program",
        "alignment": 8,
        "barriers": barriers,
        "loops": loops,
        "branches": branches,
        "buffers": buffers,
        "options": {"sync": sync, "time_limit": 2.0, "solver": "greedy"},
    }
