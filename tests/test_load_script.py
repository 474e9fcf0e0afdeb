"""The load script's bookkeeping: percentiles, the planning time from Server-Timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "load.py"


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
