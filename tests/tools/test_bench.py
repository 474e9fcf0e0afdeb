"""``planner bench``: bound and timing columns, and OmniMalloc's columns (faked here)."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

import planner
from planner import bench as bench_mod
from planner.bench import load_instance, random_instance, run_instance
from planner.bench_omnimalloc import THREADS
from planner.cli import main
from planner.core.graph import build_graph
from planner.core.models import PlanRequest
from planner.solvers import Solution, auto, registry
from tests.support.samples import CLASSIC

Capture = pytest.CaptureFixture[str]

# Two buffers live together, a third after them: the lower bound is 12 bytes.
CSV = "id,lower,upper,size\na,0,4,4\nb,0,2,8\nc,4,6,12\n"


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "three.csv"
    path.write_text(CSV)
    return path


def test_times_to_first_plan_and_proof(csv_path: Path) -> None:
    row = run_instance(load_instance(str(csv_path), capacity=64, repeat=2))
    assert row.proved
    assert row.status == "optimal"
    assert row.valid
    assert row.bound == row.arena_bytes == 12
    assert row.first_ms is not None
    assert row.proof_ms is not None
    assert 0.0 <= row.first_ms <= row.proof_ms <= row.time_ms


def test_no_times_without_a_plan_within_capacity(csv_path: Path) -> None:
    row = run_instance(load_instance(str(csv_path), capacity=8, repeat=1))
    assert row.status == "infeasible"
    assert row.first_ms is None
    # The optimum itself, 12 bytes, is proved: it is the lower bound.
    assert row.proved
    assert row.proof_ms is not None


def test_listener_sees_improvements_down_to_the_result() -> None:
    # Greedy by size alone misses the optimum (13 bytes for 12); the exact methods find it.
    g = build_graph(PlanRequest.model_validate({"buffers": CLASSIC, "options": {"sync": "none"}}))
    seen: list[tuple[int, int]] = []

    def solve() -> Solution:
        return auto.solve(
            g,
            solver=registry.lookup("auto"),
            heuristics=["size/first-fit"],
            capacity=None,
            time_limit=2.0,
        )

    with auto.listening(lambda arena, bound: seen.append((arena, bound))):
        result = solve()
    assert result.arena_bytes == 12
    assert result.proved_optimal
    assert seen[0][0] == 13  # the greedy plan first
    assert seen[-1] == (12, 12)
    arenas = [a for a, _ in seen]
    assert arenas == sorted(arenas, reverse=True)  # the plan only improves
    assert all(b <= 12 for _, b in seen)  # every bound is a true bound
    seen.clear()
    solve()
    assert not seen  # outside the block nobody listens


class _Allocation:
    def __init__(self, id: int, size: int, start: int, end: int, offset: int | None = None):
        self.id, self.size, self.start, self.end, self.offset = id, size, start, end, offset


class _Stacked:
    """Every buffer above the previous one: wasteful but valid."""

    def __init__(self, timeout: float = 3.0, num_threads: int | None = None) -> None:
        self.timeout = timeout
        self.num_threads = num_threads

    def place(self, allocations: list[_Allocation]) -> list[_Allocation]:
        top = 0
        out = []
        for a in allocations:
            out.append(_Allocation(a.id, a.size, a.start, a.end, top))
            top += a.size
        return out


class _Overlapping:
    """Every buffer at offset 0: invalid as soon as two are live together."""

    def place(self, allocations: list[_Allocation]) -> list[_Allocation]:
        return [_Allocation(a.id, a.size, a.start, a.end, 0) for a in allocations]


def _fake_omnimalloc(made: list[Any]) -> ModuleType:
    classes: dict[str, type] = {"stacked": _Stacked, "overlapping": _Overlapping}

    def resolve(name: str) -> Any:
        made.append(classes[name]())
        return made[-1]

    def allocate(allocations: list[_Allocation], allocator: Any) -> tuple[_Allocation, ...]:
        made.append(allocator)
        return tuple(allocator.place(list(allocations)))

    module = ModuleType("omnimalloc")
    vars(module).update(
        Allocation=_Allocation,
        allocate=allocate,
        available_allocators=lambda: tuple(classes),
        allocators=SimpleNamespace(BaseAllocator=SimpleNamespace(resolve=resolve)),
    )
    return module


@pytest.fixture
def fake_omnimalloc(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """OmniMalloc replaced by ``_fake_omnimalloc``; the list of allocators it made."""
    made: list[Any] = []
    monkeypatch.setitem(sys.modules, "omnimalloc", _fake_omnimalloc(made))
    return made


def test_omnimalloc_columns_side_by_side(
    csv_path: Path, capsys: Capture, fake_omnimalloc: list[Any]
) -> None:
    made = fake_omnimalloc
    argv = ["bench", str(csv_path), "--repeat", "1", "--time-limit", "2"]
    code = main([*argv, "--omnimalloc", "stacked", "--omnimalloc", "overlapping"])
    assert code == 1  # the overlapping plan is caught
    lines = capsys.readouterr().out.strip().splitlines()
    assert "default arena" in lines[0]
    assert "omnimalloc:stacked arena" in lines[0]
    assert "omnimalloc:overlapping arena" in lines[0]
    cells = lines[1].split()
    assert cells[:3] == ["three.csv", "3", "12"]
    group = 8  # arena, gap, ms, proved, bound, first ms, proof ms, at optimum
    ours, stacked, overlapping = (cells[3 + k * group :] for k in range(3))
    assert ours[0] == "12"
    assert ours[3] == "yes"
    assert stacked[0] == "24"  # 4 + 8 + 12, valid, not optimal
    assert stacked[3] == "no"
    assert stacked[5] != "-"  # a plan, no proof
    assert stacked[6] == "-"
    assert stacked[7] == "-"  # no optimum known for a file
    assert overlapping[:2] == ["12", "INVALID"]
    assert "omnimalloc:stacked: 1/1 planned" in lines[3]
    assert "omnimalloc:overlapping: 0/1 planned, 1 INVALID" in lines[4]
    timed = [a for a in made if isinstance(a, _Stacked) and a.num_threads is not None]
    assert timed
    assert all(a.timeout == 2.0 and a.num_threads == THREADS for a in timed)


def test_omnimalloc_missing(
    csv_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "omnimalloc", None)  # import fails
    assert main(["bench", str(csv_path), "--omnimalloc", "supermalloc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("planner: error: bench: --omnimalloc needs the omnimalloc package")
    assert "Traceback" not in err


@pytest.mark.usefixtures("fake_omnimalloc")
def test_omnimalloc_unknown_allocator(csv_path: Path, capsys: Capture) -> None:
    assert main(["bench", str(csv_path), "--omnimalloc", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown allocator 'nope'" in err
    assert "stacked" in err


@pytest.mark.usefixtures("fake_omnimalloc")
def test_family_side_by_side_with_omnimalloc(capsys: Capture) -> None:
    """The same generated tilings in both column groups; "at optimum" against the optimum
    known by construction."""
    argv = ["bench", "--family", "guillotine", "--count", "2", "--buffers", "12", "--seed", "3"]
    code = main([*argv, "--time-limit", "2", "--omnimalloc", "stacked"])
    assert code == 1  # stacking every tile overflows the capacity
    lines = capsys.readouterr().out.strip().splitlines()
    assert "at optimum" in lines[0]
    rows = [line.split() for line in lines[1:3]]
    assert [r[0] for r in rows] == ["guillotine-12-s3", "guillotine-12-s4"]
    group = 8
    for cells in rows:
        ours, stacked = cells[3 : 3 + group], cells[3 + group :]
        assert cells[2] == "1048576"
        assert ours[0] == "1048576"
        assert ours[7] == "yes"
        assert int(stacked[0]) > 1048576
        assert stacked[7] == "no"
    assert "default: 2/2 planned, 2/2 at optimum" in lines[3]
    assert "omnimalloc:stacked: 0/2 planned, 0/2 at optimum" in lines[4]


def test_family_table_and_bad_buffer_range(capsys: Capture) -> None:
    argv = ["bench", "--family", "sparse", "--count", "1", "--buffers", "20", "--time-limit", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[1].split()[0] == "sparse-20-s0"
    assert "1/1 at optimum" in out[-1]
    assert main(["bench", "--family", "sparse", "--buffers", "300-100"]) == 2
    err = capsys.readouterr().err
    assert "--buffers" in err
    assert "'300-100'" in err
    assert "Traceback" not in err


def test_omnimalloc_thread_counts_side_by_side(
    csv_path: Path, capsys: Capture, fake_omnimalloc: list[Any]
) -> None:
    made = fake_omnimalloc
    argv = ["bench", str(csv_path), "--repeat", "1", "--time-limit", "2"]
    assert main([*argv, "--omnimalloc", "stacked:2", "--omnimalloc", "stacked:6"]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "omnimalloc:stacked:2 arena" in header
    assert "omnimalloc:stacked:6 arena" in header
    timed = [a.num_threads for a in made if isinstance(a, _Stacked) and a.num_threads]
    assert timed == [2, 6]


@pytest.mark.usefixtures("fake_omnimalloc")
@pytest.mark.parametrize("given", ["stacked:0", "stacked:x", "stacked:-1", "stacked:999"])
def test_omnimalloc_bad_thread_count(given: str, csv_path: Path, capsys: Capture) -> None:
    assert main(["bench", str(csv_path), "--omnimalloc", given]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"--omnimalloc {given}: threads must be 1 to 256" in err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rows_are_printed_as_each_instance_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    instances = [random_instance(n, overlap=0.1, seed=1) for n in (8, 12, 16)]
    out, status = io.StringIO(), _Terminal()
    seen: list[int] = []

    def planned(instance: bench_mod.Instance) -> bench_mod.BenchRow:
        # The heading and every earlier row are out before the next instance starts.
        seen.append(len(out.getvalue().splitlines()))
        assert f"planning {instance.name}" in status.getvalue()
        row = run_instance(instance)
        assert planner.validate(instance.request, planner.plan(instance.request)).valid
        return row

    monkeypatch.setattr(bench_mod, "run_instance", planned)
    rows = list(bench_mod.stream_table(instances, out, status))
    assert seen == [1, 2, 3]
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["instance", "buffers"]
    assert [line.split()[0] for line in lines[1:]] == [i.name for i in instances]
    assert all(r.valid for r in rows)


def test_no_status_line_when_piped(capsys: Capture) -> None:
    assert main(["bench", "--random", "8"]) == 0
    out, err = capsys.readouterr()
    assert "planning" not in err
    assert out.splitlines()[1].startswith("random-8 ")
