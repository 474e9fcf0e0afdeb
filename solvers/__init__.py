"""Offset solvers, on the ground layer alone: the greedy portfolio of named heuristics
(``greedy``), the exact methods (``search``, a branch and bound over canonical placements;
``cpsat``, a CP-SAT model; ``barrier_model``, offsets and new barriers chosen together), the
clique bound (``bounds``), and ``auto``, which runs greedy and then the exact methods where
greedy leaves a gap to the bound. Each returns a ``Solution`` (``solution``): the offsets found
and what is proved about them."""

from planner.solvers.greedy import HEURISTICS, portfolio, run
from planner.solvers.solution import Solution

__all__ = ["HEURISTICS", "Solution", "portfolio", "run"]
