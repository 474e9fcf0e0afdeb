"""The once-per-process warm-up leaves what it made, and everything before it, out of the
cycle collector's sight (``gc.freeze``)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from planner.pipeline import warm


def test_the_warm_up_freezes_the_objects_alive_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm, "_state", {"done": False, "running": False})
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    kept: list[list[str]] = []

    def plan(request: dict[str, Any]) -> object:
        kept.append([request["name"]])  # a container the warm-up leaves alive
        return None

    warm.ensure_warm(plan)
    assert [k[0] for k in kept] == [r["name"] for r in warm.warm_up_requests()]
    assert gc.get_freeze_count() > 0
    # What the warm-up left alive is among the frozen: a collection no longer walks it.
    walked = {id(o) for o in gc.get_objects()}
    assert all(gc.is_tracked(k) and id(k) not in walked for k in kept)
    # Once per process: a second call plans nothing and freezes nothing more.
    frozen = gc.get_freeze_count()
    warm.ensure_warm(plan)
    assert len(kept) == len(warm.warm_up_requests())
    assert gc.get_freeze_count() == frozen
