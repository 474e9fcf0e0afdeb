"""The parts of an outcome every route builds alike (planner/pipeline/outcome_parts.py): block
barriers and their counts, an explicit conflict graph's figures, and the certificate of
why nothing fits."""

from __future__ import annotations

from typing import Any

from planner.pipeline.ground import Ground, build_ground
from planner.pipeline.outcome_parts import (
    Witness,
    block_barriers,
    pair_certifier,
    pair_stats,
    partition_barriers,
)
from planner.solvers import registry
from tests.support.control_flow import tiled_loop


def _ground(**options: Any) -> Ground:
    """Barriers at 2 (inside a loop of 16 trips) and 6 (after it); three buffers."""
    return build_ground(tiled_loop([6, 2], **options), registry.lookup("auto"), 1.0)


def test_block_barriers_count_each_point_as_often_as_its_loops_run_it() -> None:
    barriers = block_barriers(_ground(sync="insert"), [4], [2, 4])
    assert (barriers.existing, barriers.inserted, barriers.required) == ([2, 6], [4], [2, 4])
    assert barriers.static == 3
    assert barriers.executions == 16 + 16 + 1
    assert barriers.required_executions == 32


def test_block_barriers_count_the_executions_of_the_points_that_run() -> None:
    barriers = block_barriers(_ground(sync="none"), [], [3, 6], running=[2, 3, 6])
    assert barriers.static == 2
    assert barriers.executions == 16 + 16 + 1
    assert barriers.required_executions == 17


def test_partition_barriers_list_new_ones_by_the_sync_mode() -> None:
    inserted = partition_barriers(_ground(sync="insert"), [4])
    assert (inserted.inserted, inserted.required, inserted.executions) == ([4], [4], 33)
    required = partition_barriers(_ground(sync="none"), [4])
    assert (required.inserted, required.required, required.executions) == ([], [4], 17)
    capped = partition_barriers(_ground(sync="insert", max_new_barriers=0), [4])
    assert (capped.inserted, capped.required) == ([], [])


def test_pair_stats_split_live_from_hazard_pairs_and_count_components() -> None:
    stats = pair_stats(5, 1, [(0, 1), (1, 2), (3, 4)])
    assert (stats.buffers, stats.live_edges, stats.hazard_edges) == (5, 1, 2)
    assert stats.components == 2
    assert pair_stats(3, 0, []).components == 3


def test_a_bound_over_the_capacity_is_certified_by_its_witness() -> None:
    g = _ground()
    certify = pair_certifier(g.req, Witness([0, 2], 192, 3), 256)
    over = certify(128)
    assert (over.reason, over.live_bytes, over.point, over.buffers) == (
        "lower_bound",
        192,
        3,
        ["a", "c"],
    )
    whole = certify(200)
    assert (whole.reason, whole.live_bytes, whole.point, whole.buffers) == (
        "infeasible_subset",
        256,
        None,
        ["a", "b", "c"],
    )
