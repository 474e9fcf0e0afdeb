"""Offset solvers: the greedy portfolio (exact methods come later)."""

from planner.solvers.greedy import HEURISTICS, GreedyResult, portfolio, run

__all__ = ["HEURISTICS", "GreedyResult", "portfolio", "run"]
