"""The load script's bookkeeping: percentiles, the planning time from Server-Timing, the mixed
scenario's sizes and its split of the answers."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from types import ModuleType

import pytest

from planner.core.budget import FIXED_SECONDS_PER_BUFFER
from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "load.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("load_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["load_script"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


def test_planning_time_comes_from_server_timing_of_planned_answers() -> None:
    load = _load()
    result = load.Result("rate")
    for ms, planned in [(4.0, "plan;dur=2.5"), (6.0, "plan;dur=3.5"), (1.0, "cache;dur=0.1")]:
        result.record(200, {"server-timing": planned}, ms)
    result.record(503, {"retry-after": "1"}, 0.5)
    assert result.server == [2.5, 3.5]  # cache hits and refusals planned nothing
    assert result.percentile(0.5) == 4.0
    assert result.percentile(0.5, result.server) == 3.5
    line = result.line()
    assert "planning alone: p50 3.50 ms" in line
    assert "statuses 200:3 503:1" in line
    cached = load.Result("cached")
    cached.record(200, {"server-timing": "cache;dur=0.1"}, 1.0)
    assert "planning alone" not in cached.line()


def test_mixed_sizes_follow_their_weights_and_are_distinct() -> None:
    load = _load()
    assert load.parse_mix("32:97,300:2,3000:1") == {32: 97, 300: 2, 3000: 1}
    for bad in ("32:0", "x:1", "0:3"):
        with pytest.raises(ValueError, match="--mix"):
            load.parse_mix(bad)
    drawn = list(load._mixed_bodies(200, {32: 90, 300: 10}, seed=7))
    sizes = Counter(n for n, _ in drawn)
    assert set(sizes) == {32, 300}
    assert 150 < sizes[32] < 200  # about 90 in 100
    bodies = [body for _, body in drawn]
    assert len(set(bodies)) == len(bodies)  # no cache hits
    assert all(len(json.loads(b)["buffers"]) == n for n, b in drawn[:20])
    large = next(json.loads(b) for n, b in drawn if n == 300)
    assert large["options"]["time_limit"] == load.LARGE_TIME_LIMIT
    assert list(load._mixed_bodies(50, {32: 90, 300: 10}, seed=7)) == drawn[:50]


def test_mixed_time_limits_are_ones_the_service_accepts() -> None:
    load = _load()
    for n in (300, 3000, 10_000, 30_000, 100_000):
        least = FIXED_SECONDS_PER_BUFFER * n  # below it: 422 time_limit_too_small
        assert load.large_time_limit(n) >= 2 * least
        assert load.large_time_limit(n) >= load.LARGE_TIME_LIMIT
    assert load.large_time_limit(3000) == load.LARGE_TIME_LIMIT


def test_mixed_reports_each_size_and_small_requests_during_large_ones() -> None:
    load = _load()
    ok = {"server-timing": "plan;dur=1.0"}
    outcomes = [
        load.Outcome(0.0, 2.0, 200, ok),  # a large request in flight over [0, 2]
        load.Outcome(0.5, 0.51, 200, ok),  # small, during it
        load.Outcome(1.0, 1.5, 503, {"retry-after": "1"}),  # small, during it, refused
        load.Outcome(3.0, 3.002, 200, ok),  # small, after it
        load.Outcome(3.0, 60.0, error="TimeoutError"),  # medium, never answered
    ]
    mixed = load.split_by_size([3000, 32, 32, 32, 300], load.OpenLoop(outcomes, 4.0, 1))
    small, medium, large = (mixed.by_size[n] for n in (32, 300, 3000))
    assert small.statuses == Counter({200: 2, 503: 1})
    assert sorted(small.latencies) == pytest.approx([2.0, 10.0, 500.0])
    assert medium.errors == Counter({"TimeoutError": 1})
    assert medium.answered == 0
    assert large.latencies == [2000.0]
    during = mixed.during_large
    assert during.statuses == Counter({200: 1, 503: 1})
    assert sorted(during.latencies) == pytest.approx([10.0, 500.0])
    lines = mixed.lines()
    assert len(lines) == 4
    assert "mixed: 32 buffers while a 3000-buffer request is in flight" in lines[-1]
    assert "statuses 200:1 503:1" in lines[-1]
