"""The kernel program built from a request and its plan."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

import planner
from planner.core.models import Plan, PlanRequest
from planner.validators.program import AffineAccess, build_program, runtime_barriers
from tests.support.samples import SHARDED


def _request(**overrides: Any) -> PlanRequest:
    data: dict[str, Any] = {
        "block": [4, 2, 1],
        "alignment": 4,
        "barriers": [2],
        "buffers": [
            {
                "id": "a",
                "size": 64,
                "start": 0,
                "end": 3,
                "accesses": [
                    {"op": "write", "at": 0, "bytes": 4, "index": {"threadIdx.x": 1}, "offset": 2},
                    {"op": "read", "at": 1, "bytes": 4, "threads": "all"},
                ],
            },
            {"id": "b", "size": 40, "start": 3, "end": 6},
            {"id": "c", "size": 7, "start": 5, "end": 6},
        ],
        "options": {"sync": "insert"},
    }
    data.update(overrides)
    return PlanRequest.model_validate(data)


def _elements(
    access: AffineAccess, block: tuple[int, int, int], n: int, block_x: int = 0
) -> dict[int, list[int]]:
    """Brute force: thread id -> elements in block (block_x, 0, 0), guard applied."""
    loops = [range(e) for _, e in access.loops]
    out: dict[int, list[int]] = {}
    for z, y, x in itertools.product(*(range(d) for d in reversed(block))):
        t = x + y * block[0] + z * block[0] * block[1]
        env = {"threadIdx.x": x, "threadIdx.y": y, "threadIdx.z": z, "blockIdx.x": block_x}
        for values in itertools.product(*loops):
            env.update(zip((v for v, _ in access.loops), values, strict=True))
            e = access.constant + sum(c * env[v] for v, c in access.coeffs)
            if not access.guarded or 0 <= e < n:
                out.setdefault(t, []).append(e)
    return out


def test_steps_are_sorted_and_carry_barriers() -> None:
    request = _request()
    plan = planner.plan(request)
    program = build_program(request, plan)
    points = [s.point for s in program.steps]
    assert points == sorted(set(points))
    barriers = runtime_barriers(request, plan)
    assert [s.point for s in program.steps if s.barrier] == barriers
    assert set(barriers) >= {2}
    assert program.block == (4, 2, 1)
    assert program.grid == (1, 1, 1)
    assert program.arena_bytes == plan.arena_bytes
    offsets = {p.id: p.offset for p in plan.placements}
    assert [(b.id, b.offset) for b in program.buffers] == [(i, offsets[i]) for i in "abc"]


def test_request_accesses_are_copied() -> None:
    request = _request()
    program = build_program(request, planner.plan(request))
    at = {s.point: s.accesses for s in program.steps}
    (write,) = at[0]
    assert (write.buffer, write.op, write.width, write.constant) == (0, "write", 4, 2)
    assert write.coeffs == (("threadIdx.x", 1),)
    assert not write.broadcast
    (read,) = at[1]
    assert read.broadcast
    assert read.op == "read"
    assert not program.buffers[0].synthetic


def test_synthetic_write_covers_every_element_once_and_read_rotates() -> None:
    request = _request()
    program = build_program(request, planner.plan(request))
    b = program.buffers[1]
    assert b.synthetic
    width, n = 4, 10
    by_point = {s.point: [a for a in s.accesses if a.buffer == 1] for s in program.steps}
    (write,) = by_point[b.start]
    (read,) = by_point[b.end - 1]
    assert (write.width, read.width) == (width, width)
    written = _elements(write, program.block, n)
    assert sorted(itertools.chain(*written.values())) == list(range(n))
    threads = program.threads
    got = _elements(read, program.block, n)
    for t, elements in got.items():
        for e in elements:
            assert e % threads == (t + 1) % threads  # what thread t + 1 wrote
    assert sorted(itertools.chain(*got.values())) == list(range(1, n))


def test_synthetic_on_one_point_reads_own_write_after_it() -> None:
    request = _request()
    program = build_program(request, planner.plan(request))
    c = program.buffers[2]
    assert (c.start, c.end, c.size) == (5, 6, 7)
    (step,) = [s for s in program.steps if s.point == 5]
    mine = [a for a in step.accesses if a.buffer == 2]
    assert [a.op for a in mine] == ["write", "read"]
    assert all(a.width == 1 for a in mine)
    assert _elements(mine[0], program.block, 7) == _elements(mine[1], program.block, 7)


def test_sync_none_runs_required_barriers() -> None:
    request = _request(barriers=[], options={"sync": "none"})
    plan = planner.plan(request)
    program = build_program(request, plan)
    assert [s.point for s in program.steps if s.barrier] == plan.barriers.required


@pytest.mark.parametrize("sync", ["existing", "insert"])
def test_required_barriers_are_not_added_unless_sync_none(sync: str) -> None:
    request = _request(barriers=[], options={"sync": sync})
    plan = planner.plan(request)
    faked = plan.model_copy(update={"barriers": plan.barriers.model_copy(update={"required": [4]})})
    program = build_program(request, faked)
    assert [s.point for s in program.steps if s.barrier] == sorted(plan.barriers.inserted)


def test_global_and_unknown_placements_are_left_out() -> None:
    request = _request()
    plan = planner.plan(request)
    moved = [
        p.model_copy(update={"memory": "global"}) if p.id == "b" else p for p in plan.placements
    ]
    extra = moved[0].model_copy(update={"id": "ghost"})
    program = build_program(request, Plan.model_validate({**plan.model_dump(), "placements": []}))
    assert program.buffers == ()
    program = build_program(request, plan.model_copy(update={"placements": [*moved, extra]}))
    assert [b.id for b in program.buffers] == ["a", "c"]
    assert all(a.buffer in (0, 1) for s in program.steps for a in s.accesses)


def test_no_block_means_more_than_one_thread() -> None:
    request = PlanRequest.model_validate(
        {"buffers": [{"id": "x", "size": 8, "start": 0, "end": 2}]}
    )
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    program = build_program(request, plan)
    assert program.block == (2, 1, 1)  # never one thread unless the request says so
    assert program.threads == 2
    write = program.steps[0].accesses[0]
    assert dict(write.loops) == {"i": 1}  # two 4-byte elements, one per thread
    one = request.model_copy(update={"block": [1, 1, 1]})
    assert build_program(one, plan).threads == 1


def test_footprint_rebases_accesses_onto_the_slice() -> None:
    request = PlanRequest.model_validate(SHARDED)
    plan = planner.plan(request)
    (footprint,) = plan.footprints
    assert footprint.planned == 8192
    program = build_program(request, plan)
    (w,) = program.buffers
    assert w.size == 8192
    accesses = [a for s in program.steps for a in s.accesses]
    assert [dict(a.coeffs)["blockIdx.x"] for a in accesses] == [0, 0]
    for a, bx in itertools.product(accesses, (0, 15)):
        touched = _elements(a, program.block, 1 << 20, block_x=bx)
        flat = sorted(itertools.chain(*touched.values()))
        assert flat[0] == 0
        assert flat[-1] == 8192 // 4 - 1


def test_footprint_base_off_the_element_grid_is_refused() -> None:
    request = PlanRequest.model_validate(SHARDED)
    plan = planner.plan(request)
    (footprint,) = plan.footprints
    odd = footprint.model_copy(update={"index_base": {"blockIdx.x": 8192, "constant": 2}})
    with pytest.raises(ValueError, match="index_base"):
        build_program(request, plan.model_copy(update={"footprints": [odd]}))
