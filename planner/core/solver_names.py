"""The names ``options.solver`` accepts: part of the request's contract.

``planner.solvers.registry`` maps every name to what runs it (and a test checks that the two
agree), so the request model can refuse an unknown name at parse time and the OpenAPI schema
lists the choices.
"""

from __future__ import annotations

__all__ = [
    "EXACT_METHODS",
    "FITS",
    "HEURISTICS",
    "METHODS",
    "ORDERINGS",
    "SKYLINE_RULES",
    "SOLVER_NAMES",
]

EXACT_METHODS = ("search", "cpsat")  # the order "auto" and "exact" run them in
METHODS = ("auto", "greedy", "exact", *EXACT_METHODS)  # besides single heuristics
ORDERINGS = ("size", "length", "area", "start", "degree", "input")  # greedy placement orders
FITS = ("best-fit", "first-fit")
SKYLINE_RULES = ("length", "size", "area", "flush")  # what "best" buffer means on a stretch
HEURISTICS = (
    *(f"{o}/{f}" for o in ORDERINGS for f in FITS),
    *(f"{rule}/skyline" for rule in SKYLINE_RULES),
    "random/skyline",
)
# Every accepted name: a method, a heuristic, or a heuristic as "greedy:NAME".
SOLVER_NAMES = (*METHODS, *HEURISTICS, *(f"greedy:{h}" for h in HEURISTICS))
