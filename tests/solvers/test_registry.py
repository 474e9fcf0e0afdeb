"""One solver registry: the names of the request's contract, what each runs, and the model
refusing any other name at parse time."""

from __future__ import annotations

import pytest

from planner.core.errors import RequestError
from planner.core.io import parse_request
from planner.core.models import PlanRequest
from planner.core.solver_names import EXACT_METHODS, HEURISTICS, SOLVER_NAMES
from planner.solvers import registry
from planner.solvers._skyline import RULES
from planner.solvers.greedy import FITS, ORDERINGS
from planner.solvers.greedy import HEURISTICS as GREEDY_HEURISTICS


def test_the_contract_names_exactly_the_heuristics_greedy_runs() -> None:
    assert list(HEURISTICS) == list(GREEDY_HEURISTICS)
    assert {h.split("/")[0] for h in HEURISTICS if h.endswith("fit")} == set(ORDERINGS)
    assert {h.split("/")[1] for h in HEURISTICS if h.endswith("fit")} == set(FITS)
    skyline = {h.split("/")[0] for h in HEURISTICS if h.endswith("/skyline")}
    assert skyline == {*RULES, "random"}


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_every_name_resolves(name: str) -> None:
    choice = registry.lookup(name)
    assert choice.name == name
    if name in ("auto", "exact"):
        assert choice.exact == EXACT_METHODS
    elif name in EXACT_METHODS:
        assert choice.exact == (name,)
    else:
        assert not choice.exact
    if ":" in name or "/" in name:
        assert choice.heuristics == [name.removeprefix("greedy:")]


@pytest.mark.parametrize("bad", ["magic", "GREEDY", "greedy:", "greedy:magic", "size/worst-fit"])
def test_an_unknown_name_is_refused_at_parse_time(bad: str) -> None:
    with pytest.raises(RequestError) as info:
        parse_request({"buffers": [], "options": {"solver": bad}})
    error = info.value.errors[0]
    assert error["loc"] == ["options", "solver"]
    assert error["type"] == "unknown_solver"
    assert error["input"] == bad
    assert "size/best-fit" in error["msg"]
    with pytest.raises(KeyError):
        registry.lookup(bad)


def test_the_schema_lists_the_choices() -> None:
    schema = PlanRequest.model_json_schema()
    options = schema["$defs"]["Options"]["properties"]["solver"]
    assert options["enum"] == list(SOLVER_NAMES)
