"""How one request's time limit is shared: the fixed work, and each attempt's share.

An attempt is one placement the pipeline may compute (``Kind``). Which attempts may run is
decided from the request alone (``Route``); ``schedule`` gives each of them its share of the
time limit, and an attempt not in the schedule never runs (``share`` refuses it). The shares
of every route sum to at most 1 (tests/pipeline/test_budget.py enumerates them), so the attempts of
one request never ask for more than its limit. See ``planner.pipeline.facade`` for why shares
of the limit, and not the clock, decide what runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

__all__ = ["FIXED_SECONDS_PER_BUFFER", "Kind", "Route", "schedule", "share"]

# Seconds per buffer of the work every plan needs (graph, one greedy heuristic, barriers,
# assembly, static check), measured on one core of a busy shared 2-core machine at 30 000 buffers.
FIXED_SECONDS_PER_BUFFER = 1e-4


class Kind(Enum):
    """What an attempt plans on."""

    POLICY = "policy"  # the policy's barriers: existing ones, or a barrier wherever one helps
    ALIASES = "aliases"  # the same, with same-thread alias chains merged
    EXISTING = "existing"  # the existing barriers only (no new one)
    EXISTING_ALIASES = "existing+aliases"
    FEW_BARRIERS_FIRST = (
        "few-barriers-first"  # few new barriers, aiming at the bound, tried before the rest
    )
    FEW_BARRIERS = "few-barriers"  # few new barriers, aiming at the full plan's arena
    CAPPED_BARRIERS = (
        "capped-barriers"  # k of the full plan's new barriers (a cap, or the Pareto front)
    )
    EXACT = "exact"  # the exact barrier model
    ALIAS_MODEL = "alias-model"  # the exact model of pairwise sharing rules (aliases, caps)


@dataclass(frozen=True)
class Route:
    """What the request asks for, as far as the attempts are concerned."""

    inserts: bool  # sync "insert" with room for a new barrier (max_new_barriers != 0)
    aliases: bool  # some buffers may alias (thread-access patterns)
    few_barriers_first: bool  # a few-barrier plan at the bound is tried first (no cap, ...)
    few_barriers: bool  # few enough buffers for the few-barrier search
    capped_barriers: bool  # a cap or the Pareto front asks for plans with fewer barriers
    exact: bool  # the exact barrier model applies
    alias_model: bool = False  # the exact alias model applies (aliases or a cap, few buffers)


# Shares of the time limit. Planning on the policy's barriers alone takes all of it;
# with aliases it splits with the merged attempt.
_ALONE = {Kind.POLICY: Fraction(1)}
_ALONE_ALIASES = {Kind.POLICY: Fraction(1, 2), Kind.ALIASES: Fraction(1, 2)}
_ALONE_ALIAS_MODEL = {
    Kind.POLICY: Fraction(3, 8),
    Kind.ALIASES: Fraction(3, 8),
    Kind.ALIAS_MODEL: Fraction(1, 4),
}
_INSERT = {
    Kind.FEW_BARRIERS_FIRST: Fraction(1, 16),
    Kind.POLICY: Fraction(3, 8),
    Kind.ALIASES: Fraction(1, 16),
    Kind.EXISTING: Fraction(1, 8),
    Kind.EXISTING_ALIASES: Fraction(1, 16),
    Kind.FEW_BARRIERS: Fraction(1, 16),
    Kind.CAPPED_BARRIERS: Fraction(1, 8),  # split between the k asked for
    Kind.EXACT: Fraction(3, 16),  # split between the caps asked for
    Kind.ALIAS_MODEL: Fraction(1, 16),  # only with aliases or a cap: FEW_BARRIERS_FIRST's share
}


def schedule(route: Route) -> dict[Kind, Fraction]:
    """The attempts that may run on this route, each with its share of the time limit."""
    if not route.inserts:
        if route.aliases:
            return dict(_ALONE_ALIAS_MODEL if route.alias_model else _ALONE_ALIASES)
        return dict(_ALONE)
    # The few-barrier first try needs no cap, no Pareto front and no aliases: then the capped
    # and alias attempts never run, and its share is theirs. The exact alias model needs
    # aliases or a cap, so it never runs with the few-barrier first try either.
    wanted = {
        Kind.FEW_BARRIERS_FIRST: route.few_barriers_first
        and not (route.aliases or route.capped_barriers),
        Kind.POLICY: True,
        Kind.ALIASES: route.aliases,
        Kind.EXISTING: True,
        Kind.EXISTING_ALIASES: route.aliases,
        Kind.FEW_BARRIERS: route.few_barriers,
        Kind.CAPPED_BARRIERS: route.capped_barriers,
        Kind.EXACT: route.exact,
        Kind.ALIAS_MODEL: route.alias_model,
    }
    shares = {kind: _INSERT[kind] for kind, run in wanted.items() if run}
    if Kind.ALIAS_MODEL in shares:
        # The only attempt that proves plans with aliases or a cap: it gets what the others
        # leave of the limit (they run before it, and it stops once it has proved the plan).
        rest = 1 - sum((f for k, f in shares.items() if k is not Kind.ALIAS_MODEL), Fraction(0))
        shares[Kind.ALIAS_MODEL] = max(shares[Kind.ALIAS_MODEL], rest)
    excess = sum(shares.values(), Fraction(0)) - 1
    if excess > 0:
        # Only with aliases, a cap and the barrier model: that model then proves nothing (it
        # aliases at equal offsets only) and the alias model does; the excess is taken from
        # the barrier model's share.
        shares[Kind.EXACT] -= excess
    return shares


def share(shares: dict[Kind, Fraction], kind: Kind, limit: float) -> float:
    """Seconds of ``limit`` for an attempt of ``kind``; one outside the schedule is a bug."""
    if kind not in shares:
        raise AssertionError(f"attempt {kind.value!r} is not in this request's time budget")
    return limit * float(shares[kind])
