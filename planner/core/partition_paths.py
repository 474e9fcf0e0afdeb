"""The paths of a partitioned request with loops and branches, as the planner reads them
(docs/design.md, Warp-specialised partitions, Loops and branches).

A path runs each loop a trip count it admits of 0 to 3 (``path_trips``: 3 stands for any
more) and one arm of each branch it reaches. It is a straight-line partitioned request whose
points are the runs of the original points in order, so each run of a point is a point of
its own and a wait observes the arrives of earlier iterations. A buffer's lifetime is grown
over every loop it enters or leaves; a buffer inside a loop body has one instance per
iteration (every instance at the buffer's one offset); an instance no access of the buffer
touches on the path holds nothing there and is left out. Every sync of the request runs at
each run of its point. ``Path.buffer`` maps each instance back to its buffer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from planner.core.models import PlanRequest
from planner.core.models.partition_control import path_trips

__all__ = ["Path", "grown_lifetime", "partition_paths"]


@dataclass
class _Node:
    """A loop or a branch (``kind``), its span, and what it holds directly (per arm for a
    branch)."""

    kind: str
    index: int
    start: int
    end: int
    parts: list[tuple[int, int, list[_Node]]] = field(default_factory=list)


@dataclass(frozen=True)
class Path:
    """One straight-line program: its request (sync "existing"), the original buffer of each
    instance in request order, and the original point of each of its points."""

    request: PlanRequest
    buffer: list[int]
    points: list[int]


_Step = tuple[int, tuple[tuple[int, int], ...]]  # (point, (loop, iteration) of each loop around)


def _tree(req: PlanRequest) -> list[_Node]:
    """The loops and branches nested by containment (a loop holds a branch of its span)."""
    nodes = [_Node("loop", k, lp.start, lp.end) for k, lp in enumerate(req.loops)]
    nodes += [_Node("branch", k, br.start, br.end) for k, br in enumerate(req.branches)]
    nodes.sort(key=lambda n: (n.start, -n.end, n.kind != "loop"))
    top: list[_Node] = []
    stack: list[_Node] = []
    for n in nodes:
        while stack and not (stack[-1].start <= n.start and n.end <= stack[-1].end):
            stack.pop()
        if stack:
            parent = stack[-1]
            part = next(p for p in parent.parts if p[0] <= n.start and n.end <= p[1])
            part[2].append(n)
        else:
            top.append(n)
        if n.kind == "loop":
            n.parts = [(n.start, n.end, [])]
        else:
            n.parts = [(a0, a1, []) for a0, a1 in req.branches[n.index].arms]
        stack.append(n)
    return top


def _steps(
    req: PlanRequest, lo: int, hi: int, inner: list[_Node], around: tuple[tuple[int, int], ...]
) -> list[list[_Step]]:
    """Every run of ``[lo, hi)`` holding ``inner`` (sorted by start)."""
    pieces: list[list[list[_Step]]] = []
    at = lo
    for n in inner:
        pieces.append([[(p, around) for p in range(at, n.start)]])
        if n.kind == "branch":
            pieces.append(
                [r for a0, a1, kids in n.parts for r in _steps(req, a0, a1, kids, around)]
            )
        else:
            kids = n.parts[0][2]
            runs: list[list[_Step]] = []
            for trips in path_trips(req.loops[n.index]):
                each = [
                    _steps(req, n.start, n.end, kids, (*around, (n.index, t))) for t in range(trips)
                ]
                runs += [[s for body in combo for s in body] for combo in itertools.product(*each)]
            pieces.append(runs)
        at = n.end
    pieces.append([[(p, around) for p in range(at, hi)]])
    return [[s for piece in combo for s in piece] for combo in itertools.product(*pieces)]


def grown_lifetime(req: PlanRequest, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` grown over every loop it enters or leaves."""
    changed = True
    while changed:
        changed = False
        for lp in req.loops:
            inside = lp.start <= start and end <= lp.end
            holds = start <= lp.start and lp.end <= end
            if lp.start < end and start < lp.end and not inside and not holds:
                start, end = min(start, lp.start), max(end, lp.end)
                changed = True
    return start, end


def _last(req: PlanRequest) -> int:
    return max(
        [b.end for b in req.buffers]
        + [a.at for b in req.buffers for a in b.accesses]
        + [s.at for s in req.syncs]
        + list(req.barriers)
        + [lp.end for lp in req.loops]
        + [br.end for br in req.branches]
    )


def partition_paths(req: PlanRequest) -> list[Path]:
    """Every path of ``req`` (its count capped by the request model's
    ``check_partition_control``)."""
    return [_path(req, steps) for steps in _steps(req, 0, _last(req) + 1, _tree(req), ())]


@dataclass(frozen=True)
class _Instances:
    """The runs of each original point (as steps of the path), and per buffer its instances:
    their (first step, end step) and their ids."""

    runs: dict[int, list[int]]
    spans: list[list[tuple[int, int]]]
    ids: list[list[str]]
    index: dict[str, int]

    def instance(self, name: str | None, step: int) -> str | None:
        """The id of the instance of buffer ``name`` live at ``step`` (``name`` itself for a
        buffer of one instance or no buffer)."""
        k = self.index.get(name or "")
        if k is None or len(self.spans[k]) < 2:
            return name
        pick = 0
        for n, (s, _) in enumerate(self.spans[k]):
            if s <= step:
                pick = n
        return self.ids[k][pick]


def _spans(
    req: PlanRequest, steps: list[_Step], runs: dict[int, list[int]]
) -> list[list[tuple[int, int]]]:
    """Per buffer its instances: (first step, end step), by the iterations of its loops."""
    spans: list[list[tuple[int, int]]] = []
    for b in req.buffers:
        s0, e0 = grown_lifetime(req, b.start, b.end)
        mine = {k for k, lp in enumerate(req.loops) if lp.start <= s0 and e0 <= lp.end}
        first: dict[tuple[tuple[int, int], ...], list[int]] = {}
        for p in range(s0, e0):
            for k in runs.get(p, ()):
                key = tuple(it for it in steps[k][1] if it[0] in mine)
                span = first.setdefault(key, [k, k + 1])
                span[0], span[1] = min(span[0], k), max(span[1], k + 1)
        spans.append(sorted((s, e) for s, e in first.values()))
    return spans


def _instance_ids(req: PlanRequest, spans: list[list[tuple[int, int]]]) -> list[list[str]]:
    """Per buffer the ids of its instances: its own id for one, ``id#n`` (primed past any id
    taken) for several."""
    names = {b.id for b in req.buffers}
    ids: list[list[str]] = []
    for b, inst in zip(req.buffers, spans, strict=True):
        if len(inst) == 1:
            ids.append([b.id])
            continue
        made: list[str] = []
        for n in range(len(inst)):
            name = f"{b.id}#{n + 1}"
            while name in names:
                name += "'"
            names.add(name)
            made.append(name)
        ids.append(made)
    return ids


def _instances(req: PlanRequest, steps: list[_Step]) -> _Instances:
    """The instances of the buffers on the path of ``steps``."""
    runs: dict[int, list[int]] = {}
    for k, (p, _) in enumerate(steps):
        runs.setdefault(p, []).append(k)
    spans = _spans(req, steps, runs)
    index = {b.id: k for k, b in enumerate(req.buffers)}
    return _Instances(runs, spans, _instance_ids(req, spans), index)


def _path_buffers(req: PlanRequest, inst: _Instances) -> tuple[list[dict[str, Any]], list[int]]:
    """The instances touched on the path, as buffers of the path request, and the original
    buffer of each."""
    buffers: list[dict[str, Any]] = []
    owner: list[int] = []
    for k, b in enumerate(req.buffers):
        base = b.model_dump(exclude_defaults=True, exclude={"ranges", "accesses"})
        for name, (s, e) in zip(inst.ids[k], inst.spans[k], strict=True):
            accesses = []
            for a in b.accesses:
                for step in inst.runs.get(a.at, []):
                    if s <= step < e:
                        one = a.model_dump(exclude_defaults=True)
                        one["at"] = step
                        if a.mbarrier is not None:
                            one["mbarrier"] = inst.instance(a.mbarrier, step)
                        accesses.append(one)
            if b.accesses and not accesses:
                continue  # untouched on this path: its bytes hold nothing there
            buffers.append({**base, "id": name, "start": s, "end": e, "accesses": accesses})
            owner.append(k)
    return buffers, owner


def _path_syncs(req: PlanRequest, inst: _Instances, horizon: int) -> list[dict[str, Any]]:
    """Every sync at each run of its point up to ``horizon`` (syncs past every lifetime order
    nothing)."""
    syncs = []
    for y in req.syncs:
        for step in inst.runs.get(y.at, []):
            if step > horizon:
                continue
            one = y.model_dump(exclude_defaults=True)
            one["at"] = step
            if y.mbarrier is not None:
                one["mbarrier"] = inst.instance(y.mbarrier, step)
            syncs.append(one)
    return syncs


def _path(req: PlanRequest, steps: list[_Step]) -> Path:
    inst = _instances(req, steps)
    buffers, owner = _path_buffers(req, inst)
    horizon = max((b["end"] for b in buffers), default=0)
    syncs = _path_syncs(req, inst, horizon)
    data = req.model_dump(exclude_defaults=True, exclude={"loops", "branches", "options"})
    options = req.options.model_dump(exclude_defaults=True, exclude={"barrier_candidates"})
    path = PlanRequest.model_validate(
        {
            **data,
            "buffers": buffers,
            "syncs": syncs,
            "barriers": sorted(
                s for p in set(req.barriers) for s in inst.runs.get(p, []) if s <= horizon
            ),
            "options": {**options, "sync": "existing", "max_new_barriers": None},
        }
    )
    return Path(request=path, buffer=owner, points=[p for p, _ in steps])
