"""The clique bound: the buffers live at one point, stacked as tightly as alignment allows.

Buffers occupied at a common point pairwise conflict, so their address ranges are disjoint:
sorted by offset, each starts at or above the top of the one before, at a multiple of its
alignment. The lowest top over every order is the exact arena of that set alone (a dynamic
program over subsets: for a set, only its lowest top matters to what can follow, since
rounding up is monotone), and no plan of the whole request is lower. Pinned buffers are
treated as free, which only relaxes the bound. Where alignments differ (16 and 128 bytes,
say) this exceeds the peak and the aligned bound, often up to the optimum.

Alignments are powers of two, so buffers of one *class* (alignment, and size modulo the
largest alignment) are interchangeable in a stacking: the program (``_stacked``) runs over
how many of each class are placed, ``prod(count + 1)`` states of a step per class, where
over every subset it would take ``2^k`` states of ``k`` steps: on random kernels aligned to
16 or 128 bytes, 35 000-55 000 states of 12 classes for a live set of 18 buffers, against
262 144 of 18. Points are taken in decreasing order of what they could reach, stopping once none
can beat the bound in hand, within a fixed budget of steps (deterministic).

``hazard_bound`` is the peak of a request whose barriers and aliases decide what may share:
it bounds plans under ``sync: existing`` and capped ``insert``, where the plain peak of the
lifetimes is far below the optimum.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit
from planner.core.aliasing import Owners
from planner.core.graph import InterferenceGraph, LowerBound
from planner.solvers.exact import granularity

__all__ = [
    "CLIQUE_MAX",
    "MAX_BUFFERS",
    "STEP_BUDGET",
    "clique_bound",
    "hazard_bound",
    "stack_height",
]

I64 = npt.NDArray[np.int64]

CLIQUE_MAX = 18  # live buffers: a set of more is not stacked exactly by ``stack_height``
STATES_MAX = 1 << CLIQUE_MAX  # states: points whose program has more are left to other bounds
MAX_BUFFERS = 2000  # the live sets are found by a points x buffers table
STEP_BUDGET = 8_000_000  # steps of the subset program over all points of one request


@njit
def _stack_classes(size: I64, alignment: I64, count: I64) -> int:
    """Lowest top (bytes) of ``count[c]`` buffers of each class ``c`` (``size[c]`` bytes at a
    multiple of ``alignment[c]``) stacked disjoint from 0: the subset program over how many
    of each class are placed, in mixed radix."""
    m = size.shape[0]
    stride = np.ones(m + 1, dtype=np.int64)
    for c in range(m):
        stride[c + 1] = stride[c] * (count[c] + 1)
    states = stride[m]
    never = np.iinfo(np.int64).max // 4
    top = np.full(states, never, dtype=np.int64)
    top[0] = 0
    used = np.zeros(m, dtype=np.int64)  # of each class, in this state (an odometer)
    for state in range(states):
        t = top[state]
        if t != never:
            for c in range(m):
                if used[c] < count[c]:  # some buffer of this class is left
                    a = alignment[c]
                    reach = (t + a - 1) // a * a + size[c]
                    nxt = state + stride[c]
                    if reach < top[nxt]:
                        top[nxt] = reach
        c = 0
        while c < m and used[c] == count[c]:
            used[c] = 0
            c += 1
        if c < m:
            used[c] += 1
    return int(top[states - 1])


@njit
def _stacked(size: I64, alignment: I64, states_max: int, steps_max: int) -> tuple[int, int]:
    """(lowest top in bytes, steps) of the buffers stacked disjoint from 0, each aligned; (-1,
    0) when the program would take more than ``states_max`` states or ``steps_max`` steps.

    Alignments are powers of two, so each divides the largest, ``period``: moving a buffer's
    top by a multiple of ``period`` changes no padding after it. Buffers of one class (size
    modulo ``period``, alignment) are then interchangeable in a stacking, and a buffer may be
    stacked as its size modulo ``period`` with the rest added on top at the end.
    """
    k = size.shape[0]
    if k == 0:
        return 0, 0
    period = alignment.max()
    keys = np.sort(alignment * period + size % period)
    classes = 1
    for i in range(1, k):
        if keys[i] != keys[i - 1]:
            classes += 1
    residue = np.empty(classes, dtype=np.int64)
    aligns = np.empty(classes, dtype=np.int64)
    count = np.zeros(classes, dtype=np.int64)
    c = -1
    for i in range(k):
        if i == 0 or keys[i] != keys[i - 1]:
            c += 1
            residue[c] = keys[i] % period
            aligns[c] = keys[i] // period
        count[c] += 1
    states = 1
    for c in range(classes):
        states *= count[c] + 1
        if states > states_max:
            return -1, 0
    steps = states * classes
    if steps > steps_max:
        return -1, 0
    rest = 0
    for i in range(k):
        rest += size[i] - size[i] % period
    return _stack_classes(residue, aligns, count) + rest, steps


STACK_STATES_MAX = 1 << 40  # ``stack_height`` refuses a set whose program has more states


def stack_height(size: I64, alignment: I64) -> int:
    """Lowest top (bytes) of the buffers stacked disjoint from 0, each aligned; ValueError
    past ``STACK_STATES_MAX`` states (at most 40 buffers always fit)."""
    steps_max = np.iinfo(np.int64).max
    height, _ = _stacked(
        size.astype(np.int64), alignment.astype(np.int64), STACK_STATES_MAX, steps_max
    )
    if height < 0:
        raise ValueError(f"{size.shape[0]} buffers of too many classes to stack exactly")
    return int(height)


def clique_bound(g: InterferenceGraph, floor: int = 0) -> LowerBound:
    """Largest stacked height of the buffers live at one point (bytes), with the point and
    those buffers; ``floor`` bytes (no point) when no point within the budget beats it, or
    alignment cannot pad (every arena is then a multiple of every alignment)."""
    best = LowerBound(floor, None, [])
    if g.n == 0 or g.n > MAX_BUFFERS or int(g.alignment.max()) <= granularity(g):
        return best
    points = np.unique(g.start)
    live = (g.start[None, :] <= points[:, None]) & (g.occupied_end[None, :] > points[:, None])
    # No stacking exceeds the sizes plus the most each alignment can pad.
    reach = np.where(live, g.size[None, :] + g.alignment[None, :] - 1, 0).sum(axis=1)
    size, alignment = g.size.astype(np.int64), g.alignment.astype(np.int64)
    left = STEP_BUDGET
    for p in np.argsort(-reach, kind="stable").tolist():
        if int(reach[p]) <= best.bytes:
            break  # the rest cannot beat it either
        members = np.flatnonzero(live[p])
        height, cost = _stacked(size[members], alignment[members], STATES_MAX, left)
        if height < 0:
            continue  # too many states, or past the budget
        left -= cost
        if height > best.bytes:
            best = LowerBound(height, int(points[p]), [int(i) for i in members])
    return best


HAZARD_ALIAS_MAX = 64  # buffers: past this, aliases are not looked at (bound 0)
SHARE_MAX_SHIFTS = 4096  # relative offsets tried per pair; more: assumed able to share
CLIQUE_EXACT = 16  # live buffers up to which the heaviest clique is found exactly


def hazard_bound(
    g: InterferenceGraph,
    first: I64,
    after: I64,
    allowed: list[int] | None,
    owners: Owners | None,
    cache: dict[tuple[int, int], bool] | None = None,
) -> LowerBound:
    """A lower bound that sees barrier hazards and what aliasing can save.

    Buffer ``i`` is taken as busy over ``[first[i], r_i)``, its first access up to ``r_i``,
    the first point of ``allowed`` (every barrier any plan may have, sorted; None: every
    point) at or after ``after[i]`` (last access + 1; the end of the program when there is
    none). When two such intervals meet, the buffers conflict: either their lifetimes meet,
    or the earlier one's last access comes before the later one's first with no allowed
    barrier in between, so only aliasing (rule (b)) lets them share a byte. ``owners``
    (None: no buffer may alias) says whether some relative offset lets them share by that
    rule; pairs that may are left out. The heaviest set of pairwise conflicting buffers
    busy at one point then needs disjoint bytes: its total size bounds every plan.
    ``cache`` keeps what ``owners`` said of each pair across calls with the same owners.
    """
    n = g.n
    if n == 0 or (owners is not None and n > HAZARD_ALIAS_MAX):
        return LowerBound(0, None, [])
    end_of_program = int(max(int(g.end.max()), int(after.max())))
    if allowed is None:
        release = after.copy()
    else:
        points = np.asarray(sorted(set(allowed)), dtype=np.int64)
        k = np.searchsorted(points, after, side="left")
        release = np.full(n, end_of_program, dtype=np.int64)
        inside = k < points.size
        release[inside] = points[k[inside]]
    release = np.maximum(release, first + 1)
    busy = replace(g, start=first, occupied_end=release)
    if owners is None:
        return busy.lower_bound
    best = LowerBound(0, None, [])
    cache = {} if cache is None else cache
    points = np.unique(first)
    live_at = (first[None, :] <= points[:, None]) & (release[None, :] > points[:, None])
    totals = np.where(live_at, g.size[None, :], 0).sum(axis=1)
    # Most bytes first: a point whose live bytes cannot beat the bound in hand is skipped.
    for k in np.argsort(-totals, kind="stable").tolist():
        if int(totals[k]) <= best.bytes:
            break
        p = int(points[k])
        live = np.flatnonzero(live_at[k])
        soft = _soft_pairs(g, live, owners, cache)
        chosen = _heaviest_clique(g.size, live, soft)
        total = int(g.size[chosen].sum())
        if total > best.bytes:
            best = LowerBound(total, int(p), [int(i) for i in chosen])
    return best


def _soft_pairs(
    g: InterferenceGraph, live: I64, owners: Owners | None, cache: dict[tuple[int, int], bool]
) -> set[tuple[int, int]]:
    """Pairs of ``live`` whose lifetimes are disjoint and which may share a byte by aliasing."""
    soft: set[tuple[int, int]] = set()
    if owners is None:
        return soft
    items = live.tolist()
    for x in items:
        for y in items:
            if g.end[x] > g.start[y]:
                continue  # not x before y
            key = (x, y)
            if key not in cache:
                cache[key] = _may_share(g, owners, x, y)
            if cache[key]:
                soft.add((min(x, y), max(x, y)))
    return soft


def _may_share(g: InterferenceGraph, owners: Owners, earlier: int, later: int) -> bool:
    """Whether ``later`` at some offset allowed by the alignments shares a byte with
    ``earlier`` by rule (b); too many offsets to try, or a pinned buffer: assumed so."""
    if g.pinned[earlier] >= 0 or g.pinned[later] >= 0:
        return True
    size_a, size_b = int(g.size[earlier]), int(g.size[later])
    if size_a == 0 or size_b == 0:
        return False  # no byte to share; nothing to gain either
    step = math.gcd(int(g.alignment[earlier]), int(g.alignment[later]))
    lo = -((size_b - 1) // step) * step
    if (size_a - 1 - lo) // step + 1 > SHARE_MAX_SHIFTS:
        return True
    return any(owners.compatible(earlier, later, s) for s in range(lo, size_a, step))


def _heaviest_clique(size: I64, live: I64, soft: set[tuple[int, int]]) -> I64:
    """The heaviest subset of ``live`` with no pair in ``soft``: exactly for a few buffers,
    greedily by size otherwise (any such subset is a valid bound)."""
    if not soft:
        return live
    items = sorted(live.tolist(), key=lambda i: (-int(size[i]), i))
    if len(items) > CLIQUE_EXACT:
        chosen: list[int] = []
        for i in items:
            if all((min(i, j), max(i, j)) not in soft for j in chosen):
                chosen.append(i)
        return np.asarray(chosen, dtype=np.int64)
    best: list[int] = []
    best_w = -1

    def grow(k: int, chosen: list[int], weight: int, rest: int) -> None:
        nonlocal best, best_w
        if weight > best_w:
            best, best_w = list(chosen), weight
        if k == len(items) or weight + rest <= best_w:
            return
        i = items[k]
        w = int(size[i])
        if all((min(i, j), max(i, j)) not in soft for j in chosen):
            chosen.append(i)
            grow(k + 1, chosen, weight + w, rest - w)
            chosen.pop()
        grow(k + 1, chosen, weight, rest - w)

    grow(0, [], 0, int(sum(int(size[i]) for i in items)))
    return np.asarray(best, dtype=np.int64)
