"""``planner.plan`` called as the command line is: a file's path as a string, and keywords
that replace the request's fields like the flags do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import planner
from planner.core.errors import FormatError, RequestError
from tests.support.samples import TWO_PHASE


def test_a_path_string_plans_the_file(tmp_path: Path) -> None:
    path = tmp_path / "two_phase.json"
    path.write_text(json.dumps(TWO_PHASE))
    by_path = planner.plan(str(path))
    assert by_path == planner.plan(path) == planner.plan(TWO_PHASE)
    assert planner.validate(TWO_PHASE, by_path).valid
    with pytest.raises(FormatError, match="no such file"):
        planner.plan(str(tmp_path / "missing.json"))


def test_keywords_replace_the_requests_fields() -> None:
    plan = planner.plan(TWO_PHASE, capacity=100_000, sync="existing", solver="greedy")
    assert plan.capacity == 100_000
    assert plan.barriers.inserted == []
    assert plan.solver.name.startswith("greedy:")
    expected = {**TWO_PHASE, "capacity": 100_000}
    expected["options"] = {**TWO_PHASE.get("options", {}), "sync": "existing", "solver": "greedy"}
    assert planner.validate(expected, plan).valid
    assert plan == planner.plan(expected)
    with pytest.raises(RequestError, match="unknown solver 'cp-sat'; did you mean 'cpsat'"):
        planner.plan(TWO_PHASE, solver="cp-sat")
    with pytest.raises(RequestError) as info:
        planner.plan(TWO_PHASE, target="sm_99")
    assert info.value.errors[0]["loc"] == ["target"]
