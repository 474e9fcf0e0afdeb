"""Brute force over every schedule a request allows: each loop run every trip count from 0 to 3
that its bounds admit (3 standing for any more), chosen afresh on every entry, every arm of
every branch, and several thread counts when the request gives no ``block``. Each execution
is written out step by step with every thread's every access on the arena's bytes, and two
checks run on it: two buffer instances on one byte are never live at once, and two accesses
to one byte from different instances, one a write, by different threads, always have a
barrier between them.

Independent of the planner and of the validators: it reads only the request's fields and the
plan's offsets and barriers, and evaluates the index formulas itself.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from planner.core.models import Access, Plan, PlanRequest

MAX_TRIPS_RUN = 3  # trip counts tried: 0 to 3 where the loop's bounds admit them
THREAD_COUNTS = (2, 3)  # threads tried for a request without block
MAX_EXECUTIONS = 20_000

Instance = tuple[int, int, tuple[int, ...]]  # (buffer, range, iteration of each loop around)


@dataclass(frozen=True)
class Step:
    point: int
    iterations: tuple[tuple[int, int], ...]  # (loop index, iteration) of the loops around


class TooManyExecutionsError(Exception):
    """The request has more schedules than the brute force runs."""


def trip_counts(req: PlanRequest, index: int) -> list[int]:
    """The trip counts tried for loop ``index``: 0 to 3 within its bounds, or 3 alone for a
    loop that runs more than 3 times at the least."""
    loop = req.loops[index]
    fewest = loop.trips if loop.trips is not None else (loop.min_trips or 0)
    most = loop.trips if loop.trips is not None else loop.max_trips
    counts = [c for c in range(MAX_TRIPS_RUN + 1) if fewest <= c and (most is None or c <= most)]
    return counts or [MAX_TRIPS_RUN]


def executions(req: PlanRequest) -> list[list[Step]]:
    """Every execution of the request's points, as steps in order."""
    horizon = max(
        [b.end for b in req.buffers]
        + [lp.end for lp in req.loops]
        + [br.end for br in req.branches]
    )
    items = [(lp.start, lp.end, 0, "loop", i) for i, lp in enumerate(req.loops)]
    items += [(br.start, br.end, 1, "branch", j) for j, br in enumerate(req.branches)]

    def outermost(
        lo: int, hi: int, skip: tuple[str, int] | None
    ) -> list[tuple[int, int, int, str, int]]:
        mine = [it for it in items if lo <= it[0] and it[1] <= hi and (it[3], it[4]) != skip]

        # On equal spans a loop holds a branch (rank 0 before 1); otherwise containment.
        def holds(o: tuple[int, int, int, str, int], it: tuple[int, int, int, str, int]) -> bool:
            if o is it or not (o[0] <= it[0] and it[1] <= o[1]):
                return False
            return (o[0], o[1]) != (it[0], it[1]) or o[2] < it[2]

        return sorted(
            (it for it in mine if not any(holds(o, it) for o in mine)), key=lambda t: t[0]
        )

    def expand(
        lo: int, hi: int, skip: tuple[str, int] | None, around: tuple[tuple[int, int], ...]
    ) -> list[list[Step]]:
        runs: list[list[Step]] = [[]]
        p = lo
        for s, e, _, kind, idx in outermost(lo, hi, skip):
            runs = [r + [Step(q, around) for q in range(p, s)] for r in runs]
            if kind == "loop":
                options: list[list[Step]] = []
                for count in trip_counts(req, idx):
                    seqs: list[list[list[Step]]] = [
                        expand(s, e, ("loop", idx), (*around, (idx, n))) for n in range(count)
                    ]
                    for combo in itertools.product(*seqs):
                        options.append([step for part in combo for step in part])
            else:
                options = [
                    r
                    for a0, a1 in req.branches[idx].arms
                    for r in expand(a0, a1, ("branch", idx), around)
                ]
            runs = [r + o for r in runs for o in options]
            if len(runs) > MAX_EXECUTIONS:
                raise TooManyExecutionsError(len(runs))
            p = e
        return [r + [Step(q, around) for q in range(p, hi)] for r in runs]

    return expand(0, horizon, None, ())


def _touched(
    req: PlanRequest, a: Access, size: int, threads: tuple[int, int, int]
) -> list[tuple[int, int]]:
    """(thread, byte) pairs of one access, bytes inside the buffer."""
    count = threads[0] * threads[1] * threads[2]
    if a.index is None:  # a broadcast: every thread, every element
        return [(t, byte) for t in range(count) for byte in range(size // a.bytes * a.bytes)]
    out: list[tuple[int, int]] = []
    names = sorted(a.loops)
    for t in range(count):
        env = {
            "threadIdx.x": t % threads[0],
            "threadIdx.y": t // threads[0] % threads[1],
            "threadIdx.z": t // (threads[0] * threads[1]),
            "blockIdx.x": 0,
            "blockIdx.y": 0,
            "blockIdx.z": 0,
        }
        for values in itertools.product(*(range(a.loops[n]) for n in names)):
            env.update(zip(names, values, strict=True))
            element = sum(c * env[v] for v, c in a.index.items()) + a.offset
            out.extend((t, element * a.bytes + k) for k in range(a.bytes))
    return out


def thread_shapes(req: PlanRequest) -> list[tuple[int, int, int]]:
    """The blocks to run: the request's, or each of ``THREAD_COUNTS`` threads."""
    if req.block is not None:
        x, y, z = [*req.block, 1, 1][:3]
        return [(x, y, z)]
    return [(n, 1, 1) for n in THREAD_COUNTS]


def races(req: PlanRequest, plan: Plan) -> list[str]:
    """Every live overlap or race the plan leaves on some schedule (empty: none)."""
    offset = {p.id: p.offset for p in plan.placements if p.memory == "shared"}
    runtime = set(plan.barriers.existing) | set(plan.barriers.inserted)
    if req.options.sync == "none":
        runtime |= set(plan.barriers.required)
    problems: list[str] = []
    for threads in thread_shapes(req):
        every = threads[0] * threads[1] * threads[2]
        touches = {
            (i, k): _touched(req, a, b.size, threads)
            for i, b in enumerate(req.buffers)
            for k, a in enumerate(b.accesses)
        }
        for trace in executions(req):
            problems += _check(req, trace, offset, runtime, touches, every)
            if problems:
                return problems
    return problems


def _instance(req: PlanRequest, i: int, part: int, step: Step) -> Instance:
    s, e = req.buffers[i].lifetimes[part]
    inside = {j for j, lp in enumerate(req.loops) if lp.start <= s and e <= lp.end}
    return (i, part, tuple(n for j, n in step.iterations if j in inside))


def _check(
    req: PlanRequest,
    trace: list[Step],
    offset: dict[str, int],
    runtime: set[int],
    touches: dict[tuple[int, int], list[tuple[int, int]]],
    threads: int,
) -> list[str]:
    points = [s.point for s in trace]
    live: dict[Instance, list[int]] = {}  # first and last step in the range
    for t, step in enumerate(trace):
        for i, b in enumerate(req.buffers):
            for part, (s, e) in enumerate(b.lifetimes):
                if s <= step.point < e and b.id in offset:
                    span = live.setdefault(_instance(req, i, part, step), [t, t])
                    span[1] = t
    out: list[str] = []
    for (x, sx), (y, sy) in itertools.combinations(live.items(), 2):
        bx, by = req.buffers[x[0]], req.buffers[y[0]]
        if x[:2] == y[:2] and bx is by:
            continue  # one range of one buffer in two iterations: never live at once
        lo, hi = offset[bx.id], offset[by.id]
        if lo < hi + by.size and hi < lo + bx.size and sx[0] <= sy[1] and sy[0] <= sx[1]:
            out.append(f"{bx.id} and {by.id} live at once on shared bytes in {points}")
    # Per arena byte: (step, epoch, thread, write, instance) of every access so far.
    history: dict[int, list[tuple[int, int, int, bool, Instance]]] = {}
    epoch = 0
    for t, step in enumerate(trace):
        if step.point in runtime:
            epoch += 1
        for i, b in enumerate(req.buffers):
            if b.id not in offset:
                continue
            for part, (s, e) in enumerate(b.lifetimes):
                if not s <= step.point < e:
                    continue
                who = _instance(req, i, part, step)
                if b.accesses:
                    done = [
                        (a.op == "write", touches[i, k])
                        for k, a in enumerate(b.accesses)
                        if a.at == step.point
                    ]
                else:  # no pattern: any thread may touch any byte at any point of the range
                    done = [(True, [(th, byte) for th in range(threads) for byte in range(b.size)])]
                for write, pairs in done:
                    for thread, byte in pairs:
                        at = offset[b.id] + byte
                        for t0, e0, th0, w0, who0 in history.get(at, ()):
                            if who0 != who and e0 == epoch and (write or w0) and th0 != thread:
                                out.append(
                                    f"race on byte {at}: {who0} at step {t0} (thread {th0}) and "
                                    f"{who} at step {t} (thread {thread}) in {points}"
                                )
                                return out
                        history.setdefault(at, []).append((t, epoch, thread, write, who))
    return out
