"""How a request's time limit is spent: every share of it, and every rate that turns seconds
into work, in one table.

The planner never asks the clock what to do: each piece of optional work gets a share of
``options.time_limit`` and turns it into a work budget (nodes, conflicts visited, sets of
points) at a fixed rate, so the same request runs the same work on any machine that keeps
up (``planner.pipeline.facade`` explains the policy). Rates are measured on one core of a
busy shared 2-core machine and rounded down, so a faster machine finishes early rather than
late. Who reads each figure is named beside it.
"""

from __future__ import annotations

from fractions import Fraction

# The work every plan needs (graph, one greedy heuristic, barriers, assembly, static check),
# per buffer: a time limit below it is refused (``pipeline.facade``).
FIXED_SECONDS_PER_BUFFER = 1e-4

# Shares of the time limit per attempt of the straight-line route (``pipeline.schedule``),
# by attempt kind; the shares of one schedule sum to at most 1.
ALONE = {"policy": Fraction(1)}  # no barrier can be inserted: the policy's plan alone
ALONE_ALIASES = {"policy": Fraction(1, 2), "aliases": Fraction(1, 2)}
ALONE_ALIAS_MODEL = {
    "policy": Fraction(3, 8),
    "aliases": Fraction(3, 8),
    "alias-model": Fraction(1, 4),
}
INSERT = {
    "few-barriers-first": Fraction(1, 16),
    "policy": Fraction(3, 8),
    "aliases": Fraction(1, 16),
    "existing": Fraction(1, 8),
    "existing+aliases": Fraction(1, 16),
    "few-barriers": Fraction(1, 16),
    "capped-barriers": Fraction(1, 8),  # split between the k asked for
    "exact": Fraction(3, 16),  # split between the caps asked for
    "alias-model": Fraction(1, 16),  # only with aliases or a cap: few-barriers-first's share
}

# Within one attempt (``solvers.auto``).
GREEDY_SHARE = 0.5  # the greedy heuristics, chosen by estimated cost
GREEDY_MIN_SECONDS = 0.05  # below this the whole small portfolio still runs (``solvers.greedy``)
DENSE_REST_SHARE = 0.2  # of the portfolio on dense graphs: the dearer best fits after first fits
FIRST_TRY_SHARE = 0.01  # at most this for the search's first try before the portfolio
EXACT_SETUP_SHARE = 0.25  # at most this estimated to build the exact methods' instances
LOAD_SECONDS = 60.0  # the once-per-process warm-up's own deadline
# The exact part of a kernel-sized request (``solvers.auto``): shares of its time.
TINY_FIRST_SEARCH = 0.02  # a tiny part: the first, short search
TINY_CPSAT = 0.78  # a tiny part: CP-SAT, then the search again with the rest
SMALL_FIRST_SEARCH = 0.03  # a small part: the first search, at the bound only
SMALL_WINDOWS = 0.01  # a small part: the window bound (``solvers.windows``)
SMALL_AT_BOUND = 0.05  # a small part, per run: CP-SAT asked for a plan at the bound
SMALL_ABOVE_SEARCH = 0.01  # a small part: the search above the bound
SMALL_CPSAT = 0.72  # a small part: CP-SAT minimizing, then the search with the rest
SMALL_GAP_SECONDS = 0.25  # exact methods at most, by default, on a gap below the alignment

# Rates: the cost model of the greedy portfolio (``solvers.greedy.affordable``).
GAP_FILL_RATE = 2e7  # buffers + 2 x conflicts visited per second by a gap-filling fit
LIST_RATE = 5e7  # buffers + conflicts per second building the neighbour lists
SKYLINE_RATE = 1.5e8  # buffer x time-slot steps per second of one skyline run
SWEEP_RATE = 5e6  # buffers per second through the sweep (first fit, no lists)
TREE_FIRST_FIT_RATE = 8e7  # buffers + 2 x conflicts per second: first fit on the tree
EXACT_SETUP_RATE = 2.5e6  # buffers + conflicts per second building the exact instances
# The exact search (``solvers.search``).
# Kernel steps a second of time limit buys (a node: n + sections): about one core's rate
# (docs/solvers.md, The exact search).
NODE_WORK_PER_SECOND = 1.2e8
MIN_NODES = 1_000  # nodes even the smallest time limit gets

# The program route (``pipeline.unrolled``).
SECONDS_PER_HAZARD = 6e-6  # the work every plan needs, per ordered pair of pieces in sequence
PAIRS_EXACT_SHARE = 0.5  # CP-SAT on the pairs, when the fits leave a gap
STAB_SEARCH_SHARE = 0.1  # the search for the cheapest barrier points (``pipeline.unrolled_stab``)
STAB_WORK_PER_SECOND = 5_000_000  # hazards and windows that search judges per second
