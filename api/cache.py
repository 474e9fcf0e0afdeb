"""An LRU cache of plan bodies keyed by ``request_sha256``: plans are pure functions of
their request, so a repeat is answered without solving."""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["PlanCache"]


class PlanCache:
    """At most ``size`` plan bodies (JSON bytes), least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> bytes | None:
        """The cached body, marked most recently used; None on a miss."""
        with self._lock:
            body = self._items.get(key)
            if body is not None:
                self._items.move_to_end(key)
            return body

    def put(self, key: str, body: bytes) -> None:
        """Keep ``body`` under ``key``, evicting the least recently used past ``size``."""
        if self.size == 0:
            return
        with self._lock:
            self._items[key] = body
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
