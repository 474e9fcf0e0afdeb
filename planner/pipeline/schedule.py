"""Which attempts of the straight-line route run on a request, and each one's share of the
time limit (the shares themselves are in ``planner.core.budget``).

An attempt is one placement the route may compute (``Kind``). Which attempts may run is
decided from the request alone (``Eligible``); ``schedule`` gives each of them its share of
the time limit, and an attempt not in the schedule never runs (``share`` refuses it). The
shares of every schedule sum to at most 1 (tests/pipeline/test_schedule.py enumerates them),
so the attempts of one request never ask for more than its limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from planner.core import budget

__all__ = ["Eligible", "Kind", "schedule", "share"]


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
class Eligible:
    """Which attempts the request allows, as far as its options and shape decide."""

    inserts: bool  # sync "insert" with room for a new barrier (max_new_barriers != 0)
    aliases: bool  # some buffers may alias (thread-access patterns)
    few_barriers_first: bool  # a few-barrier plan at the bound is tried first (no cap, ...)
    few_barriers: bool  # few enough buffers for the few-barrier search
    capped_barriers: bool  # a cap or the Pareto front asks for plans with fewer barriers
    exact: bool  # the exact barrier model applies
    alias_model: bool = False  # the exact alias model applies (aliases or a cap, few buffers)


def _shares(table: dict[str, Fraction]) -> dict[Kind, Fraction]:
    return {Kind(name): f for name, f in table.items()}


_ALONE = _shares(budget.ALONE)
_ALONE_ALIASES = _shares(budget.ALONE_ALIASES)
_ALONE_ALIAS_MODEL = _shares(budget.ALONE_ALIAS_MODEL)
_INSERT = _shares(budget.INSERT)


def schedule(route: Eligible) -> dict[Kind, Fraction]:
    """The attempts that may run, each with its share of the time limit."""
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
