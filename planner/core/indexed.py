"""A sequence whose items are made from their index when read."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import TypeVar, overload

__all__ = ["Indexed"]

T = TypeVar("T")


class Indexed(Sequence[T]):
    """Items made on demand: a subclass gives ``__len__`` and ``item`` (an index in range);
    indexing, negative indices, slices (lists) and iteration behave as a list's."""

    @abstractmethod
    def item(self, i: int) -> T:
        """The item at index ``i``, ``0 <= i < len(self)``."""

    @overload
    def __getitem__(self, k: int) -> T: ...

    @overload
    def __getitem__(self, k: slice) -> list[T]: ...

    def __getitem__(self, k: int | slice) -> T | list[T]:
        if isinstance(k, slice):
            return [self.item(i) for i in range(*k.indices(len(self)))]
        return self.item(range(len(self))[k])  # IndexError past either end, as a list's
