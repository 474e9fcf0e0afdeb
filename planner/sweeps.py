"""Sweeps: one request with parameters answered for many configurations and targets
(docs/sweeps.md).

Where the configurations share their structure (no loops, branches, ranges, access patterns,
pins, footprints or rings: only sizes and alignments change), they share one conflict graph,
built once from the default configuration: occupied intervals depend on lifetimes and
barriers, never on sizes. Sizes and alignments are evaluated for every configuration at once
(numpy), the lower bounds are one matrix product, and one compiled loop places every
configuration greedily (``solvers.batch``). A configuration whose lower bound fits a target
that its greedy arena does not is replanned by the full planner (``refine="gap"``), so "fits"
is what planning it alone says. Any other request is planned configuration by configuration.

``triton_prune`` turns a request into a hook for Triton's autotuner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from planner.core.dtypes import DTYPES
from planner.core.errors import FieldError, RequestError
from planner.core.graph import InterferenceGraph, build_graph
from planner.core.io import parse_model
from planner.core.models import MAX_SIZE, Plan, PlanRequest
from planner.core.models.sweep import (
    ConfigAnswer,
    SweepRequest,
    SweepResult,
    TargetFit,
    Verdict,
    answer_of,
)
from planner.core.params import MAX_CONFIGS, Template, columns, has_params, parse_template
from planner.core.targets import TARGETS, blocks_per_sm
from planner.pipeline import plan as plan_one
from planner.pipeline.pinned import pinned_plan
from planner.solvers.batch import peaks, place_batch, visit_orders

__all__ = ["TritonPrune", "run_sweep", "sweep", "triton_prune"]

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
PlansWanted = Literal["none", "fitting", "all"]
Refine = Literal["none", "gap", "all"]


def sweep(
    request: dict[str, Any] | str | bytes,
    configs: Sequence[Mapping[str, int]] | None = None,
    *,
    product: Mapping[str, Sequence[int]] | None = None,
    targets: Sequence[str] | None = None,
    plans: PlansWanted = "none",
    refine: Refine = "gap",
) -> SweepResult:
    """Answer a request with parameters for each configuration (default: the product of
    ``product``, else of every declared value) on each target: fits or not, the arena, the
    lower bound, the occupancy, and the plan when ``plans`` asks. Raises RequestError."""
    body = {
        "request": _as_dict(request),
        "configs": None if configs is None else [dict(c) for c in configs],
        "product": None if product is None else {k: list(v) for k, v in product.items()},
        "targets": None if targets is None else list(targets),
        "plans": plans,
        "refine": refine,
    }
    return run_sweep(parse_model(SweepRequest, body))


def _as_dict(request: dict[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(request, dict):
        return request
    import json

    try:
        data = json.loads(request)
    except ValueError as exc:
        raise RequestError.field(
            ("request",), f"malformed JSON: {exc}", "json_invalid", None
        ) from None
    if not isinstance(data, dict):
        raise RequestError.field(("request",), "a request is a JSON object", "model_type", None)
    return data


def _template(data: dict[str, Any]) -> Template:
    try:
        return parse_template(data if has_params(data) else {**data, "params": {}})
    except RequestError as exc:
        raise RequestError([_under("request", e) for e in exc.errors]) from None


def _under(prefix: str, e: FieldError) -> FieldError:
    return {**e, "loc": [prefix, *e.get("loc", [])]}


def run_sweep(body: SweepRequest) -> SweepResult:
    """The sweep of a parsed body (``sweep`` and ``POST /sweep``)."""
    template = _template(body.request)
    configs = _configurations(template, body)
    targets = _targets(body, template)
    shared = _Shared.of(template)
    if shared is not None:
        answers, refined = _shared_answers(template, shared, configs, targets, body)
    else:
        answers = [_alone(template, c, targets, body.plans) for c in configs]
        refined = len(configs)
    fitting = [sum(a.targets[k].fits for a in answers) for k in range(len(targets))]
    return SweepResult(
        name=template.name,
        params=template.names,
        targets=targets,
        shared_graph=shared is not None,
        refined=refined,
        fitting=fitting,
        answers=answers,
    )


def _configurations(template: Template, body: SweepRequest) -> list[dict[str, int]]:
    errors: list[FieldError] = []
    if body.configs is not None:
        out = []
        for k, c in enumerate(body.configs):
            try:
                out.append(template.check_config(c, ("configs", k)))
            except RequestError as exc:
                errors.extend(exc.errors)
        if errors:
            raise RequestError(errors)
        return out
    product = body.product or {}
    for name, values in product.items():
        if name not in template.params:
            known = ", ".join(template.params) or "none"
            errors.append(
                {
                    "loc": ["product", name],
                    "msg": f"unknown parameter {name!r}; declared: {known}",
                    "type": "unknown_parameter",
                    "input": name,
                }
            )
            continue
        for k, v in enumerate(values):
            if not template.params[name].allows(v):
                errors.append(
                    {
                        "loc": ["product", name, k],
                        "msg": f"{name} = {v} is not one of its declared values",
                        "type": "value_outside_domain",
                        "input": v,
                    }
                )
    if errors:
        raise RequestError(errors)
    count = template.product_size(product)
    if count > MAX_CONFIGS:
        raise RequestError.field(
            ("product",) if body.product else ("request", "params"),
            f"the product holds {count} configurations; at most {MAX_CONFIGS} (give configs, "
            "or fewer values)",
            "too_many_configs",
            count,
        )
    return list(template.configurations(product))


def _targets(body: SweepRequest, template: Template) -> list[str | None]:
    if body.targets is None:
        target = template.raw.get("target")
        return [target if isinstance(target, str) else None]
    errors: list[FieldError] = []
    for k, t in enumerate(body.targets):
        if t not in TARGETS:
            errors.append(
                {
                    "loc": ["targets", k],
                    "msg": f"unknown target {t!r}; known targets: {', '.join(TARGETS)}",
                    "type": "unknown_target",
                    "input": t,
                }
            )
    if errors:
        raise RequestError(errors)
    return list(body.targets)


def _capacity(target: str | None, request: PlanRequest) -> int | None:
    if target is None:
        return request.effective_capacity
    return TARGETS[target].max_smem_per_block


def _fit(target: str | None, capacity: int | None, arena: int, bound: int) -> TargetFit:
    fits = capacity is None or arena <= capacity
    verdict: Verdict = (
        "fits"
        if fits
        else "cannot_fit"
        if capacity is not None and bound > capacity
        else "plan_too_big"
    )
    occupancy = None if target is None else blocks_per_sm(TARGETS[target], arena)
    return TargetFit(
        target=target, capacity=capacity, fits=fits, verdict=verdict, blocks_per_sm=occupancy
    )


def _blocks_per_sm(target: str, arena: I64) -> I64:
    """``planner.core.targets.blocks_per_sm`` for many arenas."""
    p = TARGETS[target]
    per_block = arena + p.reserved_per_block
    blocks = np.minimum(p.smem_per_sm // np.maximum(per_block, 1), p.max_blocks_per_sm)
    blocks = np.where(per_block == 0, p.max_blocks_per_sm, blocks)
    result: I64 = np.where(arena > p.max_smem_per_block, 0, blocks)
    return result


def _invalid(config: dict[str, int], targets: list[str | None], why: str) -> ConfigAnswer:
    return ConfigAnswer(
        config=config,
        arena_bytes=None,
        lower_bound=None,
        naive_bytes=None,
        proved_optimal=False,
        targets=[
            TargetFit(target=t, capacity=None, fits=False, verdict="cannot_fit", blocks_per_sm=None)
            for t in targets
        ],
        error=why,
    )


def _alone(
    template: Template, config: dict[str, int], targets: list[str | None], plans: PlansWanted
) -> ConfigAnswer:
    """One configuration planned by the full planner."""
    try:
        request = template.bind(config, checked=True)
    except RequestError as exc:
        return _invalid(config, targets, exc.summary())
    if request.rings:
        return _alone_rings(config, request, targets, plans)
    result = plan_one(request)
    fits = [_fit(t, _capacity(t, request), result.arena_bytes, result.lower_bound) for t in targets]
    keep = plans == "all" or (plans == "fitting" and any(f.fits for f in fits))
    rings = {r.id: r.copies for r in result.rings} if result.rings else None
    return ConfigAnswer(
        config=config,
        arena_bytes=result.arena_bytes,
        lower_bound=result.lower_bound,
        naive_bytes=result.naive_bytes,
        proved_optimal=result.arena_bytes <= result.lower_bound,
        copies=rings,
        targets=fits,
        plan=result if keep else None,
    )


def _alone_rings(
    config: dict[str, int], request: PlanRequest, targets: list[str | None], plans: PlansWanted
) -> ConfigAnswer:
    """A configuration with rings: their depths depend on the capacity, so each target is
    planned on its own; the configuration's own figures are the first target's."""
    fits: list[TargetFit] = []
    results: list[Plan] = []
    for t in targets:
        on = request if t is None else request.model_copy(update={"target": t, "capacity": None})
        result = plan_one(on)
        copies = {r.id: r.copies for r in result.rings or ()}
        fit = _fit(t, _capacity(t, on), result.arena_bytes, result.lower_bound)
        fits.append(fit.model_copy(update={"copies": copies, "arena_bytes": result.arena_bytes}))
        results.append(result)
    first = results[0]
    keep = plans == "all" or (plans == "fitting" and fits[0].fits)
    return ConfigAnswer(
        config=config,
        arena_bytes=first.arena_bytes,
        lower_bound=first.lower_bound,
        naive_bytes=first.naive_bytes,
        proved_optimal=first.arena_bytes <= first.lower_bound,
        copies=fits[0].copies,
        targets=fits,
        plan=first if keep else None,
    )


@dataclass(frozen=True)
class _Shared:
    """What every configuration shares: the default configuration's request and graph."""

    base: PlanRequest
    graph: InterferenceGraph
    adj_ptr: I64
    adj: I64

    @classmethod
    def of(cls, template: Template) -> _Shared | None:
        base = template.bind(template.default_config(), checked=True)
        if (
            base.has_control_flow
            or base.options.shrink
            or base.options.overflow != "error"
            or any(b.accesses or b.offset is not None or b.copies is not None for b in base.buffers)
        ):
            return None
        g = build_graph(base)
        n = g.n
        neighbours: list[list[int]] = [[] for _ in range(n)]
        for a, b in g.edges():
            neighbours[a].append(b)
            neighbours[b].append(a)
        ptr = np.zeros(n + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(x) for x in neighbours])
        adj = np.fromiter((j for x in neighbours for j in x), dtype=np.int64, count=int(ptr[-1]))
        return cls(base, g, ptr, adj)


def _field(
    template: Template, loc: tuple[str | int, ...], cols: Mapping[str, I64], count: int
) -> I64 | None:
    values: I64 | None = template.values(loc, cols, count)
    return values


def _matrices(
    template: Template, base: PlanRequest, configs: list[dict[str, int]]
) -> tuple[I64, I64, I64 | None]:
    """Sizes and alignments (configurations x buffers) and the capacity per configuration."""
    count, n = len(configs), len(base.buffers)
    cols = columns(configs, template.names)
    size = np.empty((count, n), dtype=np.int64)
    align = np.empty((count, n), dtype=np.int64)
    default_align = _field(template, ("alignment",), cols, count)
    for i, b in enumerate(base.buffers):
        s = _field(template, ("buffers", i, "size"), cols, count)
        size[:, i] = b.size if s is None else s
        a = _field(template, ("buffers", i, "alignment"), cols, count)
        if a is None and b.alignment is None:
            a = default_align
        align[:, i] = base.alignment_of(b) if a is None else a
        if b.dtype is not None:
            align[:, i] = np.maximum(align[:, i], DTYPES[b.dtype].bytes)
    capacity = _field(template, ("capacity",), cols, count)
    return size, align, capacity


def _shared_answers(
    template: Template,
    shared: _Shared,
    configs: list[dict[str, int]],
    targets: list[str | None],
    body: SweepRequest,
) -> tuple[list[ConfigAnswer], int]:
    """Every configuration's answer on the default configuration's graph (the buffers and
    lifetimes do not change, only sizes and alignments), and how many were refined by a plan
    of their own."""
    base, g = shared.base, shared.graph
    count = len(configs)
    size, align, capacity_col = _matrices(template, base, configs)
    suspect = _suspect(base, size, align)
    offsets, arena = _placed_batch(shared, size, align, suspect)
    bound = peaks(g.start, g.occupied_end, size) if g.n else np.zeros(count, dtype=np.int64)
    caps = _caps(targets, capacity_col, base.effective_capacity, count)
    gap = _to_refine(caps, bound, arena, suspect, body.refine)
    full_plans = _refine(template, configs, gap, offsets, arena)
    table = _Table(
        arena.tolist(),
        bound.tolist(),
        _naive(size, align).tolist(),
        _per_target(targets, caps, arena, bound),
    )
    fit_models: dict[tuple[Any, ...], TargetFit] = {}
    answers: list[ConfigAnswer] = []
    for c, config in enumerate(configs):
        if suspect[c]:
            answers.append(_invalid(config, targets, _why_invalid(template, config)))
            continue
        fits = _fits_of(targets, table.rows, c, fit_models)
        plan = None
        if body.plans == "all" or (body.plans == "fitting" and any(f.fits for f in fits)):
            request = template.bind(config, checked=True)
            plan = full_plans.get(c) or pinned_plan(request, offsets[c].tolist())
        answers.append(_answer(config, table, c, fits, plan))
    return answers, int(gap.sum())


def _suspect(base: PlanRequest, size: I64, align: I64) -> Mask:
    """Per configuration: not a request (an alignment not a power of two, a size that holds
    no whole number of elements, or over ``MAX_SIZE``); binding it says why."""
    suspect: Mask = np.any((align & (align - 1)) != 0, axis=1)
    for i, b in enumerate(base.buffers):
        if b.dtype is not None:
            suspect |= size[:, i] % DTYPES[b.dtype].bytes != 0
    suspect |= np.any(size > MAX_SIZE, axis=1)
    return suspect


def _placed_batch(shared: _Shared, size: I64, align: I64, suspect: Mask) -> tuple[I64, I64]:
    """Offsets (configurations x buffers) and arena per configuration by the batch placement
    on the shared graph; zeros for the suspect ones."""
    g = shared.graph
    count = size.shape[0]
    good = np.flatnonzero(~suspect)
    offsets = np.zeros((count, g.n), dtype=np.int64)
    arena = np.zeros(count, dtype=np.int64)
    if good.size and g.n:
        orders = np.stack(visit_orders(g.start, size[good]))
        offsets[good], arena[good] = place_batch(
            orders, size[good], align[good], shared.adj_ptr, shared.adj
        )
    return offsets, arena


def _naive(size: I64, align: I64) -> I64:
    """Bytes per configuration of the buffers end to end in request order, each aligned."""
    naive = np.zeros(size.shape[0], dtype=np.int64)
    for i in range(size.shape[1]):
        naive = (naive + align[:, i] - 1) // align[:, i] * align[:, i] + size[:, i]
    return naive


def _caps(
    targets: list[str | None], capacity_col: I64 | None, base_capacity: int | None, count: int
) -> list[I64]:
    """Per target, the capacity of each configuration (bytes; -1: none): the target's shared
    memory per block, else the swept capacity, else the request's."""
    caps: list[I64] = []
    for t in targets:
        if t is not None:
            caps.append(np.full(count, TARGETS[t].max_smem_per_block, dtype=np.int64))
        elif capacity_col is not None:
            caps.append(capacity_col)
        else:
            caps.append(
                np.full(count, -1 if base_capacity is None else base_capacity, dtype=np.int64)
            )
    return caps


def _to_refine(caps: list[I64], bound: I64, arena: I64, suspect: Mask, refine: str) -> Mask:
    """Per configuration: planned on its own (``refine``: "gap", where the batch plan misses a
    capacity the bound fits; "all"; "none"), only where the batch plan is above the bound."""
    gap = np.zeros(bound.shape[0], dtype=bool)
    for cap in caps:
        limited = cap >= 0
        gap |= limited & (bound <= cap) & (arena > cap)
    if refine == "all":
        gap[:] = True
    elif refine == "none":
        gap[:] = False
    gap &= ~suspect
    gap &= arena > bound
    return gap


def _refine(
    template: Template, configs: list[dict[str, int]], gap: Mask, offsets: I64, arena: I64
) -> dict[int, Plan]:
    """Plan each configuration of ``gap`` on its own; where that needs fewer bytes, its plan
    (by configuration), offsets and arena replace the batch's (in place)."""
    full_plans: dict[int, Plan] = {}
    for c in np.flatnonzero(gap).tolist():
        alone = plan_one(template.bind(configs[c], checked=True))
        if alone.arena_bytes < arena[c]:
            arena[c] = alone.arena_bytes
            offsets[c] = [p.offset for p in alone.placements]
            full_plans[c] = alone
    return full_plans


# Per target: (fits, verdict, capacity or -1, blocks per SM) of every configuration.
_TargetRow = tuple[bool, str, int, int | None]


@dataclass(frozen=True)
class _Table:
    """The batch's figures per configuration, as Python values."""

    arena: list[int]  # bytes
    bound: list[int]  # bytes
    naive: list[int]  # bytes
    rows: list[list[_TargetRow]]  # per target, per configuration


def _per_target(
    targets: list[str | None], caps: list[I64], arena: I64, bound: I64
) -> list[list[_TargetRow]]:
    """Verdicts and occupancy per target, for every configuration at once."""
    count = arena.shape[0]
    rows: list[list[_TargetRow]] = []
    for t, cap in zip(targets, caps, strict=True):
        limited = cap >= 0
        fits_col = ~limited | (arena <= cap)
        verdict_col = np.where(
            fits_col, "fits", np.where(bound > cap, "cannot_fit", "plan_too_big")
        )
        if t is None:
            occupancy: list[int | None] = [None] * count
        else:
            occupancy = list(_blocks_per_sm(t, arena).tolist())
        columns_ = (fits_col.tolist(), verdict_col.tolist(), cap.tolist(), occupancy)
        rows.append(list(zip(*columns_, strict=True)))
    return rows


def _fits_of(
    targets: list[str | None],
    rows: list[list[_TargetRow]],
    c: int,
    models: dict[tuple[Any, ...], TargetFit],
) -> list[TargetFit]:
    """Configuration ``c``'s fit per target; frozen and few (targets x verdicts x
    occupancies), so ``models`` keeps one per distinct answer."""
    fits = []
    for t, row in zip(targets, rows, strict=True):
        key = (t, *row[c])
        found = models.get(key)
        if found is None:
            ok, verdict, limit, blocks = row[c]
            found = models[key] = TargetFit(
                target=t,
                capacity=None if limit < 0 else limit,
                fits=ok,
                verdict=verdict,
                blocks_per_sm=blocks,
            )
        fits.append(found)
    return fits


def _why_invalid(template: Template, config: dict[str, int]) -> str:
    """Why a suspect configuration is not a request, as binding it says."""
    try:
        template.bind(config, checked=True)
    except RequestError as exc:
        return exc.summary()
    return "invalid configuration"


def _answer(
    config: dict[str, int], table: _Table, c: int, fits: list[TargetFit], plan: Plan | None
) -> ConfigAnswer:
    """Configuration ``c``'s answer from the batch's figures."""
    a = table.arena[c]
    return answer_of(
        {
            "config": config,
            "arena_bytes": a,
            "lower_bound": table.bound[c],
            "naive_bytes": table.naive[c],
            "proved_optimal": a <= table.bound[c],
            "copies": None,
            "targets": fits,
            "plan": plan,
            "error": None,
        }
    )


class _Config:
    """What Triton's autotuner passes for a configuration (``triton.Config``)."""

    kwargs: dict[str, Any]
    num_stages: int


class TritonPrune:
    """``prune_configs_by={"early_config_prune": hook}``: keeps the configurations whose
    plan fits the target (every one of them, in the order given)."""

    def __init__(
        self,
        request: dict[str, Any] | str | bytes,
        target: str,
        stages: str | None,
        names: Mapping[str, str],
    ) -> None:
        self.template = _template(_as_dict(request))
        if target not in TARGETS:
            raise RequestError.field(
                ("target",),
                f"unknown target {target!r}; known targets: {', '.join(TARGETS)}",
                "unknown_target",
                target,
            )
        self.request = _as_dict(request)
        self.target = target
        self.stages = stages
        self.names = dict(names)
        self.last: SweepResult | None = None

    def config_of(self, config: Any) -> dict[str, int]:
        """A Triton config's parameter values: its kwargs under their names (or ``names``'
        mapping), and ``num_stages`` as the parameter ``stages``."""
        kwargs = dict(getattr(config, "kwargs", {}) or {})
        values: dict[str, int] = {}
        for param in self.template.names:
            key = self.names.get(param, param)
            if param == self.stages:
                values[param] = int(config.num_stages)
            elif key in kwargs:
                values[param] = int(kwargs[key])
        return values

    def __call__(self, configs: Sequence[Any], named_args: Any = None, **kwargs: Any) -> list[Any]:
        if not configs:
            return []
        result = sweep(self.request, [self.config_of(c) for c in configs], targets=[self.target])
        self.last = result
        kept = [c for c, a in zip(configs, result.answers, strict=True) if a.targets[0].fits]
        if kept:
            return kept
        # None fits: the smallest keeps the autotuner running, and its launch fails loudly.
        arenas = [math.inf if a.arena_bytes is None else a.arena_bytes for a in result.answers]
        smallest = arenas.index(min(arenas))
        return [configs[smallest]]


def triton_prune(
    request: dict[str, Any] | str | bytes,
    *,
    target: str = "sm_90",
    stages: str | None = "STAGES",
    names: Mapping[str, str] | None = None,
) -> Callable[..., list[Any]]:
    """An ``early_config_prune`` hook for ``triton.autotune`` from a request with
    parameters: each config's kwargs bind the parameters of the same name (``names`` maps a
    parameter to another kwarg), its ``num_stages`` binds ``stages``; the configurations
    whose plan does not fit ``target`` are pruned."""
    return TritonPrune(request, target, stages, names or {})
