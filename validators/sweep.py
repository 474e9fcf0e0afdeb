"""The straight-line checks: one sweep over barrier-extended lifetimes finds every overlap and
every reuse that no barrier separates (docs/design.md, "Reuse hazard").

A buffer occupies its bytes from its start until its end or, if later, the first run-time
barrier after its last access. A later buffer that starts inside that window and shares a byte
is an ``overlap`` while the first is still live, and a ``missing_barrier`` after, unless a
barrier stands between the first one's last access and the later one's first access, or the
pair is a thread-local alias (rule (b)) the plan lists. The static validator runs it on the
request's buffers, and once per straight-line execution on the pieces of a program with loops
and branches.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence, Set
from typing import TYPE_CHECKING, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt
from sortedcontainers import SortedList

from planner.validators._disjoint import any_clash, loaded, releases

if TYPE_CHECKING:
    from planner.core.models import Violation, ViolationCode

__all__ = [
    "PRESWEEP_MIN_EXTENTS",
    "Aliasing",
    "Collector",
    "Columns",
    "Extent",
    "ReportFullError",
    "Reporter",
    "report_pair",
    "sweep",
]

# From this many extents the compiled pre-sweep runs first (below, the sweep is quick, and a
# small plan is checked without loading compiled code); once this process runs compiled code,
# from PRESWEEP_READY_MIN_EXTENTS (at 400 extents it takes 1.1 ms where the sweep takes 2.5).
PRESWEEP_MIN_EXTENTS = 512
PRESWEEP_READY_MIN_EXTENTS = 32
I64 = npt.NDArray[np.int64]
Columns = tuple[I64, I64, I64, I64, I64]  # lo, hi, start, end, last access
# Where a buffer is during the sweep.
_OUT, _DISJOINT, _MISPLACED = 0, 1, 2
SMALL_SWEEP = 1024  # extents up to which a plain sorted list beats a chunked one


class _SmallSorted(list[tuple[int, ...]]):
    """A plain sorted list with the few ``SortedList`` methods the sweep uses (entries are
    unique): faster for a few hundred entries."""

    def add(self, item: tuple[int, ...]) -> None:
        bisect.insort(self, item)

    def remove(self, item: tuple[int, ...]) -> None:
        del self[bisect.bisect_left(self, item)]

    def bisect_left(self, item: tuple[int, ...]) -> int:
        return bisect.bisect_left(self, item)


class Extent(NamedTuple):
    """One buffer in the shared arena: bytes ``[lo, hi)`` on the points ``[start, end)``."""

    id: str
    lo: int  # bytes from the arena base
    hi: int  # bytes, one past the last
    start: int  # program point
    end: int  # program point, half-open
    buffer: int  # index in the request
    first: int  # program point of the first access (start without patterns)
    last: int  # program point of the last access (end - 1 without patterns)
    part: int = 0  # which of the buffer's live ranges (0 for a buffer with one)


class Aliasing(Protocol):
    """Rule (b) for a pair of extents, and the pairs the plan lists as aliases."""

    @property
    def claimed(self) -> Set[tuple[str, str]]: ...

    def holds(self, a: Extent, b: Extent) -> bool: ...


Reporter = Callable[[Extent, Extent, list[int], Aliasing, "Collector"], None]


class ReportFullError(Exception):
    """Raised inside the checks once the report holds ``max_violations`` and one more exists."""


class Collector:
    """Violations found so far, capped at ``limit``."""

    def __init__(self, limit: int, violation: type[Violation]) -> None:
        self.limit = limit
        self.violation = violation
        self.items: list[Violation] = []
        self.truncated = False

    def add(
        self,
        code: ViolationCode,
        message: str,
        buffers: Iterable[str] = (),
        point: int | None = None,
    ) -> None:
        if len(self.items) >= self.limit:
            self.truncated = True
            raise ReportFullError
        self.items.append(
            self.violation(code=code, message=message, buffers=list(buffers), point=point)
        )


def sweep(
    planned: Sequence[Extent],
    barriers: list[int],
    aliases: Aliasing,
    out: Collector,
    report: Reporter | None = None,
) -> None:
    """Report every overlapping pair and every reuse not separated by a barrier.

    Buffers enter in order of start (ties by end, then index) and stay until their release,
    the first barrier at or after their end (never, if there is none). Entered extents that
    clash with nothing are kept in a disjoint list sorted by offset, where a new extent can
    only meet one contiguous run found by bisection; one that clashes goes to a small
    ``misplaced`` list that every later extent is checked against by brute force. So each
    pair whose barrier-extended lifetimes meet is seen exactly once, by its later buffer.
    ``report`` (``report_pair`` unless given) judges and reports each such pair.
    """
    report = report_pair if report is None else report
    n = len(planned)
    if _presweeps(n) and not _may_clash(planned, barriers):
        return
    extents = list(planned)
    releases = _releases(extents, barriers)
    order = sorted(range(n), key=lambda i: (extents[i].start, extents[i].end, i))

    # Disjoint extents sorted by offset, (lo, hi, index): los and his increase together. A
    # sorted list of chunks keeps inserts and removals logarithmic at 100 000 extents.
    placed: SortedList | _SmallSorted = SortedList() if n > SMALL_SWEEP else _SmallSorted()
    misplaced: list[int] = []
    where = [_OUT] * n
    r = 0
    for i in order:
        b = extents[i]
        # Releases at b.start come first: a barrier at b.start runs before b's accesses.
        while r < len(releases) and releases[r][0] <= b.start:
            j = releases[r][1]
            r += 1
            if where[j] == _DISJOINT:
                placed.remove((extents[j].lo, extents[j].hi, j))
            elif where[j] == _MISPLACED:
                misplaced.remove(j)
            where[j] = _OUT
        if b.hi <= b.lo:
            continue  # no byte to share
        pos = placed.bisect_left((b.lo + 1,))  # entries from here start above b.lo
        if pos > 0 and placed[pos - 1][1] > b.lo:
            pos -= 1  # the one entry below may still reach into b
        clash = False
        while pos < len(placed):
            lo, _, j = placed[pos]
            if lo >= b.hi:
                break
            report(extents[j], b, barriers, aliases, out)
            clash = True
            pos += 1
        for j in misplaced:
            a = extents[j]
            if a.lo < b.hi and b.lo < a.hi:
                report(a, b, barriers, aliases, out)
                clash = True
        if clash:
            misplaced.append(i)
            where[i] = _MISPLACED
        else:
            placed.add((b.lo, b.hi, i))
            where[i] = _DISJOINT


def _releases(extents: list[Extent], barriers: list[int]) -> list[tuple[int, int]]:
    """(program point, extent index) of each extent's release, in point order: the first
    barrier after its last access, no earlier than its end; none after the last barrier."""
    releases: list[tuple[int, int]] = []
    for i, e in enumerate(extents):
        k = bisect.bisect_right(barriers, e.last)  # the first barrier after the last access
        if k < len(barriers):
            releases.append((max(barriers[k], e.end), i))
    releases.sort()
    return releases


def _presweeps(n: int) -> bool:
    """Whether the compiled pre-sweep runs first on ``n`` extents."""
    return n >= PRESWEEP_MIN_EXTENTS or (n >= PRESWEEP_READY_MIN_EXTENTS and loaded())


def _may_clash(extents: Sequence[Extent], barriers: list[int]) -> bool:
    """Whether the sweep would meet any two extents sharing a byte (compiled, O(n log n)): a
    valid plan then skips the Python sweep. Extents that hold their columns give them."""
    columns = getattr(extents, "columns", None)
    if columns is not None:
        lo, hi, start, end, last = columns()
    else:
        n = len(extents)

        def column(k: int) -> I64:
            return np.fromiter((e[k] for e in extents), dtype=np.int64, count=n)

        lo, hi, start, end, last = column(1), column(2), column(3), column(4), column(7)
    return bool(any_clash(lo, hi, start, end, releases(end, last, barriers)))


def report_pair(
    a: Extent, b: Extent, barriers: list[int], aliases: Aliasing, out: Collector
) -> None:
    """``a`` entered the sweep before ``b`` and still holds bytes ``b`` uses at ``b.start``."""
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)  # shared bytes
    if b.start >= a.end:
        k = bisect.bisect_right(barriers, a.last)
        if k < len(barriers) and barriers[k] <= b.first:
            return  # a barrier after a's last access precedes b's first one
        if aliases.holds(a, b):
            if (a.id, b.id) in aliases.claimed:
                return
            out.add(
                "missing_barrier",
                f"{b.id!r} reuses bytes [{lo}, {hi}) of {a.id!r} with no barrier; the pair is "
                "a thread-local alias but the plan does not list it in aliases",
                [a.id, b.id],
                point=b.start,
            )
            return
    if b.start < a.end:
        out.add(
            "overlap",
            f"{a.id!r} at [{a.lo}, {a.hi}) live [{a.start}, {a.end}) and {b.id!r} at "
            f"[{b.lo}, {b.hi}) live [{b.start}, {b.end}) share bytes [{lo}, {hi}) while both "
            f"are live on [{b.start}, {min(a.end, b.end)})",
            [a.id, b.id],
            point=b.start,
        )
    else:
        out.add(
            "missing_barrier",
            f"{b.id!r} (live from {b.start}, first access at {b.first}) reuses bytes [{lo}, "
            f"{hi}) of {a.id!r} (live until {a.end}, last access at {a.last}) with no barrier "
            f"in [{a.last + 1}, {b.first}]",
            [a.id, b.id],
            point=b.start,
        )
