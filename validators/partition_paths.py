"""The paths of a partitioned request with loops and branches, as the validators read them
(docs/design.md, Warp-specialised partitions, Loops and branches): each path a straight-line
partitioned request and its plan, on which the partitioned checks run unchanged. Written
apart from the planner's expansion (``planner.core.partition_paths``).

A path takes one arm of every branch it reaches and runs every loop a trip count it admits,
of 0 to 3 (3 standing for any more, a ring's steady state). Its points are the original
points in the order they run, numbered anew: each run of a point is a point of its own, so
"a wait observes every arrive at an earlier point" takes in the earlier iterations. A
buffer is grown over every loop its lifetime enters or leaves; one inside a loop body has an
instance per iteration (``id#k``), all at the buffer's offset, so the reuse of its own bytes
from one iteration to the next is judged like any other; an instance that no access of the
buffer touches on the path holds nothing and is left out. Every sync, of the request or the
plan, at a point runs at each run of that point.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from planner.core.models import Plan, PlanRequest

__all__ = ["MAX_PATHS", "PathProgram", "TooManyPathsError", "on_paths", "path_programs"]

MAX_PATHS = 64  # straight-line programs a request may unroll to
MAX_RUN_POINTS = 4096  # points of one path
_TRIPS = (0, 1, 2, 3)  # trip counts a path runs a loop; 3 stands for any more


Found = tuple[str, str, list[str], int | None]  # (code, message, buffers, point)


class TooManyPathsError(Exception):
    """The request unrolls to more paths, or longer ones, than the validators check."""


class UnwaitedOnPathError(Exception):
    """A path where an asynchronous access never completes: no request with that path is
    well formed, so the path is not checked further; ``found`` says which accesses."""

    def __init__(self, found: list[Found]) -> None:
        super().__init__(found)
        self.found = found


@dataclass(frozen=True)
class _Run:
    point: int
    iterations: tuple[tuple[int, int], ...]  # (loop, iteration) of each loop around


@dataclass(frozen=True)
class PathProgram:
    """One path: its straight-line request and plan, the run-time barriers, the original
    buffer of each instance and the path in words."""

    request: PlanRequest
    plan: Plan
    barriers: list[int]
    origin: dict[str, str]
    label: str
    points: list[int]  # the original point of each of the path's points


def _trip_counts(request: PlanRequest, k: int) -> list[int]:
    loop = request.loops[k]
    low = loop.trips if loop.trips is not None else (loop.min_trips or 0)
    high = loop.trips if loop.trips is not None else loop.max_trips
    fit = [t for t in _TRIPS if low <= t and (high is None or t <= high)]
    return fit or [_TRIPS[-1]]


def _last_point(request: PlanRequest, plan: Plan) -> int:
    points = [b.end for b in request.buffers]
    points += [a.at for b in request.buffers for a in b.accesses]
    points += [s.at for s in request.syncs] + list(request.barriers)
    points += [lp.end for lp in request.loops] + [br.end for br in request.branches]
    points += [*plan.barriers.inserted, *plan.barriers.required]
    points += [n.at for n in plan.named_barriers] + [f.at for f in plan.fences]
    points += [v.at for v in plan.invals]
    return max(points, default=0)


def _runs(request: PlanRequest, last: int) -> list[tuple[list[_Run], str]]:
    """Every path: the runs of points in order, and the choices that make it."""
    spans: list[tuple[int, int, int, str, int]] = [
        (lp.start, lp.end, 0, "loop", k) for k, lp in enumerate(request.loops)
    ]
    spans += [(br.start, br.end, 1, "branch", k) for k, br in enumerate(request.branches)]

    def inside(
        lo: int, hi: int, me: tuple[str, int] | None
    ) -> list[tuple[int, int, int, str, int]]:
        mine = [t for t in spans if lo <= t[0] and t[1] <= hi and (t[3], t[4]) != me]

        def held(t: tuple[int, int, int, str, int]) -> bool:
            return any(
                o is not t
                and o[0] <= t[0]
                and t[1] <= o[1]
                and ((o[0], o[1]) != (t[0], t[1]) or o[2] < t[2])
                for o in mine
            )

        return sorted((t for t in mine if not held(t)), key=lambda t: t[0])

    def walk(
        lo: int, hi: int, me: tuple[str, int] | None, around: tuple[tuple[int, int], ...]
    ) -> list[tuple[list[_Run], list[str]]]:
        out: list[tuple[list[_Run], list[str]]] = [([], [])]
        p = lo
        for s, e, _, kind, k in inside(lo, hi, me):
            plain = [_Run(q, around) for q in range(p, s)]
            choices: list[tuple[list[_Run], list[str]]] = []
            if kind == "loop":
                for trips in _trip_counts(request, k):
                    bodies = [walk(s, e, ("loop", k), (*around, (k, t))) for t in range(trips)]
                    for combo in itertools.product(*bodies):
                        choices.append(
                            (
                                [r for runs, _ in combo for r in runs],
                                [f"loops.{k} x{trips}"] + [w for _, words in combo for w in words],
                            )
                        )
            else:
                for a, (a0, a1) in enumerate(request.branches[k].arms):
                    for runs, words in walk(a0, a1, ("branch", k), around):
                        choices.append((runs, [f"branches.{k} arm {a}", *words]))
            out = [(r + plain + c, w + cw) for r, w in out for c, cw in choices]
            if len(out) > MAX_PATHS:
                raise TooManyPathsError(f"more than {MAX_PATHS} paths")
            p = e
        return [(r + [_Run(q, around) for q in range(p, hi)], w) for r, w in out]

    paths = walk(0, last + 1, None, ())
    for runs, _ in paths:
        if len(runs) > MAX_RUN_POINTS:
            raise TooManyPathsError(f"a path of {len(runs)} points, past {MAX_RUN_POINTS}")
    return [(runs, ", ".join(words) or "the straight line") for runs, words in paths]


def _grown(request: PlanRequest, start: int, end: int) -> tuple[int, int]:
    """The lifetime grown over every loop it enters or leaves."""
    while True:
        lo, hi = start, end
        for lp in request.loops:
            crosses = lp.start < hi and lo < lp.end
            nested = (lp.start <= lo and hi <= lp.end) or (lo <= lp.start and lp.end <= hi)
            if crosses and not nested:
                lo, hi = min(lo, lp.start), max(hi, lp.end)
        if (lo, hi) == (start, end):
            return start, end
        start, end = lo, hi


class _Instances:
    """Each buffer's instances on one path: (id, first run, end run) in order."""

    def __init__(self, request: PlanRequest, runs: list[_Run]) -> None:
        self.of: dict[str, list[tuple[str, int, int]]] = {}
        taken = {b.id for b in request.buffers}
        for b in request.buffers:
            lo, hi = _grown(request, b.start, b.end)
            loops = {k for k, lp in enumerate(request.loops) if lp.start <= lo and hi <= lp.end}
            groups: dict[tuple[tuple[int, int], ...], list[int]] = {}
            for n, r in enumerate(runs):
                if lo <= r.point < hi:
                    key = tuple(it for it in r.iterations if it[0] in loops)
                    groups.setdefault(key, []).append(n)
            spans = sorted((g[0], g[-1] + 1) for g in groups.values())
            named: list[tuple[str, int, int]] = []
            for k, (s, e) in enumerate(spans):
                ident = b.id
                if len(spans) > 1:
                    ident = f"{b.id}#{k + 1}"
                    while ident in taken:
                        ident += "#"
                    taken.add(ident)
                named.append((ident, s, e))
            self.of[b.id] = named

    def at(self, name: str | None, run: int) -> str | None:
        """The instance of buffer ``name`` a reference at ``run`` means: the one live there,
        else the latest before it, else the first (a name of no buffer stays)."""
        found = self.of.get(name or "")
        if not found or len(found) == 1:
            return name
        before = [i for i, s, _ in found if s <= run]
        live = [i for i, s, e in found if s <= run < e]
        return (live or before or [found[0][0]])[-1]


def path_programs(request: PlanRequest, plan: Plan, barriers: list[int]) -> list[PathProgram]:
    """The straight-line programs of every path, with ``barriers`` (the run-time block
    barriers, original points) at every run of their points; raises ``TooManyPathsError``."""
    from planner.core.models import PlanRequest as Request

    out: list[PathProgram] = []
    for runs, label in _runs(request, _last_point(request, plan)):
        where: dict[int, list[int]] = {}
        for n, r in enumerate(runs):
            where.setdefault(r.point, []).append(n)
        inst = _Instances(request, runs)

        def copies(points: list[int], where: dict[int, list[int]] = where) -> list[int]:
            return sorted({n for p in points for n in where.get(p, [])})

        buffers: list[dict[str, Any]] = []
        origin: dict[str, str] = {}
        for b in request.buffers:
            for ident, s, e in inst.of[b.id]:
                accesses = [
                    {
                        **a.model_dump(exclude_defaults=True),
                        "at": n,
                        **({"mbarrier": inst.at(a.mbarrier, n)} if a.mbarrier else {}),
                    }
                    for a in b.accesses
                    for n in where.get(a.at, [])
                    if s <= n < e
                ]
                if b.accesses and not accesses:
                    continue  # no access on this path: the instance holds nothing
                origin[ident] = b.id
                data = b.model_dump(exclude_defaults=True, exclude={"ranges"})
                buffers.append({**data, "id": ident, "start": s, "end": e, "accesses": accesses})
        last = max((d["end"] for d in buffers), default=0)  # no sync past it orders anything
        syncs = [
            {
                **y.model_dump(exclude_defaults=True),
                "at": n,
                **({"mbarrier": inst.at(y.mbarrier, n)} if y.mbarrier else {}),
            }
            for y in request.syncs
            for n in where.get(y.at, [])
            if n <= last
        ]
        data = request.model_dump(exclude_defaults=True, exclude={"loops", "branches"})
        options = {**data.get("options", {}), "barrier_candidates": None}
        try:
            path = Request.model_validate(
                {
                    **data,
                    "buffers": buffers,
                    "syncs": syncs,
                    "barriers": [n for n in copies(list(request.barriers)) if n <= last],
                    "options": options,
                }
            )
        except ValidationError as e:
            raise UnwaitedOnPathError(_unwaited(e, buffers, origin, label)) from None
        out.append(
            PathProgram(
                request=path,
                plan=_path_plan(plan, inst, set(origin), where, copies),
                barriers=copies(barriers),
                origin=origin,
                label=label,
                points=[r.point for r in runs],
            )
        )
    return out


def _path_plan(
    plan: Plan, inst: _Instances, kept: set[str], where: dict[int, list[int]], copies: Any
) -> Plan:
    """The plan on one path: each placement for every instance of its buffer, each sync the
    plan lists at every run of its point."""
    placements = [
        p.model_copy(update={"id": ident})
        for p in plan.placements
        for ident in ([i for i, _, _ in inst.of[p.id] if i in kept] if p.id in inst.of else [p.id])
    ]
    named = [
        nb.model_copy(update={"at": n}) for nb in plan.named_barriers for n in where.get(nb.at, [])
    ]
    fences = [f.model_copy(update={"at": n}) for f in plan.fences for n in where.get(f.at, [])]
    waits = [w.model_copy(update={"at": n}) for w in plan.waits for n in where.get(w.at, [])]
    invals = [
        v.model_copy(update={"at": n, "mbarrier": inst.at(v.mbarrier, n)})
        for v in plan.invals
        for n in where.get(v.at, [])
    ]
    barriers = plan.barriers.model_copy(
        update={
            "existing": copies(plan.barriers.existing),
            "inserted": copies(plan.barriers.inserted),
            "required": copies(plan.barriers.required),
        }
    )
    return plan.model_copy(
        update={
            "placements": placements,
            "named_barriers": named,
            "fences": fences,
            "waits": waits,
            "invals": invals,
            "barriers": barriers,
        }
    )


def _unwaited(
    e: ValidationError, buffers: list[dict[str, Any]], origin: dict[str, str], label: str
) -> list[Found]:
    """``missing_wait`` for each asynchronous access of a path that nothing completes (the
    path's refusal as ``uncovered_async_access``); any other refusal of a path is an error
    of the expansion, raised."""
    out: list[Found] = []
    for err in e.errors():
        loc = err["loc"]
        if err["type"] != "uncovered_async_access" or loc[:1] != ("buffers",):
            raise e
        name = str(buffers[int(loc[1])]["id"])
        out.append(("missing_wait", f"{err['msg']} (on the path {label})", [origin[name]], None))
    return out


def on_paths(
    request: PlanRequest,
    plan: Plan,
    barriers: list[int],
    check: Callable[[PathProgram], list[Found]],
) -> list[Found]:
    """``check`` run on every path, each finding under the original buffer ids and points
    (the instances and the path named in the message), each (code, buffers) once."""
    try:
        paths = path_programs(request, plan, barriers)
    except TooManyPathsError as e:
        return [("too_many_paths", f"not checked: {e}", [], None)]
    except UnwaitedOnPathError as e:
        return e.found
    out: list[Found] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for path in paths:
        if not path.request.buffers:
            continue  # a path that skips every buffer
        for code, message, names, point in check(path):
            ids = [path.origin.get(n, n) for n in names]
            key = (code, tuple(ids))
            if key in seen:
                continue
            seen.add(key)
            where = ", ".join(
                f"{n!r} an instance of {path.origin[n]!r}"
                for n in names
                if path.origin.get(n, n) != n
            )
            more = f"; {where}" if where else ""
            at = path.points[point] if point is not None and 0 <= point < len(path.points) else None
            out.append((code, f"{message} (on the path {path.label}{more})", ids, at))
    return out
