"""How one request's time limit is shared: the fixed work, and each attempt's share.

See ``planner.pipeline.facade`` for why shares of the time limit, and not the clock,
decide what runs."""

from __future__ import annotations

__all__ = ["FIXED_SECONDS_PER_BUFFER"]

# Seconds per buffer of the work every plan needs (graph, one greedy heuristic, barriers,
# assembly, static check), measured on one core of a busy shared 2-core machine at 30 000 buffers.
FIXED_SECONDS_PER_BUFFER = 1e-4
