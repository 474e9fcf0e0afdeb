"""The CPU emulator: races and clobbers found exactly, valid plans accepted."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner
from planner.batch import request_files
from planner.cli import main
from planner.core.io import parse_request
from planner.core.models import Options, Placement, Plan, PlanRequest
from planner.validators import validate_plan
from planner.validators.emulator import EmulationReport, emulate, run_program
from planner.validators.faults import FaultKind, live_together, plant_fault
from planner.validators.program import AffineAccess, build_program
from tests.support.paths import ROOT
from tests.support.samples import SHARDED

EXAMPLES = request_files(ROOT / "examples")
TX = "threadIdx.x"


def _request(buffers: list[dict[str, Any]], **extra: Any) -> PlanRequest:
    data: dict[str, Any] = {"block": [32], "alignment": 16, "buffers": buffers}
    data.setdefault("options", {"sync": "existing"})
    data.update(extra)
    return PlanRequest.model_validate(data)


def _placed(request: PlanRequest, offsets: dict[str, int]) -> Plan:
    """A hand-made plan: the planner's, with the given offsets forced."""
    plan = planner.plan(request)
    placements = [
        Placement(id=p.id, offset=offsets.get(p.id, p.offset), size=p.size) for p in plan.placements
    ]
    arena = max(p.offset + p.size for p in placements)
    return plan.model_copy(update={"placements": placements, "arena_bytes": arena})


def _codes(report: EmulationReport) -> list[tuple[str, list[str]]]:
    return [(v.code, v.buffers) for v in report.violations]


SEQUENTIAL = [
    {"id": "a", "size": 128, "start": 0, "end": 3},
    {"id": "b", "size": 128, "start": 3, "end": 6},
]


def test_reuse_after_barrier_is_clean() -> None:
    request = _request(SEQUENTIAL, barriers=[3])
    plan = _placed(request, {"a": 0, "b": 0})
    assert validate_plan(request, plan).valid
    report = emulate(request, plan)
    assert report.valid
    assert report.violations == []
    assert report.threads == 32
    assert report.blocks == [(0, 0, 0)]
    assert report.exhaustive
    assert report.byte_accesses > 0


def test_reuse_without_barrier_races() -> None:
    request = _request(SEQUENTIAL, barriers=[])
    plan = _placed(request, {"a": 0, "b": 0})
    report = emulate(request, plan)
    assert not report.valid
    assert _codes(report) == [("race", ["a", "b"])]
    (race,) = report.violations
    assert race.point == 3  # b's first write
    assert "no barrier" in race.message
    assert "124 bytes in all" in race.message  # a never reads its element 0 (4 bytes)


def test_disjoint_buffers_without_barrier_are_clean() -> None:
    request = _request(SEQUENTIAL, barriers=[])
    plan = _placed(request, {"a": 0, "b": 128})
    assert emulate(request, plan).valid


def test_live_overlap_is_clobbered() -> None:
    request = _request(
        [
            {"id": "a", "size": 128, "start": 0, "end": 6},
            {"id": "b", "size": 64, "start": 2, "end": 4},
        ],
        barriers=[2, 4],
    )
    plan = _placed(request, {"a": 0, "b": 32})
    report = emulate(request, plan)
    clobbers = [v for v in report.violations if v.code == "clobbered"]
    assert [v.buffers for v in clobbers] == [["a", "b"]]
    assert clobbers[0].point == 5
    assert "byte 32 (arena byte 32)" in clobbers[0].message
    assert "64 bytes in all" in clobbers[0].message


def test_same_thread_reuse_without_barrier_is_no_race() -> None:
    """nvFuser's inner alias: same layout, same thread; program order is enough."""
    own = {"op": "write", "bytes": 4, "index": {TX: 1}}
    request = _request(
        [
            {
                "id": "a",
                "size": 128,
                "start": 0,
                "end": 3,
                "accesses": [{**own, "at": 0}, {**own, "op": "read", "at": 2}],
            },
            {
                "id": "b",
                "size": 128,
                "start": 3,
                "end": 6,
                "accesses": [{**own, "at": 3}, {**own, "op": "read", "at": 5}],
            },
        ],
        barriers=[],
    )
    plan = _placed(request, {"a": 0, "b": 0})
    assert emulate(request, plan).valid
    # One thread over: thread t writes what thread t + 1 of a read.
    shifted = request.model_copy(
        update={
            "buffers": [
                request.buffers[0],
                request.buffers[1].model_copy(
                    update={
                        "accesses": [
                            a.model_copy(update={"index": {TX: 1}, "offset": 1})
                            for a in request.buffers[1].accesses
                        ],
                        "size": 132,
                    }
                ),
            ]
        }
    )
    report = emulate(shifted, _placed(shifted, {"a": 0, "b": 0}))
    assert _codes(report) == [("race", ["a", "b"])]


def test_read_read_sharing_is_no_race() -> None:
    request = _request(
        [
            {
                "id": "a",
                "size": 64,
                "start": 0,
                "end": 2,
                "accesses": [{"op": "read", "at": 1, "bytes": 4, "threads": "all"}],
            },
            {
                "id": "b",
                "size": 64,
                "start": 2,
                "end": 4,
                "accesses": [{"op": "read", "at": 2, "bytes": 4, "threads": "all"}],
            },
        ],
        barriers=[],
    )
    assert emulate(request, _placed(request, {"a": 0, "b": 0})).valid


def test_broadcast_write_races_with_single_thread_of_other_buffer() -> None:
    request = _request(
        [
            {
                "id": "a",
                "size": 64,
                "start": 0,
                "end": 2,
                "accesses": [
                    {"op": "read", "at": 1, "bytes": 4, "index": {"k": 1}, "loops": {"k": 1}}
                ],
            },
            {
                "id": "b",
                "size": 64,
                "start": 2,
                "end": 4,
                "accesses": [{"op": "write", "at": 2, "bytes": 4, "threads": "all"}],
            },
        ],
        barriers=[],
    )
    report = emulate(request, _placed(request, {"a": 0, "b": 0}))
    assert _codes(report) == [("race", ["a", "b"])]
    assert "1 bytes in all" not in report.violations[0].message
    assert "4 bytes in all" in report.violations[0].message  # a touches element 0 only


def test_one_thread_never_races() -> None:
    request = _request(SEQUENTIAL, barriers=[], block=[1])
    assert emulate(request, _placed(request, {"a": 0, "b": 0})).valid


def test_blocks_are_emulated_apart_and_bounded() -> None:
    by_block = {"op": "write", "bytes": 4, "index": {TX: 1, "blockIdx.x": 32}}
    request = _request(
        [
            {"id": "a", "size": 4096, "start": 0, "end": 2, "accesses": [{**by_block, "at": 0}]},
        ],
        grid=[32, 4],
    )
    plan = planner.plan(request)
    report = emulate(request, plan, max_blocks=5)
    assert report.valid
    assert report.blocks_total == 32  # blockIdx.y is unused
    assert not report.exhaustive
    assert report.blocks == [(0, 0, 0), (8, 0, 0), (16, 0, 0), (23, 0, 0), (31, 0, 0)]
    assert "5 of 32" in report.notes[0]
    assert emulate(request, plan, max_blocks=1).blocks == [(0, 0, 0)]
    full = emulate(request, plan, max_blocks=32)
    assert full.exhaustive
    assert len(full.blocks) == 32
    assert full.notes == []


def test_race_in_one_block_names_it() -> None:
    """Only block 1 reaches the bytes where a and b meet."""
    request = _request(
        [
            {
                "id": "a",
                "size": 256,
                "start": 0,
                "end": 2,
                "accesses": [
                    {"op": "write", "at": 0, "bytes": 4, "index": {TX: 1, "blockIdx.x": 32}},
                    {"op": "read", "at": 1, "bytes": 4, "index": {TX: 1, "blockIdx.x": 32}},
                ],
            },
            {
                "id": "b",
                "size": 128,
                "start": 2,
                "end": 4,
                "accesses": [{"op": "write", "at": 2, "bytes": 4, "index": {TX: -1}, "offset": 31}],
            },
        ],
        grid=[2],
        barriers=[],
    )
    report = emulate(request, _placed(request, {"a": 0, "b": 128}))
    assert _codes(report) == [("race", ["a", "b"])]
    assert "in block (1, 0, 0)" in report.violations[0].message


def test_violations_are_capped() -> None:
    buffers = [{"id": f"x{i}", "size": 64, "start": 2 * i, "end": 2 * i + 2} for i in range(6)]
    request = _request(buffers, barriers=[])
    plan = _placed(request, {f"x{i}": 0 for i in range(6)})
    report = emulate(request, plan, max_violations=2)
    assert report.truncated
    assert not report.valid
    assert len(report.violations) == 2
    with pytest.raises(ValueError, match="max_blocks"):
        emulate(request, plan, max_blocks=0)


def test_same_request_same_report() -> None:
    request = _request(SEQUENTIAL, barriers=[])
    plan = _placed(request, {"a": 0, "b": 16})
    assert emulate(request, plan) == emulate(request, plan)
    assert run_program(build_program(request, plan)) == emulate(request, plan)


def test_footprints_too_small_or_off_grid_are_caught() -> None:
    request = PlanRequest.model_validate(SHARDED)
    plan = planner.plan(request)
    assert emulate(request, plan).valid
    (footprint,) = plan.footprints
    small = plan.model_copy(
        update={
            "footprints": [footprint.model_copy(update={"planned": 4096})],
            "placements": [plan.placements[0].model_copy(update={"size": 4096})],
        }
    )
    report = emulate(request, small)
    assert [v.code for v in report.violations] == ["bad_footprint", "bad_footprint"]
    assert "outside the 4096 bytes placed for it" in report.violations[0].message
    odd = footprint.model_copy(update={"index_base": {"blockIdx.x": 8192, "constant": 2}})
    report = emulate(request, plan.model_copy(update={"footprints": [odd]}))
    assert [v.code for v in report.violations] == ["bad_footprint"]
    assert report.blocks == []


def _brute_force(request: PlanRequest, plan: Plan) -> set[tuple[str, tuple[str, ...], int | None]]:
    """Races (per buffer pair) and clobbers (per reader, writer, point) by walking every
    thread of the one block in pure Python."""
    program = build_program(request, plan)
    bx, by, _ = program.block
    found: set[tuple[str, tuple[str, ...], int | None]] = set()
    stamp: dict[int, tuple[int, int]] = {}  # arena byte -> (buffer, byte in it)
    written: set[tuple[int, int]] = set()
    epoch: dict[int, set[tuple[int, int, bool]]] = {}  # byte -> (thread, buffer, write)

    def bytes_of(a: AffineAccess) -> list[tuple[int, int]]:
        size = program.buffers[a.buffer].size
        n = size // a.width
        out: list[tuple[int, int]] = []  # (thread, byte in the buffer)
        for t in range(program.threads):
            if a.broadcast:
                elements = list(range(n))
            else:
                env = {
                    "threadIdx.x": t % bx,
                    "threadIdx.y": t // bx % by,
                    "threadIdx.z": t // (bx * by),
                }
                elements = []
                names = [v for v, _ in a.loops]
                for values in itertools.product(*(range(e) for _, e in a.loops)):
                    env.update(zip(names, values, strict=True))
                    elements.append(a.constant + sum(c * env.get(v, 0) for v, c in a.coeffs))
            for e in elements:
                if 0 <= e < n:
                    out.extend((t, e * a.width + k) for k in range(a.width))
        return out

    def close_epoch() -> None:
        for touches in epoch.values():
            for t1, b1, w1 in touches:
                for t2, b2, w2 in touches:
                    if t1 != t2 and b1 < b2 and (w1 or w2):
                        ids = (program.buffers[b1].id, program.buffers[b2].id)
                        found.add(("race", ids, None))
        epoch.clear()

    for step in program.steps:
        if step.barrier:
            close_epoch()
        touched = [(a, bytes_of(a)) for a in step.accesses]
        for a, pairs in touched:
            base = program.buffers[a.buffer].offset
            for t, rel in pairs:
                epoch.setdefault(base + rel, set()).add((t, a.buffer, a.op == "write"))
        for a, pairs in touched:
            if a.op == "write":
                base = program.buffers[a.buffer].offset
                for _, rel in pairs:
                    stamp[base + rel] = (a.buffer, rel)
                    written.add((a.buffer, rel))
        for a, pairs in touched:
            if a.op == "read":
                base = program.buffers[a.buffer].offset
                for _, rel in pairs:
                    got = stamp.get(base + rel)
                    if (a.buffer, rel) in written and got != (a.buffer, rel):
                        assert got is not None
                        ids = (program.buffers[a.buffer].id, program.buffers[got[0]].id)
                        found.add(("clobbered", ids, step.point))
    close_epoch()
    return found


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_matches_brute_force_on_random_placements(data: st.DataObject) -> None:
    """Random offsets, most of them wrong: every race pair and clobber, exactly."""
    request = data.draw(_kernels(thread_counts=(2, 4, 8), grid=1))
    plan = planner.plan(request.model_copy(update={"options": Options(time_limit=0.5)}))
    offsets = {
        b.id: 16 * data.draw(st.integers(0, max(1, plan.arena_bytes // 16)))
        for b in request.buffers
    }
    plan = _placed_on(plan, offsets)
    report = emulate(request, plan)
    got = {
        (v.code, tuple(v.buffers), v.point if v.code == "clobbered" else None)
        for v in report.violations
    }
    assert got == _brute_force(request, plan)


@pytest.mark.parametrize("spread", [1, 1 << 20])  # dense elements, then sparse ones
def test_extremes_keep_smallest_and_largest_thread(spread: int) -> None:
    from planner.validators.emulator import _extremes

    rng = np.random.default_rng(spread)
    elements = rng.integers(0, 50, size=400).astype(np.int64) * spread
    threads = rng.integers(0, 32, size=400).astype(np.int32)
    got_e, got_t = _extremes(elements, threads)
    want: dict[int, set[int]] = {}
    for e, t in zip(elements.tolist(), threads.tolist(), strict=True):
        want.setdefault(e, set()).add(t)
    have: dict[int, set[int]] = {}
    for e, t in zip(got_e.tolist(), got_t.tolist(), strict=True):
        have.setdefault(e, set()).add(t)
    assert have == {e: {min(ts), max(ts)} for e, ts in want.items()}
    injective = np.arange(10, dtype=np.int64) * spread
    same_e, _ = _extremes(injective, np.arange(10, dtype=np.int32))
    assert same_e is injective


def _placed_on(plan: Plan, offsets: dict[str, int]) -> Plan:
    placements = [p.model_copy(update={"offset": offsets[p.id]}) for p in plan.placements]
    arena = max(p.offset + p.size for p in placements)
    return plan.model_copy(
        update={"placements": placements, "arena_bytes": arena, "footprints": []}
    )


# --- plans the planner returns are accepted ----------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_accepted(path: Path) -> None:
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    report = emulate(request, plan)
    assert report.valid, report.violations


@st.composite
def _kernels(
    draw: st.DrawFn,
    thread_counts: tuple[int, ...] = (4, 8, 32, 64),
    grid: int | None = None,
) -> PlanRequest:
    """Random kernels over 4 to 64 threads and 1 or 3 blocks: synthetic buffers and patterns
    that keep a float on one thread, read it from every thread, read it back reversed, or
    step with blockIdx (planned per block with ``shrink``)."""
    threads = draw(st.sampled_from(thread_counts))
    grid = grid or draw(st.sampled_from([1, 3]))
    n = draw(st.integers(2, 9))
    horizon = 12
    buffers: list[dict[str, Any]] = []
    for i in range(n):
        start = draw(st.integers(0, horizon - 2))
        end = draw(st.integers(start + 1, horizon))
        rows = draw(st.integers(1, 3))
        size = 4 * threads * rows  # bytes
        buf: dict[str, Any] = {"id": f"b{i}", "size": size, "start": start, "end": end}
        own = {"bytes": 4, "index": {TX: 1, "r": threads}, "loops": {"r": rows}}
        write = {**own, "op": "write", "at": start}
        kind = draw(st.sampled_from(["synthetic", "own", "all", "row", "reversed", "block"]))
        if kind == "own":
            buf["accesses"] = [write, {**own, "op": "read", "at": end - 1}]
        elif kind == "all":
            buf["accesses"] = [write, {"op": "read", "at": end - 1, "bytes": 4, "threads": "all"}]
        elif kind == "row":  # every thread reads the first row, a float per thread
            row = {"op": "read", "at": end - 1, "bytes": 4, "index": {"k": 1}}
            buf["accesses"] = [write, {**row, "loops": {"k": threads}}]
        elif kind == "reversed":
            rev = {**own, "index": {TX: -1, "r": threads}, "offset": threads - 1}
            buf["accesses"] = [write, {**rev, "op": "read", "at": end - 1}]
        elif kind == "block":
            index = {TX: 1, "r": threads, "blockIdx.x": threads * rows}
            mine = {**own, "index": index}
            buf["size"] = size * grid
            buf["accesses"] = [
                {**mine, "op": "write", "at": start},
                {**mine, "op": "read", "at": end - 1},
            ]
        buffers.append(buf)
    top = max(b["end"] for b in buffers)
    return PlanRequest.model_validate(
        {
            "block": [threads],
            "grid": [grid],
            "alignment": 16,
            "barriers": draw(st.lists(st.integers(0, top), max_size=3)),
            "buffers": buffers,
            "options": {
                "sync": draw(st.sampled_from(["existing", "insert", "none"])),
                "shrink": draw(st.booleans()),
                "time_limit": 0.5,
            },
        }
    )


@settings(max_examples=25, deadline=None)
@given(_kernels())
def test_planned_kernels_are_accepted(request: PlanRequest) -> None:
    plan = planner.plan(request)
    assert validate_plan(request, plan).valid
    report = emulate(request, plan)
    assert report.valid, report.violations


# --- planted faults ------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(_kernels(), st.integers(0, 2**32 - 1))
def test_planted_overlaps_barriers_and_aliases_are_caught(request: PlanRequest, seed: int) -> None:
    plan = planner.plan(request)
    for kind in ("overlap", "drop_barrier", "break_alias"):
        fault = plant_fault(request, plan, kind, np.random.default_rng(seed))
        if fault is None:
            continue
        assert not validate_plan(fault.request, fault.plan).valid, fault.description
        report = emulate(fault.request, fault.plan)
        assert not report.valid, fault.description
        assert set(fault.buffers) & {b for v in report.violations for b in v.buffers}


def _nothing_to_break(request: PlanRequest, plan: Plan, kind: str) -> bool:
    """No two buffers live together on some path with one free to move (overlap), no barrier a
    reuse relies on or a block of one thread (drop_barrier), no free buffer aligned above 1
    (misalign), no alias."""
    free = [b for b in request.buffers if b.offset is None]
    if request.partitions and kind in ("drop_barrier", "break_alias"):
        # Faults built on the block-wide program order have no place in a partitioned
        # request (validators/faults.py); its own kind is drop_partition_sync.
        return True
    if kind == "overlap":
        return not any(
            a.id != b.id and live_together(request, a, b) for a in request.buffers for b in free
        )
    if kind == "drop_barrier":  # one thread: program order alone orders every access
        if not plan.barriers.required or math.prod(request.block or [1]) < 2:
            return True
        # The kind plants in one straight stretch of the program; reuses that cross a loop
        # boundary (an epilogue after a K loop) are drop_back_edge's and early_barrier's.
        from planner.validators.faults import _reuses, _shared

        return not _reuses(request, _shared(plan))
    if kind == "misalign":
        return all(request.alignment_of(b) == 1 for b in free)
    return not plan.aliases


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("kind", ["overlap", "drop_barrier", "misalign", "break_alias"])
def test_planted_faults_on_examples(path: Path, kind: FaultKind) -> None:
    request = parse_request(path.read_text())
    plan = planner.plan(request)
    fault = plant_fault(request, plan, kind, np.random.default_rng(7))
    if fault is None:
        # Only a plan with nothing of that kind to break gets no fault.
        assert _nothing_to_break(request, plan, kind), f"no {kind} fault planted"
        return
    static = validate_plan(fault.request, fault.plan)
    assert not static.valid
    emulated = emulate(fault.request, fault.plan)
    assert not emulated.valid, fault.description
    if kind == "misalign":
        assert "misaligned" in {v.code for v in static.violations}
        assert [v.buffers for v in emulated.violations if v.code == "misaligned"] == [
            list(fault.buffers)
        ]


# --- CLI -----------------------------------------------------------------------------------


def _files(tmp_path: Path, request: PlanRequest, plan: Plan) -> tuple[str, str]:
    rq, pl = tmp_path / "request.json", tmp_path / "plan.json"
    rq.write_text(request.model_dump_json())
    pl.write_text(plan.model_dump_json())
    return str(rq), str(pl)


def test_cli_validate_emulate_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = _request(SEQUENTIAL, barriers=[3])
    rq, pl = _files(tmp_path, request, planner.plan(request))
    assert main(["validate", rq, pl, "--emulate"]) == 0
    out = capsys.readouterr().out
    assert "valid:" in out
    assert "emulated 1 block of 32 threads" in out


def test_cli_validate_emulate_reports_race(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = _request(SEQUENTIAL, barriers=[])
    plan = _placed(request, {"a": 0, "b": 0})
    rq, pl = _files(tmp_path, request, plan)
    assert main(["validate", rq, pl, "--emulate"]) == 1
    out = capsys.readouterr().out
    assert "race at point 3:" in out
    assert "invalid: 2 violations" in out  # missing_barrier (static) and race (emulator)
    assert main(["validate", rq, pl]) == 1
    assert "race" not in capsys.readouterr().out


def test_cli_max_blocks_needs_emulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    request = _request(SEQUENTIAL, barriers=[3])
    rq, pl = _files(tmp_path, request, planner.plan(request))
    assert main(["validate", rq, pl, "--max-blocks", "2"]) == 2
    assert "--max-blocks needs --emulate" in capsys.readouterr().err
    assert main(["validate", rq, pl, "--emulate", "--max-blocks", "0"]) == 2


def test_every_fault_kind_is_planted_on_some_example() -> None:
    planted: set[str] = set()
    for path in EXAMPLES:
        request = parse_request(path.read_text())
        plan = planner.plan(request)
        for kind in ("overlap", "drop_barrier", "misalign", "break_alias"):
            if plant_fault(request, plan, kind, np.random.default_rng(7)) is not None:
                planted.add(kind)
    assert planted == {"overlap", "drop_barrier", "misalign", "break_alias"}
