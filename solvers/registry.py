"""Every solver name a request may give, what it runs, and whether it is installed.

The names are the request's contract (``planner.core.solver_names``); this module maps each to
the greedy heuristics it restricts the portfolio to and the exact methods it may run, and says
which exact methods this installation has.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

from planner.core.solver_names import EXACT_METHODS, HEURISTICS, METHODS, SOLVER_NAMES
from planner.solvers.exact import ExactMethod

__all__ = [
    "ExactMethod",
    "SolverChoice",
    "exact_method",
    "installed",
    "lookup",
    "unavailable",
]

# method -> (module, function, the optional distribution it needs); "windows" is no solver
# name: the search's window bound, which ``auto`` runs on kernel-sized parts.
_MODULES = {
    "search": ("planner.solvers.search", "solve_search", None),
    "cpsat": ("planner.solvers.cpsat", "solve_cpsat", "ortools"),
    "windows": ("planner.solvers.windows", "solve_windows", None),
}


@dataclass(frozen=True)
class SolverChoice:
    """What one solver name runs."""

    name: str
    heuristics: list[str] | None  # the greedy heuristics; None: the default portfolio
    exact: tuple[str, ...]  # exact methods tried after greedy, in order

    def barrier_model(self, pareto: bool) -> bool:
        """Whether the exact barrier model is asked for: by an exact solver name, or by the
        Pareto front under ``auto``."""
        return self.name in ("exact", "cpsat") or (pareto and self.name == "auto")

    @property
    def alias_model(self) -> bool:
        """Whether the exact model of pairwise sharing rules may run."""
        return self.name in ("auto", "exact", "cpsat")

    @property
    def pair_model(self) -> bool:
        """Whether CP-SAT on an explicit graph's pairs may close a greedy gap."""
        return self.name in ("auto", "exact", "search", "cpsat")


def lookup(name: str) -> SolverChoice:
    """The choice a solver name stands for; ``KeyError`` for a name outside the contract."""
    if name not in SOLVER_NAMES:
        raise KeyError(name)
    if name in METHODS:
        if name in ("auto", "exact"):
            return SolverChoice(name, None, EXACT_METHODS)
        return SolverChoice(name, None, (name,) if name in EXACT_METHODS else ())
    heuristic = name.removeprefix("greedy:")
    assert heuristic in HEURISTICS
    return SolverChoice(name, [heuristic], ())


def exact_method(name: str) -> ExactMethod | None:
    """The named exact method, or None when its optional dependency is missing."""
    if not installed(name):
        return None
    module, func, _ = _MODULES[name]
    try:
        found: ExactMethod = getattr(importlib.import_module(module), func)
    except ImportError:
        return None
    return found


def installed(method: str) -> bool:
    """Whether an exact method's optional dependency is installed (nothing is imported)."""
    needs = _MODULES[method][2]
    return needs is None or importlib.util.find_spec(needs) is not None


def unavailable(name: str) -> bool:
    """Whether a name that asks for exact methods only (``exact``, ``search``, ``cpsat``) has
    none of them installed."""
    if name not in ("exact", *EXACT_METHODS):
        return False
    return all(exact_method(m) is None for m in lookup(name).exact)
