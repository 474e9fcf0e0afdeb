"""Pacing racing members: the cores go to the members that have spent the least effort.

Racing members each get a share of the cores, but their nodes cost different time (a member
deep in its tree expands cheaper nodes than one near the root), so by the time one decides,
the others may have run well past its effort, which is only thrown away: the winner is the
member that decides with the least effort, and the others only had to reach that much. So a
member runs on only while fewer members than there are cores are behind it (by more than a
slack), and otherwise waits: the least advanced always run, every core stays busy while
enough members are left, and when one decides, the others stop within about a slack of it.
Only the time each node is expanded changes, never which nodes: every member's result is
the one it gets alone on the same limit.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.core._jit import njit, pause

I64 = npt.NDArray[np.int64]

# ``cap`` of a racing member: its node limit (lowered by the others), then these.
MEMBER = 1  # its index in ``efforts``
SHIFT = 2  # its effort is its nodes shifted left by this (its share of the nodes)
SLACK = 3  # effort by which a member counts as behind it
CORES = 4  # members that may run at once
WAIT_US = 200  # microseconds before the first look again while waiting, doubling each time
LONGEST_WAIT_US = 4_000  # up to this: each look wakes a thread, which costs CPU too
EVERY = 16  # nodes between two looks at the others (a power of two)


def member_cap(limit: int, member: int = 0, shift: int = 0, slack: int = 0, cores: int = 1) -> I64:
    """A member's ``cap``: its node limit, then where and how it keeps pace (see above);
    with the defaults, a member running alone."""
    cap = np.zeros(5, dtype=np.int64)
    cap[0], cap[MEMBER], cap[SHIFT], cap[SLACK], cap[CORES] = limit, member, shift, slack, cores
    return cap


@njit
def keep_pace(efforts: I64, cap: I64, nodes: int) -> bool:
    """Publish this member's effort in ``efforts`` (one entry per member, shared; a member
    that has stopped holds a value past any limit) and wait while as many members as may run
    at once are behind it. False when its limit fell to ``nodes`` while it waited."""
    mine = nodes << cap[SHIFT]
    efforts[cap[MEMBER]] = mine
    wait = WAIT_US
    margin = cap[SLACK]  # to stop; once stopped, it goes on when they have caught up
    while True:
        behind = 0
        for other in efforts:
            if other + margin < mine:
                behind += 1
        if behind < cap[CORES]:
            return True
        if nodes >= cap[0]:
            return False
        pause(wait)
        wait = min(2 * wait, LONGEST_WAIT_US)
        margin = 0


@njit(borrows=True)
def halts(nodes: int, node_budget: int, cap: I64, efforts: I64, paced: int) -> tuple[bool, int]:
    """(whether a search stops, nodes when it last kept pace): at ``node_budget`` nodes or
    ``cap[0]``, which another thread may lower; racing (``efforts`` not empty), every
    ``EVERY`` nodes it keeps pace with the others (``keep_pace``)."""
    if nodes >= node_budget or nodes >= cap[0]:
        return True, paced
    if efforts.size > 0 and nodes >= paced + EVERY:
        return not keep_pace(efforts, cap, nodes), nodes
    return False, paced
