"""Brute force on tiny requests with barriers, caps and aliases: the optimum over every
placement on the alignment grid and every barrier set the policy allows (hypothesis
strategies and helpers shared by the bound and alias-model tests)."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from planner.core.models import PlanRequest
from tests.support.patterned import patterned_dicts

if TYPE_CHECKING:
    from planner.core.aliasing import Owners

__all__ = ["Found", "brute_optimum", "capped_requests", "hazard_requests"]


def _aliases(
    req: PlanRequest, offsets: tuple[int, ...], barriers: list[int], owners: Owners
) -> list[list[str]] | None:
    """The sharing rules (docs/design.md, Reuse hazard) on one placement with these barriers:
    lifetimes that meet never share a byte; a later buffer shares with an earlier one only
    past a barrier in ``(last access, first access]`` or by thread-local aliasing. The aliased
    pairs (ids), or None when the placement breaks a rule."""
    from planner.core.patterns import access_span

    aliased: list[list[str]] = []
    bufs = req.buffers
    for a, b in itertools.permutations(range(len(bufs)), 2):
        x, y = bufs[a], bufs[b]
        if not (offsets[a] < offsets[b] + y.size and offsets[b] < offsets[a] + x.size):
            continue
        if x.start < y.end and y.start < x.end:
            return None
        if x.end > y.start:
            continue  # the pair is judged as (b, a)
        last_a, first_b = access_span(x)[1], access_span(y)[0]
        if any(last_a < p <= first_b for p in barriers):
            continue
        if not owners.compatible(a, b, offsets[b] - offsets[a]):
            return None
        aliased.append([x.id, y.id])
    return aliased


Found = tuple[int, tuple[int, ...], list[int], list[list[str]]]


def brute_optimum(req: PlanRequest) -> Found:
    """Smallest arena over every placement on the alignment grid and every barrier set the
    policy allows (more barriers never hurt, so only the largest sets within the cap)."""
    from planner.core.aliasing import Owners

    opts = req.options
    existing = sorted(set(req.barriers))
    if opts.sync == "existing" or opts.max_new_barriers == 0:
        choices = [existing]
    else:
        pool = opts.barrier_candidates
        pool = list(range(req.horizon + 1)) if pool is None else pool
        extra = sorted(set(pool) - set(existing))
        k = len(extra) if opts.max_new_barriers is None else min(len(extra), opts.max_new_barriers)
        choices = [sorted({*existing, *c}) for c in itertools.combinations(extra, k)]
    step = req.alignment
    total = sum(b.size for b in req.buffers)
    grids = [range(0, total - b.size + 1, step) for b in req.buffers]
    best: Found | None = None
    for barriers in choices:
        owners = Owners(req, barriers)
        for offsets in itertools.product(*grids):
            arena = max(o + b.size for o, b in zip(offsets, req.buffers, strict=True))
            if best is not None and arena >= best[0]:
                continue
            aliased = _aliases(req, offsets, barriers, owners)
            if aliased is not None:
                best = (arena, offsets, barriers, aliased)
    assert best is not None
    return best


@st.composite
def hazard_requests(draw: st.DrawFn) -> PlanRequest:
    data = draw(patterned_dicts(max_buffers=3, horizon=7))
    data["alignment"] = 128  # offsets on a coarse grid keep the brute force small
    for b in data["buffers"]:
        b["alignment"] = None
    if data["options"]["sync"] == "insert" and draw(st.booleans()):
        top = max(b["end"] for b in data["buffers"])
        data["options"]["barrier_candidates"] = draw(st.lists(st.integers(0, top), max_size=3))
    return PlanRequest.model_validate(data)


@st.composite
def capped_requests(
    draw: st.DrawFn, max_buffers: int = 3, patterns: bool = True, horizon: int = 7
) -> PlanRequest:
    """Tiny requests under "insert" with a cap of 1 or 2 new barriers; with ``patterns``
    their buffers carry thread-access patterns (so they may alias)."""
    data = draw(patterned_dicts(max_buffers=max_buffers, horizon=horizon))
    data["alignment"] = 128
    for b in data["buffers"]:
        b["alignment"] = None
        if not patterns:
            del b["accesses"]
    cap = draw(st.integers(1, 2))
    data["options"] = {"sync": "insert", "max_new_barriers": cap, "time_limit": 2.0}
    return PlanRequest.model_validate(data)
