"""Generated requests as the placement and search kernels see them, for the tests that
compare the kernels with outputs recorded from earlier code."""

from __future__ import annotations

from planner.core.graph import InterferenceGraph, build_graph
from planner.core.models import PlanRequest
from planner.families import family_instance
from planner.solvers.greedy import portfolio

PIN_EVERY = 7  # the pinned cases pin every seventh buffer where a greedy plan puts it


def kernel_case(
    family: str, n: int, seed: int, pins: bool = False
) -> tuple[PlanRequest, InterferenceGraph]:
    """The instance of ``family`` with lifetimes only (the caller synchronizing) and no
    capacity; with ``pins``, every ``PIN_EVERY``-th buffer pinned where the greedy portfolio
    puts it. The request and its graph."""
    request = family_instance(family, n, seed).request
    request = request.model_copy(
        update={
            "capacity": None,
            "target": None,
            "options": request.options.model_copy(update={"sync": "none"}),
        }
    )
    if pins:
        offsets = portfolio(build_graph(request, "none")).plan_offsets
        buffers = [
            b.model_copy(update={"offset": int(offsets[i])}) if i % PIN_EVERY == 0 else b
            for i, b in enumerate(request.buffers)
        ]
        request = request.model_copy(update={"buffers": buffers})
    return request, build_graph(request, "none")
