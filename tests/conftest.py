"""What every test leaves as it found it, and in which order the test modules go out to the
worker processes when the suite runs on several (``make unit``: pytest-xdist)."""

from __future__ import annotations

import os
from collections import Counter
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On an xdist worker, the modules in the order they are handed out (``--dist loadfile
    --no-loadscope-reorder``: a module runs whole on one worker, its fixtures built once):
    those with the most tests marked ``slow`` first, then those with the most tests, each
    module's tests in their own order. The long modules start at once and the short ones
    even out the end. In one process the order stays pytest's."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    modules = [item.nodeid.split("::", 1)[0] for item in items]
    tests = Counter(modules)
    slow = Counter(
        m for m, item in zip(modules, items, strict=True) if item.get_closest_marker("slow")
    )
    first = {m: i for i, m in reversed(list(enumerate(modules)))}
    rank = {m: (-slow[m], -tests[m], first[m]) for m in tests}
    order = sorted(range(len(items)), key=lambda i: (rank[modules[i]], i))
    items[:] = [items[i] for i in order]
