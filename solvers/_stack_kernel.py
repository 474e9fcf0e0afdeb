"""Can the buffers live at one point stack, aligned, within a few bytes of padding?

Buffers live at one point pairwise conflict, so above a level they lie disjoint, each at a
multiple of its alignment. In a given order the tightest stacking puts each at the lowest
aligned offset above the one before: its top is the level, plus their sizes, plus the padding
before each. That padding depends only on the position modulo ``period``, the largest
alignment (alignments are powers of two, so each divides it), and on each buffer's *class*:
its alignment and its size modulo ``period``. So "can some order pad at most ``slack``
bytes" is a search over (buffers left, position modulo ``period``):

- buffers of one class are interchangeable here, so they are taken in the order given;
- in each state, buffers that need no padding are tried first, so the first dive is a
  greedy that usually succeeds when there is room;
- a state that failed with ``b`` bytes of padding left needs more than ``b``: that lower
  bound goes into a table (``new_memo``) that later calls share, since it holds for the
  state whatever section or node it came from. The table is only an aid: a state it lost is
  searched again.

The answer is exact unless ``step_limit`` steps run out first; then it says "fits", which
only weakens the pruning that relies on it. Used by the exact search
(``solvers._search_kernel``) on sections whose slack is small enough for padding to matter.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit

I64 = npt.NDArray[np.int64]

MEMO_BITS = 14  # the table has 2**MEMO_BITS rows
WORDS = 4  # a state's buffers left, as a bit set of buffer indices
MAX_BUFFERS = 64 * WORDS  # buffers of a graph whose sections are checked


@njit
def new_memo(needed: bool = True) -> I64:
    """An empty table: rows of (key words, residue, padding needed is more than this); one
    row only (it still works, remembering a single state) when not ``needed``.

    Its keys name buffers by index: share it only between checks on one set of buffers
    (the same sizes, alignments and period).
    """
    memo = np.zeros((1 << MEMO_BITS if needed else 1, WORDS + 2), dtype=np.int64)
    memo[:, WORDS + 1] = -1  # no lower bound: every row empty
    return memo


@njit
def _slot(memo: I64, key: I64, residue: int) -> int:
    """The row for a state (the table's length is a power of two)."""
    h = residue * 0xC2B2AE3D
    for w in range(WORDS):
        h = (h ^ key[w]) * 0x9E3779B1
        h ^= h >> 29
    return int((h >> 17) & (memo.shape[0] - 1))


@njit
def _row_is(memo: I64, k: int, key: I64, residue: int) -> bool:
    if memo[k, WORDS] != residue:
        return False
    for w in range(WORDS):  # noqa: SIM110  (a plain loop compiles; a generator may not)
        if memo[k, w] != key[w]:
            return False
    return True


@njit
def _known(memo: I64, key: I64, residue: int) -> int:
    """Padding the state is known to need more than (-1: nothing known)."""
    k = _slot(memo, key, residue)
    if _row_is(memo, k, key, residue):
        return int(memo[k, WORDS + 1])
    return -1


@njit
def _learn(memo: I64, key: I64, residue: int, more_than: int) -> None:
    k = _slot(memo, key, residue)
    if _row_is(memo, k, key, residue):
        memo[k, WORDS + 1] = max(memo[k, WORDS + 1], more_than)
        return
    for w in range(WORDS):
        memo[k, w] = key[w]
    memo[k, WORDS] = residue
    memo[k, WORDS + 1] = more_than


@njit
def stack_fits(
    members: I64,
    count: int,
    cls: I64,
    size: I64,
    alignment: I64,
    period: int,
    start: int,
    slack: int,
    step_limit: int,
    memo: I64,
) -> tuple[bool, int]:
    """(whether, steps taken): whether the buffers ``members[:count]`` (indices below
    ``MAX_BUFFERS``; those of one class ``cls`` adjacent), stacked from a position
    ``start``, can be ordered so that the padding before them totals at most ``slack``
    bytes. ``memo`` (``new_memo``) is read and extended. "Fits" also when ``step_limit``
    steps did not decide it.
    """
    if slack < 0:
        return False, 0
    if count == 0:
        return True, 0
    key_at = np.zeros((count + 1, WORDS), dtype=np.int64)  # buffers left, a bit each
    for j in range(count):
        b = members[j]
        key_at[0, b >> 6] |= 1 << (b & 63)
    used = np.zeros(count, dtype=np.bool_)
    pos_at = np.zeros(count + 1, dtype=np.int64)
    left_at = np.zeros(count + 1, dtype=np.int64)  # padding still allowed, bytes
    took_at = np.zeros(count + 1, dtype=np.int64)  # member taken to reach the depth
    next_at = np.zeros(count + 1, dtype=np.int64)  # pass * count + member to try next
    child = np.zeros(WORDS, dtype=np.int64)
    pos_at[0] = start % period
    left_at[0] = slack
    depth = 0
    steps = 0
    while depth < count and steps < step_limit:
        steps += 1
        pos = pos_at[depth]
        left = left_at[depth]
        moved = False
        t = next_at[depth]
        while t < 2 * count:
            j = t % count
            padding = t >= count  # first pass: buffers that need no padding
            t += 1
            if used[j] or (j > 0 and not used[j - 1] and cls[members[j - 1]] == cls[members[j]]):
                continue  # taken, or its twin before it goes first
            b = members[j]
            a = alignment[b]
            pad = (a - pos % a) % a
            if (pad > 0) != padding or pad > left:
                continue
            child[:] = key_at[depth]
            child[b >> 6] ^= 1 << (b & 63)
            child_pos = (pos + pad + size[b]) % period
            if _known(memo, child, child_pos) >= left - pad:
                continue  # it needs more padding than would be left
            next_at[depth] = t
            used[j] = True
            depth += 1
            took_at[depth] = j
            key_at[depth] = child
            pos_at[depth] = child_pos
            left_at[depth] = left - pad
            next_at[depth] = 0
            moved = True
            break
        if not moved:
            _learn(memo, key_at[depth], pos, left)
            if depth == 0:
                return False, steps
            used[took_at[depth]] = False
            depth -= 1
    return True, steps
