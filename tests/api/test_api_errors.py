"""One error tree, one table from error class to HTTP status: every ``PlannerError`` class is
importable from ``planner``, has one status in ``planner.api.errors.HTTP_STATUS``, and the
service answers it with that status."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

import planner
import planner.api.routes
import planner.core.errors
from planner.api import create_app
from planner.api.errors import HTTP_STATUS, status_of
from planner.api.settings import Settings
from tests.support.samples import TWO_PHASE

_FIELD = [{"loc": ["buffers", 0, "size"], "msg": "must be positive, got -1", "type": "t"}]
_HEADER = [
    {"loc": ["header", "content-type"], "msg": "send JSON", "type": "unsupported_media_type"}
]

# One instance of each class, as the code raises it.
EXAMPLES: dict[type[planner.PlannerError], planner.PlannerError] = {
    planner.PlannerError: planner.PlannerError("something failed"),
    planner.RequestError: planner.RequestError(_FIELD),
    planner.FormatError: planner.FormatError([{"loc": [], "msg": "bad", "type": "json_invalid"}]),
    planner.PayloadTooLargeError: planner.PayloadTooLargeError(
        [{"loc": [], "msg": "too large", "type": "body_too_large"}]
    ),
    planner.UnsupportedMediaTypeError: planner.UnsupportedMediaTypeError(_HEADER),
    planner.InternalError: planner.InternalError("the plan failed the static check"),
    planner.MissingExtraError: planner.MissingExtraError("MLIR", "mlir", "pip install x[mlir]"),
    planner.OverloadedError: planner.OverloadedError("queue_full", "the solver queue is full"),
    planner.ServiceError: planner.ServiceError("no answer", 502),
    planner.ServiceUnavailableError: planner.ServiceUnavailableError("busy", 1.0),
    planner.ServiceConnectionError: planner.ServiceConnectionError("refused"),
    planner.UnexpectedResponseError: planner.UnexpectedResponseError("HTTP 404", 404),
}


def _subclasses(cls: type[planner.PlannerError]) -> set[type[planner.PlannerError]]:
    found = {cls}
    for sub in cls.__subclasses__():
        found |= _subclasses(sub)
    return found


TREE = _subclasses(planner.PlannerError)


def test_every_planner_error_has_exactly_one_status() -> None:
    assert set(EXAMPLES) == TREE  # a new class needs an example here, and a status
    for cls in TREE:
        status = HTTP_STATUS.get(cls)
        assert status is not None, f"{cls.__name__} has no HTTP status"
        assert 400 <= status < 600
        assert status_of(EXAMPLES[cls]) == status


def test_every_planner_error_is_exported_from_planner_and_defined_in_core() -> None:
    for cls in TREE:
        assert getattr(planner, cls.__name__) is cls
        assert cls.__name__ in planner.__all__
        assert cls.__module__ == "planner.core.errors"
        assert cls.__name__ in planner.core.errors.__all__


def test_every_class_has_its_own_code() -> None:
    codes = [cls.code for cls in TREE]
    assert len(set(codes)) == len(codes), sorted(codes)


def test_the_client_statuses_are_the_services() -> None:
    assert HTTP_STATUS[planner.RequestError] == 422
    assert HTTP_STATUS[planner.FormatError] == 422
    assert HTTP_STATUS[planner.PayloadTooLargeError] == 413
    assert HTTP_STATUS[planner.UnsupportedMediaTypeError] == 415
    assert HTTP_STATUS[planner.InternalError] == 500
    assert HTTP_STATUS[planner.OverloadedError] == 503


@pytest.mark.parametrize("cls", list(EXAMPLES), ids=[cls.__name__ for cls in EXAMPLES])
def test_the_service_answers_each_error_with_its_status(
    monkeypatch: pytest.MonkeyPatch, cls: type[planner.PlannerError]
) -> None:
    def raising(*args: Any, **kwargs: Any) -> Any:
        raise EXAMPLES[cls]

    monkeypatch.setattr(planner.api.routes, "parse_capped", raising)
    app = create_app(Settings(solver_pool="threads", access_log=False))
    with TestClient(app, raise_server_exceptions=False) as c:
        response = c.post("/plan", json=TWO_PHASE)
    assert response.status_code == HTTP_STATUS[cls]
    (error,) = response.json()["detail"]
    example = EXAMPLES[cls]
    if isinstance(example, planner.RequestError):
        # Field errors lie under "body"; only the content type's error names a header.
        where = [] if isinstance(example, planner.UnsupportedMediaTypeError) else ["body"]
        assert error["loc"] == [*where, *example.errors[0]["loc"]]
        assert error["msg"] == example.errors[0]["msg"]
    elif cls is planner.OverloadedError:
        assert error["type"] == "queue_full"
        assert "retry-after" in response.headers
    else:
        assert error["type"] == cls.code
