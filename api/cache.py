"""An LRU cache of plan bodies keyed by ``request_sha256``: plans are pure functions of
their request, so a repeat is answered without solving. Bounded twice: at most ``size``
plans and at most ``max_bytes`` bytes of them (a 100k-buffer plan is about 6 MB); a plan
larger than ``max_bytes`` is not kept.

Beside it, an LRU index from the digest of a raw request body to its ``request_sha256``: a
byte-identical repeat (the common case: a build farm resending one kernel) skips parsing.
The same bytes always parse to the same request, so the index can only be right or absent.
It holds at most ``size`` entries of about 200 bytes each.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["PlanCache"]


class PlanCache:
    """At most ``size`` plan bodies (JSON bytes) holding at most ``max_bytes`` bytes in all,
    least recently used dropped first."""

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.bytes = 0  # of the plan bodies kept
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bodies: OrderedDict[bytes, str] = OrderedDict()  # body digest -> key
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

    def key_of(self, digest: bytes) -> str | None:
        """The key a request body with this digest was seen to have; None if not indexed."""
        with self._lock:
            key = self._bodies.get(digest)
            if key is not None:
                self._bodies.move_to_end(digest)
            return key

    def link(self, digest: bytes, key: str) -> None:
        """Remember that the request body with ``digest`` has the key ``key``."""
        if self.size == 0:
            return
        with self._lock:
            self._bodies[digest] = key
            self._bodies.move_to_end(digest)
            while len(self._bodies) > self.size:
                self._bodies.popitem(last=False)

    def put(self, key: str, body: bytes) -> None:
        """Keep ``body`` under ``key``, evicting the least recently used past ``size`` plans
        or ``max_bytes`` bytes; a body larger than ``max_bytes`` is not kept."""
        if self.size == 0 or len(body) > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.bytes -= len(old)
            self._items[key] = body
            self.bytes += len(body)
            while len(self._items) > self.size or self.bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self.bytes -= len(dropped)
