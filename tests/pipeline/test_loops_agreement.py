"""Brute-force agreement of the two CPU validators on small random programs with loops,
branches and several live ranges (random offsets and barriers), and of the static validator
with the step-by-step brute force of tests/loops_brute.py.

The static validator works on the semantics (every loop body twice, each arm alone, a range
that enters or leaves a loop live over all of it); the emulator runs the synthetic accesses of
each range (every thread writes at its first point, a rotated read at its last) along every
path. They must agree whenever every range spans two points or more and none enters or leaves
a loop. Outside that class the static validator may be stricter, never laxer: a one-point
range is written and read back by the same thread, and buffers without patterns all map
element ``e`` to thread ``e mod T``, so a reuse whose bytes keep their thread shows no race
the emulator could see; and a range entering a loop holds its bytes over the whole body,
which the emulator's accesses (a write before the loop, reads inside) do not all touch.
"""

from __future__ import annotations

import random

import pytest

from planner.core.io import parse_request
from planner.validators import validate_plan
from planner.validators.emulator import emulate
from tests.support.control_flow import crosses_loop, plan_at, random_program
from tests.support.loops_brute import check, random_request


def _verdicts(seed: int, count: int, least: int) -> list[tuple[bool, bool, bool]]:
    """(static valid, emulator valid, in the exact class) for ``count`` random programs."""
    rng = random.Random(seed)
    out: list[tuple[bool, bool, bool]] = []
    while len(out) < count:
        drawn = random_program(rng, least=least)
        if drawn is None:
            continue
        req, plan = drawn
        exact = not crosses_loop(req) and all(
            e - s >= 2 for b in req.buffers for s, e in b.lifetimes
        )
        out.append((validate_plan(req, plan).valid, emulate(req, plan).valid, exact))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_validators_agree_on_programs_the_emulator_can_see(seed: int) -> None:
    verdicts = [(s, e) for s, e, exact in _verdicts(seed, 120, least=2) if exact]
    assert len(verdicts) >= 20
    assert all(s == e for s, e in verdicts), [v for v in verdicts if v[0] != v[1]]
    # Both answers occur: the programs are neither all broken nor all fine.
    assert {s for s, _ in verdicts} == {True, False}


@pytest.mark.parametrize("seed", range(4))
def test_static_is_never_laxer_than_the_emulator(seed: int) -> None:
    verdicts = _verdicts(100 + seed, 120, least=1)
    assert not [v for v in verdicts if v[0] and not v[1]]  # emulator race, static silent
    assert {e for _, e, _ in verdicts} == {True, False}


@pytest.mark.parametrize("seed", range(3))
def test_static_agrees_with_the_step_by_step_brute_force(seed: int) -> None:
    """The static validator against the brute force that writes out every execution step by
    step (tests/loops_brute.py), on random programs, offsets and barriers. The brute force
    also stretches a range over a loop of one trip it enters, which never repeats: there it
    may be stricter, never laxer."""
    rng = random.Random(seed)
    verdicts: list[tuple[bool, bool]] = []
    for _ in range(150):
        data = random_request(rng)
        horizon = max(b["ranges"][-1][1] if "ranges" in b else b["end"] for b in data["buffers"])
        data["barriers"] = sorted(rng.sample(range(horizon + 1), rng.randint(0, 4)))
        data["options"] = {"sync": "existing"}
        req = parse_request(data)
        plan = plan_at(req, {b.id: rng.choice([0, 16, 32, 64]) for b in req.buffers})
        # The brute force leaves out two ranges of one buffer live at once (over a loop they
        # both enter): the planner refuses such a request.
        static = not any(
            v.code in ("overlap", "missing_barrier")
            and not (v.code == "overlap" and v.buffers[0] == v.buffers[1])
            for v in validate_plan(req, plan).violations
        )
        brute = not check(req, plan)[0]
        if crosses_loop(req, trips=1):
            assert brute <= static
        else:
            verdicts.append((static, brute))
    assert all(s == b for s, b in verdicts)
    assert {s for s, _ in verdicts} == {True, False}
