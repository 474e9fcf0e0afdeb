"""The loop, branch and live-range kernels in examples/ plan as docs/examples.md says.

Outcomes are worked out by hand from the requests; every plan goes through the static
validator and the brute force over every unrolled execution (tests/support/loops_brute.py),
and is compared with the same kernel written as a straight line
(``planner.pipeline.program.straight_line``: hull lifetimes grown over the loops, arms one
after the other).
"""

from __future__ import annotations

import json
from typing import Any

import planner
from planner.core.io import parse_request
from planner.core.models import UNKNOWN_TRIPS, Plan, PlanRequest
from planner.pipeline.program import straight_line
from tests.support.loops_brute import check
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"


def _data(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / name).read_text())
    return data


def _plan(data: dict[str, Any] | PlanRequest) -> tuple[PlanRequest, Plan]:
    request = parse_request(data)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    if request.has_control_flow:
        problems, peak = check(request, plan)
        assert not problems, problems[:3]
        assert plan.lower_bound == peak
    return request, plan


def _offset(plan: Plan, ident: str) -> int:
    return next(p.offset for p in plan.placements if p.id == ident)


def _share(plan: Plan, a: str, b: str) -> bool:
    pa = next(p for p in plan.placements if p.id == a)
    pb = next(p for p in plan.placements if p.id == b)
    return pa.offset < pb.offset + pb.size and pb.offset < pa.offset + pa.size


def test_tiled_gemm_end_of_body_barrier_protects_the_next_tile() -> None:
    request, plan = _plan(_data("loop_tiled_gemm.json"))
    # As and Bs (4 KB each) live together in the body; Cs (8 KB) after the loop over both.
    assert plan.arena_bytes == plan.lower_bound == 8192
    assert plan.status == "optimal"
    assert _share(plan, "Cs", "As")
    assert _share(plan, "Cs", "Bs")
    # The end-of-body __syncthreads() at 4 is the one the plan relies on: it separates the
    # reads at 3 from the next tile's writes at 1 (the back edge) and from Cs after the
    # last trip. Nothing is inserted; both barriers run 16 times.
    assert plan.barriers.inserted == []
    assert plan.barriers.required == [4]
    assert plan.barriers.static == 2
    assert plan.barriers.executions == 2 * 16
    # Without it, sync "insert" puts one barrier back in the body (after the reads at 3).
    _, bare = _plan({**_data("loop_tiled_gemm.json"), "barriers": [2]})
    assert bare.barriers.inserted == [4]
    assert bare.barriers.executions == 2 * 16
    # The straight line keeps the tiles for the whole loop and needs one more barrier at 5.
    line = planner.plan(straight_line(request))
    assert line.arena_bytes == 8192
    assert line.barriers.inserted == [5]


def test_pipelined_gemm_epilogue_reuses_the_stage_buffers() -> None:
    request, plan = _plan(_data("loop_pipelined_gemm.json"))
    stages = [b.id for b in request.buffers if b.id != "C_s"]
    # Six 8 KB stage buffers live across the main loop (written in the prologue, refilled
    # each trip) never share; the 64 KB epilogue tile reuses all of them after the loop.
    assert plan.arena_bytes == plan.lower_bound == 65536
    assert plan.naive_bytes == 6 * 8192 + 65536
    offsets = sorted(_offset(plan, s) for s in stages)
    assert offsets == [k * 8192 for k in range(6)]
    assert all(_share(plan, "C_s", s) for s in stages)
    # The stage buffers are read up to point 5 of the last trip: one barrier at 6, after
    # the loop, runs once; the in-body barriers at 3 and 5 run 30 times each.
    assert plan.barriers.inserted == [6]
    assert plan.barriers.executions == 30 + 30 + 1
    assert plan.barriers.required_executions == 1


def test_persistent_rnn_keeps_weight_shards_and_reuses_step_temporaries() -> None:
    request, plan = _plan(_data("loop_persistent_rnn.json"))
    weights = 8192 + 8192 + 512  # w_i2h, w_h2h shards and the hidden state, across the loop
    assert plan.arena_bytes == plan.lower_bound == weights + 1024 + 1024
    # Weights and state never share with the per-step temporaries...
    for w in ("w_i2h", "w_h2h", "h_s"):
        for t in ("x_s", "t_s", "g_s"):
            assert not _share(plan, w, t)
    # ... which reuse each other's bytes inside the body: x_s (read at 2) and g_s (from 4).
    assert _share(plan, "x_s", "g_s")
    # The existing barriers suffice: 4 inside a step, 1 at the top of the body for the
    # back edge (g_s of step t, x_s of step t + 1). Each runs 64 times.
    assert plan.barriers.inserted == []
    assert plan.barriers.required == [1, 4]
    assert plan.barriers.executions == 3 * 64
    assert plan.barriers.required_executions == 2 * 64
    # As a straight line every temporary holds its bytes for the whole loop: 512 B more.
    line = planner.plan(straight_line(request))
    assert line.arena_bytes == plan.arena_bytes + 512


def test_triton_loop_reuse_needs_the_back_edge_barrier() -> None:
    data = _data("loop_triton_backedge.json")
    _, plan = _plan(data)
    # c_s takes a_s's bytes inside the body: a barrier at 3, and one on the back edge
    # (c_s read at 4, a_s written at 1 of the next trip): at the top of the body.
    assert plan.arena_bytes == 16384
    assert _offset(plan, "a_s") == _offset(plan, "c_s")
    assert plan.barriers.required == [1, 3]
    assert plan.barriers.required_executions == 2 * UNKNOWN_TRIPS
    # Written as a straight line (no loops), the back edge is missed: only the barrier at 3.
    _, flat = _plan({**data, "loops": []})
    assert flat.barriers.required == [3]


def test_if_else_arms_share_their_scratch_bytes() -> None:
    request, plan = _plan(_data("branch_scratch.json"))
    # fast_s and slow_s (16 KB each) are in different arms: one offset, no barrier between.
    assert _offset(plan, "fast_s") == _offset(plan, "slow_s")
    assert plan.arena_bytes == plan.lower_bound == 4096 + 16384
    assert plan.barriers.required == [8]  # out_s over the arm's scratch, after the barrier
    # Arms one after the other with no barrier at 5: the scratch buffers cannot share.
    line = planner.plan(straight_line(request))
    assert line.arena_bytes == 4096 + 2 * 16384


def test_buffer_with_two_live_ranges_lends_its_gap() -> None:
    request, plan = _plan(_data("ranges_gap_fill.json"))
    # tmp_s lives in acc_s's gap [3, 6): one 16 KB slot, barriers at 3 and 6 between them.
    assert _offset(plan, "acc_s") == _offset(plan, "tmp_s")
    assert plan.arena_bytes == plan.lower_bound == 16384
    assert plan.barriers.required == [3, 6]
    line = planner.plan(straight_line(request))
    assert line.arena_bytes == 2 * 16384


def test_nvfuser_inner_alias_inside_a_loop_needs_no_barrier() -> None:
    request, plan = _plan(_data("loop_nvfuser_inner_alias.json"))
    # Each thread writes and reads its own elements of T2_s, then of T3_s, every trip: T3_s
    # sits on T2_s, and the next trip's T2_s on T3_s, with no barrier under "existing".
    assert plan.arena_bytes == plan.lower_bound == 4096
    assert _offset(plan, "T2_s") == _offset(plan, "T3_s")
    assert plan.barriers.static == plan.barriers.executions == 0
    assert plan.aliases == [["T2_s", "T3_s"], ["T3_s", "T2_s"]]
    # As a straight line both tensors hold their bytes for the whole loop.
    line = planner.plan(straight_line(request))
    assert line.arena_bytes == 8192
