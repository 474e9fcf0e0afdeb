"""Pacing racing members (``solvers._pace_kernel``): the cores go to the members that have
spent the least effort, and the answer stays the one members taking turns give."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from planner.core._jit import compiled, pause
from planner.core.graph import build_graph
from planner.families import family_instance
from planner.solvers import search
from planner.solvers._pace_kernel import EVERY, SLACK, keep_pace, member_cap
from planner.solvers._search_kernel import FOUND
from tests.support.bruteforce import assert_valid_offsets

STOPPED = search.STOPPED


def _cap(member: int, cores: int, slack: int = 10, limit: int = 10**9, shift: int = 0) -> Any:
    return member_cap(limit, member, shift, slack, cores)


def _later(seconds: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_member_goes_on_while_fewer_members_than_cores_are_behind_it() -> None:
    with compiled():
        keep_pace(np.zeros(1, dtype=np.int64), _cap(0, cores=1), 0)  # loaded before the clock
        efforts = np.array([0, 1_000, 1_000], dtype=np.int64)
        began = time.perf_counter()
        assert keep_pace(efforts, _cap(2, cores=2), 1_000)
        assert time.perf_counter() - began < 0.5
        assert efforts[2] == 1_000  # its effort is published
        # Within the slack a member does not count as behind.
        efforts = np.array([995, 995, 0], dtype=np.int64)
        assert keep_pace(efforts, _cap(2, cores=2), 1_000)
        # A member that has stopped holds no one back.
        efforts = np.array([STOPPED, STOPPED, 0], dtype=np.int64)
        assert keep_pace(efforts, _cap(2, cores=1), 1_000)


def test_a_member_waits_until_the_members_behind_it_catch_up() -> None:
    with compiled():
        efforts = np.array([0, 0, 0], dtype=np.int64)
        keep_pace(efforts, _cap(2, cores=2), 0)  # loaded before the clock starts

        def catch_up() -> None:
            efforts[0] = 1_000

        thread = _later(0.2, catch_up)
        began = time.perf_counter()
        assert keep_pace(efforts, _cap(2, cores=2), 1_000)  # two behind: it waits
        waited = time.perf_counter() - began
        thread.join()
        assert waited >= 0.15
        assert efforts[0] == 1_000


def test_a_waiting_member_stops_when_its_limit_falls() -> None:
    with compiled():
        efforts = np.array([0, 0], dtype=np.int64)
        cap = _cap(1, cores=1, shift=1)
        keep_pace(efforts, _cap(1, cores=1), 0)

        def lower() -> None:
            cap[0] = 500

        thread = _later(0.1, lower)
        assert not keep_pace(efforts, cap, 500)  # effort 1000: one behind, then its limit
        thread.join()
        assert efforts[1] == 1_000  # nodes shifted by its share


def test_pause_waits_as_python_too() -> None:
    began = time.perf_counter()
    assert pause(20_000) == 0
    assert time.perf_counter() - began >= 0.015


def _pinwheel() -> tuple[Any, Any, list[Any], int]:
    request = family_instance("pinwheel", 150, 1005).request
    g = build_graph(request, "none")
    capacity = request.effective_capacity
    assert capacity is not None
    members = search._members(g)
    assert g.n > search.PACED_MIN
    return request, g, members, capacity


def test_paced_members_stop_near_the_winners_effort(monkeypatch: pytest.MonkeyPatch) -> None:
    # With one core, a member runs only while no other is more than the slack behind it, so
    # when one decides, none has run past its effort by more than the slack (and the nodes
    # between two looks at the others); unpaced, the members whose nodes cost less run far
    # past it (here up to 2 000 nodes against a winner's 208 and a slack of 125).
    request, g, members, capacity = _pinwheel()
    seen: dict[int, tuple[int, int, int]] = {}  # per member: status, nodes, the race's slack
    decide = search._decide

    def recording(inst: Any, *args: Any, **kwargs: Any) -> Any:
        result = decide(inst, *args, **kwargs)
        cap = args[2] if len(args) > 2 else kwargs.get("cap")
        # Taking turns, a member's cap holds its limit alone (no slack).
        slack = -1 if cap is None or cap.size <= SLACK else int(cap[SLACK])
        seen[id(inst)] = (result[0], result[2], slack)
        return result

    monkeypatch.setattr(search, "_decide", recording)
    monkeypatch.setattr(search, "usable_cores", lambda: 1)
    nodes = 16_000
    turns = search._decide_all(members, capacity, nodes, parallel=False)
    seen.clear()
    raced = search._decide_all(members, capacity, nodes, parallel=True)
    assert raced[0] == turns[0] == FOUND
    assert raced[2] == turns[2]
    assert (raced[1] == turns[1]).all()
    assert_valid_offsets(request, g, raced[1])
    weights = search._weights(members)
    running = [i for i, r in enumerate(search._repeats(members)) if r < 0]
    assert {id(members[i]) for i in running} == set(seen)
    slack = seen[id(members[running[0]])][2]
    assert slack > 0
    winner = min(
        seen[id(members[i])][1] << weights[i] for i in running if seen[id(members[i])][0] == FOUND
    )
    for i in running:
        effort = seen[id(members[i])][1] << weights[i]
        # Between two looks a member expands EVERY nodes, plus what one step's work may add.
        assert effort <= winner + slack + (2 * EVERY << weights[i]), (i, effort, winner, slack)
