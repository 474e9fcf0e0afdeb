"""Symbolic plans: offsets valid over a range of parameters (docs/design.md, Symbolic plans).

Of two conflicting buffers the plan fixes which sits below the other, for every value of the
parameters at once; each offset is then the max, over the buffers below it, of their offset
plus size rounded up to its alignment: an expression over the parameters that keeps every
conflicting pair apart at every point, by construction. The order is taken from greedy plans
of the box's corners (the buffers by offset there); the one whose arena is least at the upper
corner (every parameter at its max) wins, ties by the sum over the corners.

The conflict graph is the one the request's barriers give (under sync "insert" too), so the
plan relies on the request's barriers alone at every point.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from planner.core.errors import RequestError
from planner.core.expr import Expr, read_plan_expr
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import Plan, PlanRequest
from planner.core.models.symbolic import Corner, ParamRange, SymbolicOffset, SymbolicPlan
from planner.core.params import Template, corners, parse_template
from planner.core.sync_choice import Intervals, hits_each, stab
from planner.pipeline.pinned import pinned_plan
from planner.solvers.batch import peaks, place_batch, visit_orders

__all__ = ["check_symbolic", "evaluate", "symbolic_plan"]


def _const(n: int) -> Expr:
    return Expr("int", number=n)


def _var(name: str) -> Expr:
    return Expr("var", name=name)


def _max(args: list[Expr]) -> Expr:
    if not args:
        return _const(0)
    if len(args) == 1:
        return args[0]
    return Expr("max", tuple(args))


def _round_up(x: Expr, align: int) -> Expr:
    if align == 1:
        return x
    bumped = Expr("+", (x, _const(align - 1)))
    return Expr("*", (Expr("//", (bumped, _const(align))), _const(align)))


def symbolic_plan(request: dict[str, Any] | str | bytes) -> SymbolicPlan:
    """The symbolic plan of a request with parameters; raises RequestError for a request
    it cannot cover (control flow, access patterns, pins, rings, or alignments that are
    expressions)."""
    template = parse_template(request)
    base = template.bind(template.default_config(), checked=True)
    _supported(template, base)
    barriers = _barriers(base)
    graph = build_graph(base, barriers=barriers) if barriers is not None else build_graph(base)
    sizes = [_size_expr(template, base, i) for i in range(graph.n)]
    align = [base.alignment_of(b) for b in base.buffers]
    conflicts = _conflicts(graph)
    box = corners(template)
    upper = {name: p.bounds[1] for name, p in template.params.items()}
    orders = _corner_orders(graph, conflicts, sizes, align, [upper, *box])
    order, offsets_expr = _best_order(orders, conflicts, sizes, align, upper, box)
    arena = _arena(offsets_expr, sizes)
    return SymbolicPlan(
        name=base.name,
        params=[
            ParamRange(name=k, min=p.bounds[0], max=p.bounds[1]) for k, p in template.params.items()
        ],
        offsets=_symbolic_offsets(base, order, conflicts, offsets_expr, sizes, align),
        order=[base.buffers[i].id for i in order],
        arena=arena.render(),
        barriers=sorted(set(base.barriers) if barriers is None else barriers),
        corners=_corners(graph, sizes, box, arena, offsets_expr),
    )


def _conflicts(graph: InterferenceGraph) -> list[set[int]]:
    """Each buffer's conflicting buffers."""
    conflicts = [set[int]() for _ in range(graph.n)]
    for a, b in graph.edges():
        conflicts[a].add(b)
        conflicts[b].add(a)
    return conflicts


def _corner_orders(
    graph: InterferenceGraph,
    conflicts: list[set[int]],
    sizes: list[Expr],
    align: list[int],
    candidates: list[dict[str, int]],
) -> list[list[int]]:
    """The distinct orders (buffers by offset, ties by index) of greedy plans at the
    candidate configurations, in the order found."""
    n = graph.n
    if not n:
        return [[]]
    size_at = np.array([[s.value(c) for s in sizes] for c in candidates], dtype=np.int64).reshape(
        len(candidates), n
    )
    align_row = np.array(align, dtype=np.int64)
    orders: list[list[int]] = []
    ptr, adj = _csr(conflicts)
    for visit in visit_orders(graph.start, size_at):
        offsets, _ = place_batch(
            visit[None], size_at, np.broadcast_to(align_row, size_at.shape).copy(), ptr, adj
        )
        rows: list[list[int]] = offsets.tolist()
        for row in rows:
            order = sorted(range(n), key=row.__getitem__)  # stable: ties by index
            if order not in orders:
                orders.append(order)
    return orders


def _best_order(
    orders: list[list[int]],
    conflicts: list[set[int]],
    sizes: list[Expr],
    align: list[int],
    upper: dict[str, int],
    box: list[dict[str, int]],
) -> tuple[list[int], list[Expr]]:
    """The order whose arena is least at the upper corner, ties by the sum over the
    corners (the first found of equals), and its offset expressions."""
    best: tuple[tuple[int, int], list[int], list[Expr]] | None = None
    for order in orders:
        offsets_expr = _offsets(order, conflicts, sizes, align)
        arena = _arena(offsets_expr, sizes)
        key = (_value(arena, offsets_expr, upper), sum(_value(arena, offsets_expr, c) for c in box))
        if best is None or key < best[0]:
            best = (key, order, offsets_expr)
    assert best is not None
    return best[1], best[2]


def _symbolic_offsets(
    base: PlanRequest,
    order: list[int],
    conflicts: list[set[int]],
    offsets_expr: list[Expr],
    sizes: list[Expr],
    align: list[int],
) -> list[SymbolicOffset]:
    """Each buffer's offset and size expressions, and the conflicting buffers below it."""
    rank = {i: k for k, i in enumerate(order)}
    return [
        SymbolicOffset(
            id=b.id,
            name=f"offset_{i}",
            offset=offsets_expr[i].render(),
            size=sizes[i].render(),
            alignment=align[i],
            below=[
                base.buffers[j].id
                for j in sorted(conflicts[i], key=rank.__getitem__)
                if rank[j] < rank[i]
            ],
        )
        for i, b in enumerate(base.buffers)
    ]


def _corners(
    graph: InterferenceGraph,
    sizes: list[Expr],
    box: list[dict[str, int]],
    arena: Expr,
    offsets_expr: list[Expr],
) -> list[Corner]:
    """Per corner of the box: the arena there and the peak of live bytes (a lower bound)."""
    n = graph.n
    lows = (
        peaks(
            graph.start,
            graph.occupied_end,
            np.array([[s.value(c) for s in sizes] for c in box], dtype=np.int64).reshape(
                len(box), n
            ),
        )
        if n
        else np.zeros(len(box), dtype=np.int64)
    )
    return [
        Corner(config=c, arena_bytes=_value(arena, offsets_expr, c), lower_bound=int(lows[k]))
        for k, c in enumerate(box)
    ]


def _barriers(base: PlanRequest) -> list[int] | None:
    """Under sync "insert", the request's barriers and the fewest more (the synchronisation
    choice on intervals, at allowed points) that separate every pair of buffers one after
    the other, so any two buffers not live together may share bytes at any point of the
    box; None under the other policies (their own graph)."""
    opts = base.options
    if opts.sync != "insert" or opts.max_new_barriers == 0:
        return None
    existing = sorted(set(base.barriers))
    allowed = sorted(set(opts.barrier_candidates)) if opts.barrier_candidates is not None else None
    # A barrier p with a.end <= p <= b.start separates a from b.
    gaps = sorted(
        {(a.end, b.start) for a in base.buffers for b in base.buffers if a.end <= b.start}
    )
    lo = np.asarray([g[0] for g in gaps], dtype=np.int64)
    hi = np.asarray([g[1] for g in gaps], dtype=np.int64)
    open_ = ~hits_each(existing, lo, hi)
    chosen, _ = stab(Intervals(lo[open_], hi[open_]), allowed)
    if opts.max_new_barriers is not None:
        chosen = sorted(chosen)[: opts.max_new_barriers]
    return sorted(set(existing) | set(chosen))


def _supported(template: Template, base: PlanRequest) -> None:
    why = None
    if base.has_control_flow:
        why = "loops, branches or several live ranges"
    elif any(b.accesses for b in base.buffers):
        why = "access patterns"
    elif any(b.offset is not None for b in base.buffers):
        why = "pinned offsets"
    elif base.rings:
        why = "rings"
    elif base.options.shrink or base.options.overflow != "error":
        why = "shrink or spill"
    if why is not None:
        raise RequestError.field(
            (),
            f"a symbolic plan covers straight-line requests; this one has {why}",
            "symbolic_unsupported",
            None,
        )
    for f in template.fields:
        if f.loc[-1] == "alignment":
            raise RequestError.field(
                f.loc,
                f"a symbolic plan needs constant alignments; {f.text!r} is an expression",
                "symbolic_unsupported",
                f.text,
            )


def _size_expr(template: Template, base: PlanRequest, i: int) -> Expr:
    for f in template.fields:
        if f.loc == ("buffers", i, "size"):
            return f.expr
    return _const(base.buffers[i].size)


def _csr(
    conflicts: list[set[int]],
) -> tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.int64]]]:
    ptr = np.zeros(len(conflicts) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(c) for c in conflicts])
    adj = np.fromiter((j for c in conflicts for j in sorted(c)), dtype=np.int64, count=int(ptr[-1]))
    return ptr, adj


def _offsets(
    order: list[int], conflicts: list[set[int]], sizes: list[Expr], align: list[int]
) -> list[Expr]:
    """Per buffer, its offset over the parameters and the offsets below it (offset_<k>)."""
    rank = {i: k for k, i in enumerate(order)}
    out: list[Expr] = [_const(0)] * len(order)
    for i in order:
        below = sorted((j for j in conflicts[i] if rank[j] < rank[i]), key=rank.__getitem__)
        ends = [_round_up(Expr("+", (_var(f"offset_{j}"), sizes[j])), align[i]) for j in below]
        out[i] = _max(ends)
    return out


def _arena(offsets: list[Expr], sizes: list[Expr]) -> Expr:
    return _max([Expr("+", (_var(f"offset_{i}"), s)) for i, s in enumerate(sizes)])


def evaluate(plan: SymbolicPlan, config: Mapping[str, int]) -> tuple[list[int], int]:
    """Offsets (request order) and the arena at one configuration."""
    env: dict[str, int] = dict(config)
    index = {o.id: k for k, o in enumerate(plan.offsets)}
    for ident in plan.order:
        o = plan.offsets[index[ident]]
        env[o.name] = read_plan_expr(o.offset).value(env)
    offsets = [env[o.name] for o in plan.offsets]
    return offsets, read_plan_expr(plan.arena).value(env)


def _value(arena: Expr, offsets: list[Expr], config: Mapping[str, int]) -> int:
    env: dict[str, int] = dict(config)
    pending = list(range(len(offsets)))
    while pending:  # offsets refer only to those below them: resolve in rounds
        rest = []
        for i in pending:
            try:
                env[f"offset_{i}"] = offsets[i].value(env)
            except KeyError:
                rest.append(i)
        pending = rest
    return arena.value(env)


def sample_points(template: Template, count: int, seed: int = 0) -> list[dict[str, int]]:
    """Every corner, then ``count`` random points of the declared values."""
    rng = random.Random(seed)
    points = corners(template)
    for _ in range(count):
        points.append(
            {
                n: rng.choice(p.enumerate()) if p.count <= 4096 else rng.randint(*p.bounds)
                for n, p in template.params.items()
            }
        )
    return points


def check_symbolic(
    request: dict[str, Any] | str | bytes, plan: SymbolicPlan, points: Sequence[Mapping[str, int]]
) -> list[tuple[PlanRequest, Plan]]:
    """The plan at each point, each through the static validator: the request bound there
    with the symbolic plan's barriers (sync "existing"), planned with every buffer pinned at
    the symbolic offsets. Raises AssertionError naming the point and the first violation when
    one is found."""
    from planner.pipeline import validate

    template = parse_template(request)
    out = []
    for point in points:
        config = template.check_config(point)
        bound = template.bind(config, checked=True)
        # The plan's barriers, and no other: what the symbolic plan states must suffice.
        bound = bound.model_copy(
            update={
                "barriers": plan.barriers,
                "options": bound.options.model_copy(update={"sync": "existing"}),
            }
        )
        offsets, arena = evaluate(plan, config)
        placed = pinned_plan(bound, offsets)
        report = validate(bound, placed)
        if not report.valid or placed.arena_bytes != arena:
            first = report.violations[0].message if report.violations else "arena differs"
            raise AssertionError(f"symbolic plan fails at {config}: {first}")
        out.append((bound, placed))
    return out
