"""What every test leaves as it found it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

OWN = "PYTEST_CURRENT_TEST"  # pytest's own, set around every test

# The Host names of starlette's TestClient and of the tests' in-process httpx clients; the
# service answers only loopback names unless told (test_api_limits checks it is so).
os.environ.setdefault("PLANNER_ALLOWED_HOSTS", "testserver,test,planner.test")


@pytest.fixture(autouse=True)
def _environment_unchanged() -> Iterator[None]:
    """The process environment after a test is the one before it: a variable left behind
    reaches every process a later test starts (a cache directory left so once made each of
    them compile its kernels again)."""
    before = {k: v for k, v in os.environ.items() if k != OWN}
    yield
    after = {k: v for k, v in os.environ.items() if k != OWN}
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"the test left the environment changed: {changed}"
