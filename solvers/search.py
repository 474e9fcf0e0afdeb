"""Exact method ``"search"``: a dedicated branch and bound over canonical placements.

The decision kernel (``solvers._search_kernel``) answers "does everything fit below
``capacity`` bytes?" with a plan, a proof of impossibility, or "out of nodes". This module
minimizes with it: first the capacity when no plan within it is known yet (a plan within
capacity matters most), then the lower bound (a plan there is optimal), then a bisection
between the largest capacity proved impossible and the best arena found. Each decision runs a
portfolio of branching orders on the canonical kernel and, on graphs of more than 64 buffers
without pinned buffers, of the skyline kernel (``solvers._skyline_kernel``, which decides
zero-slack tilings the canonical one thrashes on), and the member that decides with the least
effort wins: they race on threads when there are cores to spare, else take turns on a
doubling node limit (restarts, MiniMalloc's remedy for heavy-tailed searches); both ways give
the same answer. A
node budget derived from ``time_limit`` stops the search, so the same request gets the same
answer on any machine; the clock is only a hard cap that stops early on a machine much
slower than the one the throughput was measured on.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.core._jit import NATIVE_PAUSE, ready
from planner.core.budget import MIN_NODES, NODE_WORK_PER_SECOND
from planner.core.clock import note_cut, wall_limit
from planner.core.cores import usable_cores
from planner.core.graph import InterferenceGraph
from planner.core.indexed import Indexed
from planner.solvers._pace_kernel import member_cap
from planner.solvers._rows_kernel import neighbour_rows
from planner.solvers._search_kernel import (
    EXHAUSTED,
    FOUND,
    OUT_OF_NODES,
    STATS,
    SearchArrays,
    decide,
)
from planner.solvers._skyline_kernel import FEWEST, LEFTMOST, SkylineArrays, decide_skyline
from planner.solvers._stack_kernel import MAX_BUFFERS as STACK_MAX_BUFFERS
from planner.solvers.exact import Progress, Stop, granularity, round_up
from planner.solvers.greedy import arena_of, fit_in_order, uses_tree
from planner.solvers.solution import Solution, unfit

__all__ = [
    "NODE_WORK_PER_SECOND",
    "ORDERS",
    "decide_orders",
    "exhausts",
    "node_budget",
    "solve_search",
]

I64 = npt.NDArray[np.int64]

# Branching priorities of the canonical kernel (``_rank_keys``), each on an equal share of nodes:
MINIMALLOC_ORDERS = ("WAT", "TAW", "TWA")  # MiniMalloc's defaults: ties go to request order
ORDERS = (*MINIMALLOC_ORDERS, "EL", "BL", "TLS", "SCT", "ATC")  # the published orders first
SKYLINE_ORDERS = ("S", "C")  # priorities of the skyline kernel's members
SKYLINE_VALLEYS = (FEWEST, LEFTMOST)  # valley rules of the skyline kernel's members
SKYLINE_MIN = 64  # buffers above which the skyline members join (graphs without pins)
SKYLINE_DISCOUNT = 16  # skyline kernel steps charged as one canonical step
HALF_SHARE = 1  # share exponent of each skyline member and banded twin: half an order's
BREADTH_SHARE = 2  # share exponent of the orders beyond MiniMalloc's: a quarter of a share
TWIN_FULL_MIN = 64  # buffers above which deciding the capacity asked for, twins get a full share
FIRST_NODES_PER_BUFFER = 2  # nodes a buffer of each member of the first try (``_first_share``)
PARALLEL_MIN = 16  # buffers from which members race on threads
DESCEND_MIN = 64  # buffers above which minimizing descends in steps
BOUND_PART = 8  # descending below a capacity, the bound is decided on this part of the nodes left
DESCEND_PART = 4  # descending, the next capacity lies this part of the way down
PACED_MIN = 64  # buffers above which racing members keep pace (``solvers._pace_kernel``)
PACE_SHIFT = 4  # a member is behind by more than this power-of-two part of a share
PACE_SLACK = 64  # nodes: and by at least this many
STOPPED = np.iinfo(np.int64).max // 2  # the effort of a member that has stopped
_ALONE = np.zeros(0, dtype=np.int64)  # no other member to keep pace with
NICE_PER_HALVING = 3  # nice levels that halve a racing thread's CPU share (Linux)


class _Instance(SearchArrays):
    """The graph as the kernel's arrays (buffer indices in request order)."""

    __slots__ = ()

    @property
    def sections(self) -> int:
        return int(self.sec_pin_ptr.size) - 1


@dataclass(frozen=True)
class _Skyline:
    """The graph as the skyline kernel's arrays (no pinned buffers; request order)."""

    size: I64
    alignment: I64
    first: I64
    last: I64
    start_ptr: I64  # CSR by first section: the buffers starting there, by rank
    start_list: I64
    twin_prev: I64
    rank: I64
    span_of: I64  # per buffer its lifetime's class (same first and last section)
    span_ptr: I64  # CSR by class
    span_list: I64
    valley: int  # the kernel's valley rule


class _Banded(_Instance):
    """A published order whose decomposition also starts a sub-problem at a boundary where
    no buffer ends (``end_at`` all set): wherever the buffer just placed was the last unplaced
    one across any boundary, the rest is ranked afresh and placed from the lowest floor. It
    searches other nodes than the published order, and decides instances that order cannot
    in its budget (and the other way round): the portfolio races it among the breadth."""

    __slots__ = ()


_Member = _Instance | _Skyline


def _skyline(inst: _Instance, valley: int, reverse: bool) -> _Skyline:
    """The skyline kernel's arrays for the ranking of ``inst``, time reversed if
    ``reverse`` (a plan of the reversed graph is one of the graph: offsets do not move)."""
    sections = inst.sections
    first, last = inst.first, inst.last
    if reverse:
        first, last = sections - last, sections - first
    start_ptr, start_list = _csr(first[inst.by_rank], inst.by_rank, sections)
    _, span = np.unique(first * (sections + 1) + last, return_inverse=True)
    span_of = span.astype(np.int64).reshape(-1)
    span_ptr, span_list = _csr(span_of, np.arange(span_of.size, dtype=np.int64), span_of.size)
    return _Skyline(
        inst.size,
        inst.alignment,
        first,
        last,
        start_ptr,
        start_list,
        inst.twin_prev,
        inst.rank,
        span_of,
        span_ptr,
        span_list,
        valley,
    )


def _banded(inst: _Instance) -> _Banded:
    """``inst`` (a published order) with every boundary a place to decompose."""
    return _Banded._make(inst._replace(end_at=np.ones_like(inst.end_at)))


def _members(g: InterferenceGraph) -> list[_Member]:
    """The portfolio for ``g``: every order of ``ORDERS`` on the canonical kernel, the
    published orders' banded twins, then the skyline kernel on ``SKYLINE_ORDERS``, each
    where it applies."""
    portfolio = _Portfolio(g)
    return [*portfolio.first, *portfolio.rest]


_MEMO = "search"  # the key of a graph's portfolio in ``InterferenceGraph.memo``


def _portfolio_of(g: InterferenceGraph) -> _Portfolio:
    """The portfolio of ``g``: the one its first try built and left (with what that try ran
    out of nodes on), taken from the graph (one search takes it up), else a new one."""
    kept = g.memo.pop(_MEMO, None)
    return kept if isinstance(kept, _Portfolio) else _Portfolio(g)


class _Portfolio:
    """The members of ``_members``: MiniMalloc's published orders (``first``), each built
    when first read, the others (``rest``) when a decision first needs them; all on one set
    of shared arrays (``common``), built with the first member. The published orders'
    rankings (``ranking``) need only the ranking keys: first fit in them builds no member."""

    def __init__(self, g: InterferenceGraph) -> None:
        self._g = g
        self._keys = _Keys.of(g)
        self._common: _Common | None = None
        self._rankings: dict[int, I64] = {}
        self.first = _Published(g, self)
        self._twins: list[_Banded] | None = None
        self._rest: list[_Member] | None = None
        # The capacity (bytes) at which the first try (``_Descent.first_try``) ran every
        # member of its first ``ran_out_groups`` groups (``_first_groups``) out of nodes;
        # None: it did not.
        self.ran_out_at: int | None = None
        self.ran_out_groups = 0

    @property
    def common(self) -> _Common:
        if self._common is None:
            self._common = _Common.of(self._g, self._keys)
        return self._common

    def ranking(self, i: int) -> I64:
        """The buffers by priority in MiniMalloc's ``i``-th published order (``by_rank``)."""
        if i not in self._rankings:
            self._rankings[i] = _by_rank(self._g, self._keys.keys, MINIMALLOC_ORDERS[i])
        return self._rankings[i]

    @property
    def twins(self) -> list[_Banded]:
        """The published orders' banded twins, built when first read; none where no boundary
        is without an end (each would repeat its order)."""
        if self._twins is None:
            apart = bool((self.common.end_at[1:-1] == 0).any())
            self._twins = [_banded(inst) for inst in self.first] if apart else []
        return self._twins

    @property
    def rest(self) -> list[_Member]:
        if self._rest is None:
            g = self._g
            sky = g.n > SKYLINE_MIN and not bool((g.pinned >= 0).any())
            others = ORDERS[len(MINIMALLOC_ORDERS) :]
            insts = self.common.instances(g, others + (SKYLINE_ORDERS if sky else ()))
            rest: list[_Member] = [*insts[: len(others)], *self.twins]
            rest += [
                _skyline(inst, valley, reverse)
                for reverse in (False, True)
                for valley in SKYLINE_VALLEYS
                for inst in insts[len(others) :]
            ]
            self._rest = rest
        return self._rest


class _Published(Indexed[_Instance]):
    """MiniMalloc's published orders' instances, each built when first read: where the
    first order's first try decides, the others' rankings are never computed."""

    def __init__(self, g: InterferenceGraph, portfolio: _Portfolio) -> None:
        self._g = g
        self._portfolio = portfolio
        self._built: dict[int, _Instance] = {}

    def __len__(self) -> int:
        return len(MINIMALLOC_ORDERS)

    def item(self, i: int) -> _Instance:
        if i not in self._built:
            ranked = self._portfolio.ranking(i)
            common = self._portfolio.common
            self._built[i] = common.instances(self._g, (MINIMALLOC_ORDERS[i],), [ranked])[0]
        return self._built[i]


def _csr(src: I64, dst: I64, n: int) -> tuple[I64, I64]:
    """Row pointers and columns of the pairs ``(src, dst)``, columns in input order."""
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    cols: I64 = dst[order].astype(np.int64)
    return ptr, cols


def _sections_of(buffers: I64, first: I64, last: I64) -> tuple[I64, I64]:
    """(section, buffer) for every section each of ``buffers`` is live in, by buffer."""
    lengths = last[buffers] - first[buffers]
    # Each buffer's run of sections counts up from its first, from where the run begins.
    begins = np.cumsum(lengths) - lengths
    sec_of = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(
        first[buffers] - begins, lengths
    )
    return sec_of.astype(np.int64), np.repeat(buffers, lengths).astype(np.int64)


def _instance(g: InterferenceGraph, order: str = ORDERS[0]) -> _Instance:
    """The kernel's arrays, buffers ranked by the priority ``order`` (see ``ORDERS``)."""
    return _instances(g, (order,))[0]


def _instances(g: InterferenceGraph, orders: tuple[str, ...]) -> list[_Instance]:
    """One instance per branching order; only the ranking differs, the rest is shared."""
    return _Common.of(g).instances(g, orders)


@dataclass(frozen=True)
class _Keys:
    """What ranking the buffers takes: each buffer's first and one past its last section, the
    sections and the ranking keys (``_rank_keys``)."""

    first: I64
    last: I64
    sections: int
    keys: dict[str, I64]

    @staticmethod
    def of(g: InterferenceGraph) -> _Keys:
        points = np.unique(np.concatenate([g.start, g.occupied_end]))
        first = np.searchsorted(points, g.start).astype(np.int64)
        last = np.searchsorted(points, g.occupied_end).astype(np.int64)
        sections = max(0, int(points.size) - 1)
        return _Keys(first, last, sections, _rank_keys(g, first, last, sections))


@dataclass(frozen=True)
class _Common:
    """What every order's instance of one graph shares: the kernel's arrays but the ranking,
    the ranking keys, the sections' ends and the classes of interchangeable buffers."""

    shared: dict[str, I64]
    keys: dict[str, I64]
    end_at: I64
    twins: I64  # per buffer its class of interchangeable buffers (``_twin_classes``)

    @staticmethod
    def of(g: InterferenceGraph, ranking: _Keys | None = None) -> _Common:
        """The arrays of ``g``, from its ranking keys where they were computed already."""
        ranking = _Keys.of(g) if ranking is None else ranking
        first, last, sections, keys = ranking.first, ranking.last, ranking.sections, ranking.keys
        _, hi, _, _ = g.neighbours
        by_start = g.by_start
        # Each buffer's neighbours smallest first (ties by index): a waiting buffer's lowest
        # offset is the least lift of its unplaced neighbours, and the kernel stops reading
        # once a neighbour is too large to lift it any lower.
        adj_ptr, adj = neighbour_rows(
            by_start.astype(np.int64), hi.astype(np.int64), _rank_by_size(g.size)
        )
        pin_ptr, pin_adj = _pin_lists(g.pinned, adj_ptr, adj)
        sec_pin_ptr, sec_pin = _csr(
            *_sections_of(np.flatnonzero(g.pinned >= 0), first, last), sections
        )
        sec_free_ptr, sec_free, cls, sec_period, sec_max_pad = _padding_lists(
            g, first, last, sec_pin_ptr
        )
        end_at = np.zeros(sections + 1, dtype=np.int64)
        end_at[last] = 1
        twins = _twin_classes(g)
        shared = {
            "size": g.size.astype(np.int64),
            "alignment": g.alignment.astype(np.int64),
            "pinned": g.pinned.astype(np.int64),
            "adj_ptr": adj_ptr,
            "adj": adj,
            "pin_ptr": pin_ptr,
            "pin_adj": pin_adj,
            "first": first,
            "last": last,
            "sec_pin_ptr": sec_pin_ptr,
            "sec_pin": sec_pin,
            "sec_free_ptr": sec_free_ptr,
            "sec_free": sec_free,
            "cls": cls,
            "sec_period": sec_period,
            "sec_max_pad": sec_max_pad,
        }
        return _Common(shared, keys, end_at, twins)

    def instances(
        self, g: InterferenceGraph, orders: tuple[str, ...], rankings: list[I64] | None = None
    ) -> list[_Instance]:
        """One instance per order of ``orders`` (``rankings``: their ``by_rank``, where
        computed already)."""
        none = np.zeros(0, dtype=np.int64)
        known: list[I64 | None] = [*rankings] if rankings is not None else [None] * len(orders)
        return [
            _Instance(
                **self.shared,
                **_ranked(g, self.keys, order, self.twins, by_rank),
                end_at=self.end_at if order in MINIMALLOC_ORDERS else none,
            )
            for order, by_rank in zip(orders, known, strict=True)
        ]


def _rank_keys(g: InterferenceGraph, first: I64, last: I64, sections: int) -> dict[str, I64]:
    """Branching priorities after MiniMalloc's, each ascending: "T" puts the buffers of the
    fullest sections first, "W" the widest (the longest occupied interval, in program points:
    MiniMalloc's width), "C" those spanning the most sections, "A" the largest area, "L" the
    longest occupied interval (as "W"), "S" the largest, "B" the earliest start, "E" the
    latest end."""
    load = np.zeros(sections + 1, dtype=np.int64)
    np.add.at(load, first, g.size)
    np.add.at(load, last, -g.size)
    load = np.cumsum(load)[:sections]
    fullest = _range_max(load, first, last)
    return {
        "T": -fullest,
        "W": -(g.occupied_end - g.start).astype(np.int64),
        "C": -(last - first),
        "A": -(g.size * (g.occupied_end - g.start)),
        "L": -(g.occupied_end - g.start),
        "S": -g.size,
        "B": g.start.astype(np.int64),
        "E": -g.occupied_end.astype(np.int64),
    }


def _by_rank(g: InterferenceGraph, keys: dict[str, I64], order: str) -> I64:
    """The buffers by priority under ``order``: ties go to request order in MiniMalloc's
    orders (``MINIMALLOC_ORDERS``), as its solver breaks them, and to the earliest start,
    then request order, in the others."""
    ties = _ties(g, order)
    return np.lexsort((*ties, *(keys[ch] for ch in reversed(order)))).astype(np.int64)


def _ties(g: InterferenceGraph, order: str) -> tuple[I64, ...]:
    """The keys that break ties under ``order`` (``_by_rank``), the last the most
    significant."""
    n = np.arange(g.n, dtype=np.int64)
    return (n,) if order in MINIMALLOC_ORDERS else (n, g.start.astype(np.int64))


def _ranked(
    g: InterferenceGraph,
    keys: dict[str, I64],
    order: str,
    twins: I64 | None = None,
    by_rank: I64 | None = None,
) -> dict[str, I64]:
    """``by_rank`` (``_by_rank``, computed here when None), ``rank``, ``twin_prev``,
    ``pre_rank`` and ``post_rank`` under the priority ``order`` (``twins``: the graph's
    ``_twin_classes``, computed here when None).

    In MiniMalloc's orders a sub-problem of a decomposition is ranked afresh, as its solver
    does: "T" is then taken on the unplaced bytes left. ``pre_rank`` ranks by the keys before
    "T" (equal keys, equal rank) and ``post_rank`` by those after it, then the ties; an order
    without "T", or not MiniMalloc's, keeps its ranking (``post_rank`` empty)."""
    n = g.n
    ties = _ties(g, order)
    by_rank = _by_rank(g, keys, order) if by_rank is None else by_rank
    rank = np.empty(n, dtype=np.int64)
    rank[by_rank] = np.arange(n, dtype=np.int64)
    # Interchangeable free buffers are placed in rank order: each waits for the one before.
    twin_prev = _twin_prev(by_rank, _twin_classes(g) if twins is None else twins)
    head, _, tail = order.partition("T")
    pre_rank = _dense_rank([keys[ch] for ch in head], n)
    post_rank = (
        _dense_rank([*ties, *(keys[ch] for ch in reversed(tail))][::-1], n)
        if "T" in order and order in MINIMALLOC_ORDERS
        else np.zeros(0, dtype=np.int64)
    )
    return {
        "by_rank": by_rank,
        "rank": rank,
        "twin_prev": twin_prev,
        "pre_rank": pre_rank,
        "post_rank": post_rank,
    }


def _dense_rank(keys: list[I64], n: int) -> I64:
    """Each buffer's rank under ``keys`` (the first the most significant); equal keys, equal
    rank; no keys: all 0."""
    if not keys:
        return np.zeros(n, dtype=np.int64)
    columns = [np.asarray(k, dtype=np.int64) for k in keys]
    order = np.lexsort(columns[::-1])
    change = np.zeros(n, dtype=bool)
    for column in columns:
        ranked = column[order]
        change[1:] |= ranked[1:] != ranked[:-1]
    dense = np.empty(n, dtype=np.int64)
    dense[order] = np.cumsum(change)
    return dense


def _range_max(values: I64, first: I64, last: I64) -> I64:
    """Per pair the largest of ``values[first:last]`` (0 for an empty range; ``values`` are
    not negative), in one pass of ``np.maximum.reduceat``."""
    if first.size == 0:
        return np.zeros(0, dtype=np.int64)
    padded = np.append(values, 0).astype(np.int64)  # ``last`` may be one past the end
    bounds = np.empty(2 * first.size, dtype=np.int64)
    bounds[0::2], bounds[1::2] = first, last
    # A pair with first < last reduces over the range; an empty one gives one value, unused.
    found = np.maximum.reduceat(padded, bounds)[0::2]
    return np.where(last > first, found, 0).astype(np.int64)


def _twin_classes(g: InterferenceGraph) -> I64:
    """Per buffer its class of interchangeable buffers (the same start, occupied end, size and
    alignment); -1 for a pinned buffer, which has no twin."""
    classes = _dense_rank([g.start, g.occupied_end, g.size, g.alignment], g.n)
    classes[g.pinned >= 0] = -1
    return classes


def _twin_prev(by_rank: I64, twins: I64) -> I64:
    """Per buffer the free buffer of its class ranked just before it (``by_rank``), or -1."""
    n = int(by_rank.size)
    ranked = by_rank[twins[by_rank] >= 0]
    ranked = ranked[np.argsort(twins[ranked], kind="stable")]  # by class, rank order within
    classes = twins[ranked]
    follows = np.flatnonzero(classes[1:] == classes[:-1]) + 1
    twin_prev = np.full(n, -1, dtype=np.int64)
    twin_prev[ranked[follows]] = ranked[follows - 1]
    return twin_prev


def _rank_by_size(size: I64) -> I64:
    """Each buffer's rank by (size, index)."""
    n = int(size.size)
    by_size = np.lexsort((np.arange(n), size))
    rank = np.empty(n, dtype=np.int64)
    rank[by_size] = np.arange(n, dtype=np.int64)
    return rank


def _pin_lists(pinned: I64, adj_ptr: I64, adj: I64) -> tuple[I64, I64]:
    """Row pointers and columns: each buffer's pinned neighbours, taken from its neighbour
    lists (``adj_ptr``, ``adj``); empty rows without pins. (Their order does not matter: a
    candidate clears them all.)"""
    n = int(pinned.size)
    if not bool((pinned >= 0).any()):
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keep = pinned[adj] >= 0
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(adj_ptr))
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=n), out=ptr[1:])
    return ptr, adj[keep].astype(np.int64)


def _padding_lists(
    g: InterferenceGraph, first: I64, last: I64, sec_pin_ptr: I64
) -> tuple[I64, I64, I64, I64, I64]:
    """What the kernel needs to check, per section, that the unplaced buffers live there can
    stack with the padding their alignments force (``solvers._stack_kernel``).

    Returns the free non-empty buffers live in each section (CSR, those of one class
    adjacent; none where no section is checked), each buffer's class (alignment and size
    modulo the period, the largest alignment), and per section the period (0 where the check
    does not apply: no alignment can pad there, a pinned buffer is live there, or the graph
    is too large for the check's bit sets) and the most padding its buffers could ever need
    (a section with more slack is not checked).
    """
    sections = int(sec_pin_ptr.size) - 1
    step = granularity(g)
    free = np.flatnonzero((g.pinned < 0) & (g.size > 0))
    period = int(g.alignment[free].max(initial=1))
    cls = (g.alignment * period + g.size % period).astype(np.int64)
    # Each free buffer's padding counts in every section it is live in: a running sum of
    # where they come and go.
    pad = g.alignment[free] - np.minimum(g.alignment[free], step)
    change = np.zeros(sections + 1, dtype=np.int64)
    np.add.at(change, first[free], pad)
    np.add.at(change, last[free], -pad)
    max_pad = np.cumsum(change)[:sections].astype(np.int64)
    pinned_live = np.diff(sec_pin_ptr) > 0
    off = (max_pad == 0) | pinned_live | (g.n > STACK_MAX_BUFFERS)
    periods = np.where(off, 0, period).astype(np.int64)
    if not bool(periods.any()):
        # No section is checked, so the kernel reads no list: they stay empty.
        return (
            np.zeros(sections + 1, dtype=np.int64),
            np.zeros(0, dtype=np.int64),
            cls,
            periods,
            max_pad,
        )
    sec_of, owner = _sections_of(free, first, last)
    # By section, then class, then index: one sort of the section and the rank of the rest.
    by_class = np.lexsort((np.arange(g.n), cls)).astype(np.int64)
    rank = np.empty(g.n, dtype=np.int64)
    rank[by_class] = np.arange(g.n, dtype=np.int64)
    keys = np.sort(sec_of * max(1, g.n) + rank[owner])
    ptr = np.zeros(sections + 1, dtype=np.int64)
    np.cumsum(np.bincount(sec_of, minlength=sections), out=ptr[1:])
    cols = by_class[keys % max(1, g.n)].astype(np.int64)
    return ptr, cols, cls, periods, max_pad


def first_try_nodes(g: InterferenceGraph, most: float = float("inf")) -> int:
    """Nodes of the first try on ``g`` (``_Descent.first_try``) within ``most``: the
    published orders' and their banded twins', or the published orders' alone where that is
    all ``most`` affords (the twins then get none); 0 where not even those fit."""
    each = _first_share(g.n) * len(MINIMALLOC_ORDERS)
    return next((k for k in (2 * each, each) if k <= most), 0)


def _first_share(n: int) -> int:
    """Nodes each member of the first try may spend on a graph of ``n`` buffers."""
    return FIRST_NODES_PER_BUFFER * n


def node_budget(g: InterferenceGraph, time_limit: float) -> int:
    """Nodes the search may expand in ``time_limit`` seconds (deterministic per graph)."""
    sections = int(np.unique(np.concatenate([g.start, g.occupied_end])).size)
    work_per_node = g.n + sections + 1
    return max(MIN_NODES, int(time_limit * NODE_WORK_PER_SECOND / work_per_node))


def _published(m: _Member) -> bool:
    """Whether ``m`` searches in one of MiniMalloc's published orders (``MINIMALLOC_ORDERS``:
    the only instances that carry the sections' ends, besides their banded twins)."""
    return isinstance(m, _Instance) and not isinstance(m, _Banded) and m.end_at.size > 0


def _on_top(m: _Member) -> bool:
    """Whether ``m``'s share is paid on top of the canonical orders' shares: the skyline
    members' and the published orders' banded twins' (``_weights``)."""
    return isinstance(m, (_Skyline, _Banded))


def _weights(insts: Sequence[_Member], decision: bool = False) -> list[int]:
    """Per member a share exponent: member ``i`` may expand ``2 ** -w`` of a full share.
    MiniMalloc's published orders get a full share each (its round robin over them); the
    portfolio's other orders race beside them on ``2 ** -BREADTH_SHARE`` of one, and the
    skyline members and banded twins on half that again (``HALF_SHARE``), so the breadth
    costs a fraction of what the published orders spend and still wins where they are
    slow. Deciding the capacity a request asks for (``decision``), the banded twins on
    graphs of more than ``TWIN_FULL_MIN`` buffers take their order's full share
    (``_full_twin``)."""
    if not any(_published(m) for m in insts):
        return [HALF_SHARE if _on_top(m) else 0 for m in insts]
    return [
        0
        if _published(m) or (decision and _full_twin(m))
        else BREADTH_SHARE + (HALF_SHARE if _on_top(m) else 0)
        for m in insts
    ]


def _full_twin(m: _Member) -> bool:
    """Whether ``m`` is a banded twin on a graph of more than ``TWIN_FULL_MIN`` buffers:
    deciding the capacity asked for, it then races on its published order's full share
    (paid on top of the canonical orders'), the other decomposition of the same order,
    which decides instances of the challenging family's size that its order cannot. On
    smaller graphs, and minimising below a plan, it stays among the breadth: there most
    decisions are proofs or run out of nodes, and every share on top is paid in full."""
    return isinstance(m, _Banded) and int(m.size.size) > TWIN_FULL_MIN


def _allotment(
    insts: Sequence[_Member], nodes: int, decision: bool = False
) -> tuple[list[int], int]:
    """(each member's share exponent (``_weights``), the nodes of a full share): ``nodes``
    pays for the canonical orders' shares (the shares of the members ``_on_top`` come on
    top), or for every member's where there is none other."""
    weights = _weights(insts, decision)
    canonical = [w for m, w in zip(insts, weights, strict=True) if not _on_top(m)]
    return weights, int(nodes / sum(1.0 / (1 << w) for w in canonical or weights))


def _decide_staged(
    portfolio: _Portfolio,
    capacity: int,
    nodes: int,
    deadline: float = float("inf"),
    stop: Stop | None = None,
    decision: bool = False,
) -> tuple[int, I64, int]:
    """(status, offsets, nodes charged) at ``capacity`` bytes over the portfolio: first
    MiniMalloc's published orders alone, then their banded twins alone, on
    ``FIRST_NODES_PER_BUFFER`` nodes a buffer each (a search that seldom backtracks, in
    either decomposition, decides within them), then, if none decided, the whole
    portfolio's race on the nodes left. Where the first try (``_Descent.first_try``) ran
    those very decisions out of nodes at ``capacity``, they are charged, not run again."""
    charged = portfolio.ran_out_groups if portfolio.ran_out_at == capacity else 0
    used = 0
    for k, group in enumerate(_first_groups(portfolio)):
        quick = _first_share(int(group[0].size.size)) * len(group)
        if used + quick >= nodes // 2:
            break
        if k < charged:
            portfolio.ran_out_at = None  # once: a later decision of it would be the race's
            used += _all_out_charge(*_allotment(group, quick))
            continue
        status, offsets, more = _decide_all(group, capacity, quick, deadline, stop=stop)
        used += more
        if status != OUT_OF_NODES or (stop is not None and stop.stopped):
            return status, offsets, used
        if time.perf_counter() > deadline:
            return status, offsets, used
    members = [*portfolio.first, *portfolio.rest]
    status, offsets, more = _decide_all(
        members, capacity, nodes - used, deadline, stop=stop, decision=decision
    )
    return status, offsets, used + more


def _first_groups(portfolio: _Portfolio) -> list[list[_Instance]]:
    """The members of the first try, a group at a time, each member on the same nodes
    (``_weights`` gives the members of each group equal shares): the published orders, then
    their banded twins where there are any."""
    twins: list[_Instance] = list(portfolio.twins)
    return [list(portfolio.first), twins] if twins else [list(portfolio.first)]


def _decide_all(
    insts: Sequence[_Member],
    capacity: int,
    nodes: int,
    deadline: float = float("inf"),
    parallel: bool | None = None,
    stop: Stop | None = None,
    decision: bool = False,
) -> tuple[int, I64, int]:
    """(status, offsets, nodes charged) at ``capacity`` bytes over the branching orders.

    Member ``i`` may expand ``per >> w_i`` nodes (``_weights``), the canonical orders'
    shares adding up to ``nodes`` and the skyline members' shares on top. A member's
    *effort* is its nodes scaled back by its share (``used << w_i``); the member that
    decides (finds a plan, or proves there is none: any member's exhausted search is a
    proof) with the least effort wins, ties to the earlier one, and every member is charged
    that effort at its share (all shares when none decides). So the answer
    is the same whether the orders race on threads (``parallel``; by default when there are
    cores and the graph is large) or take turns on a doubling limit, MiniMalloc's remedy for
    heavy-tailed searches. The clock (``deadline``, a ``time.perf_counter`` value) is only a
    hard cap; ``stop`` ends the decision early (its answer then means nothing);
    ``decision``: the capacity is the one asked for (``_weights``).
    """
    k = len(insts)
    weights, per = _allotment(insts, nodes, decision)
    if per >> weights[-1] == 0:
        return _decide(insts[0], capacity, nodes)
    if parallel is None:
        parallel = k > 1 and (os.cpu_count() or 1) > 1 and int(insts[0].size.size) >= PARALLEL_MIN
    run = _race if parallel else _rounds
    # A member that repeats an earlier one would search the same nodes and tie with it, and
    # ties go to the earlier: it only runs in name, charged as if it ran.
    repeats = _repeats(insts)
    alone = [i for i in range(k) if repeats[i] < 0]
    members = [insts[i] for i in alone]
    ran = iter(run(members, capacity, per, [weights[i] for i in alone], deadline, stop))
    results: list[tuple[int, I64, int]] = []
    for earlier in repeats:  # a repeat names an earlier member: its result is already here
        results.append(next(ran) if earlier < 0 else results[earlier])
    decided = [
        (used << weights[i], i)
        for i, (status, _, used) in enumerate(results)
        if status != OUT_OF_NODES
    ]
    if not decided:
        return OUT_OF_NODES, results[0][1], _all_out_charge(weights, per)
    effort, i = min(decided)
    return results[i][0], results[i][1], sum(max(1, effort >> w) for w in weights)


def _all_out_charge(weights: Sequence[int], per: int) -> int:
    """The nodes ``_decide_all`` charges when no member decides, each member on its share
    (exponents ``weights``) of ``per`` nodes (``_allotment``)."""
    return sum(per >> w for w in weights)


def _repeats(insts: Sequence[_Member]) -> list[int]:
    """Per member the earlier member it repeats, or -1: the same kernel on arrays built
    together (the same graph: ``size`` is one array for all of them) with the same ranking,
    direction and valley rule searches the same nodes. Tilings have some: where every section
    is full, the fullest-section key ties everywhere, and orders that differ only by it rank
    alike."""
    seen: dict[tuple[object, ...], int] = {}
    repeats = []
    for i, m in enumerate(insts):
        key: tuple[object, ...] = (type(m), id(m.size), m.rank.tobytes())
        if isinstance(m, _Skyline):
            key += (m.valley, m.first.tobytes())
        earlier = seen.setdefault(key, i)
        repeats.append(-1 if earlier == i else earlier)
    return repeats


def _limit_others(caps: list[I64], weights: list[int], i: int, used: int) -> None:
    """Order ``i`` decided in ``used`` nodes: the others only win with less effort (earlier
    orders: as little)."""
    effort = used << weights[i]
    for j, cap in enumerate(caps):
        if j != i:
            cap[0] = min(int(cap[0]), (effort if j < i else effort - 1) >> weights[j])


def _rounds(
    insts: Sequence[_Member],
    capacity: int,
    per: int,
    weights: list[int],
    deadline: float,
    stop: Stop | None = None,
) -> list[tuple[int, I64, int]]:
    """The orders one after another, on a limit doubling up to ``per`` nodes (each order's
    share of it); ``stop`` ends the member running and the rounds."""
    caps = [np.array([per >> w], dtype=np.int64) for w in weights]
    _stop_on(stop, caps)
    limit = min(per, 2 * max(1, int(insts[0].size.size)))
    found = False  # a member found a plan: this capacity holds one
    while True:
        results = []
        for i, inst in enumerate(insts):
            nodes = min(limit >> weights[i], int(caps[i][0]))
            if found and isinstance(inst, _Instance) and nodes < _fewest_to_find(inst):
                # It can neither find a plan in so few nodes nor prove there is none.
                results.append((OUT_OF_NODES, inst.pinned.copy(), 0))
                continue
            result = _decide(inst, capacity, nodes, caps[i])
            if result[0] != OUT_OF_NODES:
                _limit_others(caps, weights, i, result[2])
                found = found or result[0] == FOUND
            results.append(result)
        if any(r[0] != OUT_OF_NODES for r in results) or limit >= per:
            return results
        if stop is not None and stop.stopped:
            return results
        if time.perf_counter() > deadline:
            note_cut()
            return results
        limit = min(per, 2 * limit)


def _fewest_to_find(inst: _Instance) -> int:
    """Nodes a canonical member needs at least to find a plan: a node places one free
    buffer."""
    return int((inst.pinned < 0).sum())


def _race(
    insts: Sequence[_Member],
    capacity: int,
    per: int,
    weights: list[int],
    deadline: float,
    stop: Stop | None = None,
) -> list[tuple[int, I64, int]]:
    """The orders side by side on threads (the kernel releases the GIL); the first to
    decide lowers the others' limits, and the deadline or ``stop`` stops them all. Each
    member's thread takes its share of the CPU (``_take_share``), so while more members than
    cores run, the CPU time each gets follows the nodes it may spend; on graphs of more than
    ``PACED_MIN`` buffers the members are paced too (``solvers._pace_kernel``)."""
    slack = max(PACE_SLACK, per >> PACE_SHIFT)  # effort by which a member counts as behind
    cores = usable_cores()
    caps = [member_cap(per >> w, i, w, slack, cores) for i, w in enumerate(weights)]
    _stop_on(stop, caps)
    # Each member's effort so far (``STOPPED`` once it has), for pacing; empty: not paced.
    paced = int(insts[0].size.size) > PACED_MIN and NATIVE_PAUSE
    efforts = np.zeros(len(insts) if paced else 0, dtype=np.int64)
    results: list[tuple[int, I64, int] | None] = [None] * len(insts)
    errors: list[BaseException] = []
    lock = threading.Lock()
    go = threading.Event()  # set once every member's thread has started

    def run(i: int) -> None:
        try:
            _take_share(weights[i])
            go.wait()
            result = _decide(insts[i], capacity, per >> weights[i], caps[i], efforts=efforts)
            if result[0] != OUT_OF_NODES:
                with lock:
                    _limit_others(caps, weights, i, result[2])
            results[i] = result
        except BaseException as exc:  # raised again on the caller's thread
            errors.append(exc)
        finally:
            if paced:
                efforts[i] = STOPPED  # nobody waits for it any more

    # A thread of its own per member: a thread whose share was lowered runs no other member.
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(insts))]
    for thread in threads:
        thread.start()
    go.set()  # every member starts at once: a thread started later would start behind
    for thread in threads:
        left = deadline - time.perf_counter()
        thread.join(None if left == float("inf") else max(0.0, left))
        if thread.is_alive():
            note_cut()
            for cap in caps:
                cap[0] = 0
            thread.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


def _stop_on(stop: Stop | None, caps: list[I64]) -> None:
    """Have ``stop`` lower every member's limit to 0 (at once if it is stopped already)."""

    def halt() -> None:
        for cap in caps:
            cap[0] = 0

    if stop is not None and not stop.attach(halt):
        halt()


def _take_share(weight: int) -> None:
    """Lower this thread's CPU share to ``2 ** -weight`` of a full one where the system lets a
    thread do so (Linux: a nice value per thread, ``NICE_PER_HALVING`` levels a halving);
    elsewhere every member keeps a full share, and only the wall time differs. (Only Linux
    takes a thread's id where ``setpriority`` takes a process id; elsewhere that number could
    name another process.)"""
    if weight <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        me = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, me) + NICE_PER_HALVING * weight
        os.setpriority(os.PRIO_PROCESS, me, min(nice, 19))
    except OSError:
        return


def _decide(
    inst: _Member,
    capacity: int,
    nodes: int,
    cap: I64 | None = None,
    stats: I64 | None = None,
    efforts: I64 | None = None,
) -> tuple[int, I64, int]:
    """(status, offsets, nodes used) of the kernel at ``capacity`` bytes; ``cap`` is a limit
    another thread may lower, then, racing, where the member's effort goes in ``efforts``
    (``solvers._pace_kernel``); ``stats`` (``STATS`` values) counts the padding checks, their
    steps, the nodes they pruned and the doomed children passed over (canonical kernel
    only)."""
    limit = member_cap(nodes) if cap is None else cap
    alone = _ALONE if efforts is None else efforts
    if isinstance(inst, _Skyline):
        status, offsets, used = decide_skyline(
            SkylineArrays(
                inst.size,
                inst.alignment,
                inst.first,
                inst.last,
                inst.start_ptr,
                inst.start_list,
                inst.twin_prev,
                inst.rank,
                inst.span_of,
                inst.span_ptr,
                inst.span_list,
            ),
            inst.valley,
            SKYLINE_DISCOUNT,
            capacity,
            nodes,
            limit,
            alone,
        )
        return int(status), offsets, int(used)
    status, offsets, used = decide(
        SearchArrays(*inst),
        capacity,
        nodes,
        limit,
        alone,
        np.zeros(STATS, dtype=np.int64) if stats is None else stats,
    )
    return int(status), offsets, int(used)


def _load(insts: Sequence[_Member]) -> None:
    """Call each kernel once here, on no node, before any clock starts: its first call in a
    process loads or compiles it, with the request's clock paused in this thread. On the
    race's threads that time would count against the race's deadline and could stop every
    member, so the first request after an install would get another plan than the same
    request later. The skyline kernel is loaded too where no member of ``insts`` uses it (the
    portfolio's skyline members are built only when the published orders leave a capacity
    undecided): the warm-up (``planner warm``, the service's start) plans small requests
    only, and without it the first large request after an install would compile it
    (seconds, with its clock paused, so that request takes that much longer)."""
    members = {type(m): m for m in insts}
    canonical = members.get(_Instance)
    if _Skyline not in members and _Skyline not in _LOADED and isinstance(canonical, _Instance):
        members[_Skyline] = _skyline(canonical, FEWEST, reverse=False)
    for kind, inst in members.items():
        if not ready(decide_skyline if kind is _Skyline else decide):
            _decide(inst, 0, 1)  # a loaded kernel is not called again (its call costs a node)
    _LOADED.update(members)


_LOADED: set[type] = set()  # the member kinds whose kernel this process has called


def exhausts(
    g: InterferenceGraph,
    capacity: int,
    nodes: int,
    orders: tuple[str, ...],
    deadline: float = float("inf"),
) -> tuple[bool, int]:
    """(whether the search proves that no plan of ``g`` fits within ``capacity`` bytes, nodes
    used) within ``nodes`` nodes: the canonical kernel on ``orders`` in turns, on this
    thread. The clock (``deadline``, a ``time.perf_counter`` value) is only a hard cap."""
    status, _, used = _decide_all(_instances(g, orders), capacity, nodes, deadline, parallel=False)
    return status == EXHAUSTED, used


def decide_orders(
    g: InterferenceGraph,
    capacity: int,
    orders: tuple[str, ...],
    nodes: int,
    deadline: float = float("inf"),
) -> tuple[int, I64, int]:
    """(status, offsets, nodes used) of one decision at ``capacity`` bytes by the canonical
    kernel on ``orders`` in turns on this thread, within ``nodes`` nodes (benchmarks compare
    one order at a time with MiniMalloc's). ``deadline`` (``time.perf_counter``) is a hard
    cap."""
    return _decide_all(_instances(g, orders), capacity, nodes, deadline, parallel=False)


def _pins_clash(g: InterferenceGraph) -> bool:
    """Whether two conflicting pinned buffers share a byte: then no plan exists at all."""
    pins = np.flatnonzero(g.pinned >= 0)
    for k, i in enumerate(pins.tolist()):
        for j in pins[k + 1 :].tolist():
            live = g.start[i] < g.occupied_end[j] and g.start[j] < g.occupied_end[i]
            lo_i, lo_j = int(g.pinned[i]), int(g.pinned[j])
            if live and lo_i < lo_j + g.size[j] and lo_j < lo_i + g.size[i]:
                return True
    return False


def solve_search(
    g: InterferenceGraph,
    *,
    capacity: int | None,
    lower_bound: int,
    hint: I64 | None,
    time_limit: float,
    upper: int | None = None,
    nodes: int | None = None,
    on_progress: Progress | None = None,
    stop: Stop | None = None,
    tolerance: int = 0,
    bound_only: bool = False,
    above_bound: bool = False,
    first_try: bool = False,
) -> Solution:
    """Smallest arena (bytes) within ``capacity``, or a proof that none fits.

    ``hint`` is a valid plan (request order) to improve on; ``upper`` an arena (bytes) the
    caller already has, so only smaller ones are searched. ``nodes`` overrides the node
    budget derived from ``time_limit`` (seconds). ``on_progress`` sees each decision's news.
    ``bound_only``: decide only the lowest capacity worth trying (the lower bound, where a
    plan is optimal) with every node, and stop there: no bisection above it.
    ``above_bound``: the bound was left undecided by a run before; bisect above it at once.
    ``first_try``: decide only the lowest capacity worth trying, by MiniMalloc's published
    orders' first try alone (``FIRST_NODES_PER_BUFFER`` nodes a buffer each, within
    ``nodes``): a cheap look for a plan at the bound before anything else runs.
    ``tolerance``: bytes; the search stops once its best plan is within them of the bound it
    has proved (``options.gap_tolerance``). ``stop`` may end the search early from another
    thread (then the result means nothing). Satisfies ``solvers.exact.ExactMethod``.
    """
    if g.n == 0:
        return Solution("search", np.zeros(0, np.int64), 0, 0, True)
    # Every arena is a multiple of ``step``: only multiples are decided.
    step = granularity(g)
    lo = _lowest_arena(g, lower_bound, step)
    if _pins_clash(g) or (capacity is not None and lo > capacity):
        return Solution("search", None, None, lo, False, unfit(g))
    best, best_arena = _hinted(g, hint, capacity)
    cap = None if capacity is None else capacity // step * step  # the highest arena allowed
    search = _Descent(
        g=g,
        step=step,
        best=best,
        best_arena=best_arena,
        bound=lo,
        low=lo,
        high=_ceiling(g, step, cap, (best_arena, upper)),
        left=node_budget(g, time_limit) if nodes is None else nodes,
        portfolio=_portfolio_of(g),
        tolerance=tolerance,
        stop=stop,
        on_progress=on_progress,
    )
    if first_try and search.first_fits():  # no member built, no kernel called
        return search.solution(capacity)
    _load(search.portfolio.first[:1])  # one canonical member loads its kernel
    search.clock = time.perf_counter()
    search.wall = wall_limit(time_limit)  # seconds: the clock's cap; the node budget decides
    descend = g.n > DESCEND_MIN
    if first_try:
        search.first_try()
        return search.solution(capacity)
    if not search.open(cap, descend and capacity is not None, above_bound, bound_only):
        return Solution("search", None, None, search.bound, False, unfit(g))
    search.bisect(descend)
    return search.solution(capacity)


def _lowest_arena(g: InterferenceGraph, lower_bound: int, step: int) -> int:
    """The lowest arena (bytes) worth deciding: no plan is lower than the lower bound, a
    pinned top or a single buffer; a multiple of ``step``."""
    free = g.pinned < 0
    lo = max(lower_bound, int((g.pinned + g.size)[~free].max(initial=0)), int(g.size.max()))
    return round_up(lo, step)


def _hinted(
    g: InterferenceGraph, hint: I64 | None, capacity: int | None
) -> tuple[I64 | None, int | None]:
    """(offsets, arena) of the hint where it fits within ``capacity``, else (None, None)."""
    if hint is not None:
        hinted = arena_of(g, hint)
        if capacity is None or hinted <= capacity:
            return hint.astype(np.int64).copy(), hinted
    return None, None


def _ceiling(
    g: InterferenceGraph, step: int, cap: int | None, known: tuple[int | None, ...]
) -> int:
    """Highest capacity (bytes) worth deciding: below every arena ``known``, within ``cap``,
    a multiple of ``step``."""
    free = g.pinned < 0
    ceiling = int((g.size + g.alignment).sum()) + int((g.pinned + g.size)[~free].max(initial=0))
    for arena in known:
        if arena is not None:
            ceiling = min(ceiling, arena - 1)
    if cap is not None:
        ceiling = min(ceiling, cap)
    return ceiling // step * step


@dataclass
class _Descent:
    """A search's state as it narrows the capacities worth deciding, ``low`` to ``high``
    (bytes): the best plan so far, the bound proved, the nodes left and the portfolio."""

    g: InterferenceGraph
    step: int  # bytes: every arena decided is a multiple
    best: I64 | None
    best_arena: int | None
    bound: int  # bytes: every capacity below it is proved impossible
    low: int  # lowest capacity not yet tried
    high: int  # highest capacity worth trying
    left: int  # nodes
    portfolio: _Portfolio
    tolerance: int
    stop: Stop | None
    on_progress: Progress | None
    clock: float = 0.0  # ``time.perf_counter`` at the start
    wall: float = float("inf")  # seconds: the clock's cap

    def attempt(self, target: int, last: bool, part: int = 2, decision: bool = False) -> int:
        """Decide ``target`` on ``1 / part`` of the nodes left (all if ``last``);
        ``decision``: ``target`` is the capacity asked for (``_weights``).

        A plan found becomes the best. Returns the kernel's status.
        """
        share = self.left if last else max(1, self.left // part)
        status, offsets, used = _decide_staged(
            self.portfolio, target, share, self.clock + self.wall, self.stop, decision
        )
        return self._record(target, status, offsets, used)

    def open(self, cap: int | None, descend: bool, above_bound: bool, bound_only: bool) -> bool:
        """The first decisions: a plan within the capacity ``cap`` where there is none yet
        (False: proved that none fits), then the bound (on ``BOUND_PART`` of the nodes left
        where ``descend``, else half; all of them where ``bound_only``, and nothing above it
        then), unless ``above_bound`` (the bound was left undecided by a run before)."""
        if (
            cap is not None
            and self.best is None
            and self.low <= cap == self.high
            and self.time_left()
            and not self.first_plan(cap)
        ):
            return False
        if above_bound:
            self.low += self.step
        elif self.low <= self.high and self.time_left():
            part = BOUND_PART if descend else 2
            self.try_bound(last=bound_only or self.low == self.high, part=part)
            if bound_only:
                self.high = self.low - self.step
        return True

    def solution(self, capacity: int | None) -> Solution:
        """What the search found and proved, as the solvers' result."""
        infeasible = capacity is not None and self.bound > capacity
        proved = self.best_arena is not None and self.best_arena <= self.bound
        return Solution(
            "search", self.best, self.best_arena, self.bound, proved, unfit(self.g, infeasible)
        )

    def first_try(self) -> None:
        """Look for a plan at the lowest capacity worth trying, after ``first_fits`` missed
        it: MiniMalloc's published orders' searches in turn, then their banded twins', each
        on ``FIRST_NODES_PER_BUFFER`` nodes a buffer (within the nodes left), until one
        decides. Where each runs its full share out of nodes, the graph keeps the
        portfolio (``InterferenceGraph.memo``) with that capacity: a later search of the
        request charges those decisions instead of running them again
        (``_decide_staged``)."""
        if self.low > self.high or not self.time_left():
            return
        share = _first_share(self.g.n)
        spent = 0  # groups whose every member ran its full share out of nodes
        for group in _first_groups(self.portfolio):
            full = 0  # members of the group that did
            for inst in group:
                nodes = min(self.left, share)
                if nodes <= 0 or time.perf_counter() - self.clock >= self.wall:
                    break
                status, offsets, used = _decide(inst, self.low, nodes)
                if self._record(self.low, status, offsets, used) != OUT_OF_NODES:
                    return
                full += nodes == share
            if full < len(group):
                break
            spent += 1
        if spent and (self.stop is None or not self.stop.stopped):
            self.portfolio.ran_out_at = self.low
            self.portfolio.ran_out_groups = spent
            self.g.memo[_MEMO] = self.portfolio

    def first_fits(self) -> bool:
        """Whether first fit in the ranking of one of MiniMalloc's published orders (each
        buffer in rank order at the lowest gap its placed neighbours leave: one pass, no
        node, no member built) gives a plan within the lowest capacity worth trying; that
        plan is then the best."""
        if self.low > self.high:
            return False
        tree = uses_tree(self.g)
        for i in range(len(self.portfolio.first)):
            offsets = fit_in_order(self.g, self.portfolio.ranking(i), tree=tree)
            if arena_of(self.g, offsets) <= self.low:
                self._record(self.low, FOUND, offsets, 0)
                return True
        return False

    def _record(self, target: int, status: int, offsets: I64, used: int) -> int:
        """What deciding ``target`` gave: the nodes spent, a plan found (the best now) or
        the capacity proved impossible (the bound rises past it). Returns ``status``."""
        self.left -= used
        if status == FOUND:
            self.best, self.best_arena = offsets, arena_of(self.g, offsets)
        elif status == EXHAUSTED:
            self.bound = max(self.bound, target + self.step)
        if self.on_progress is not None and status != OUT_OF_NODES:
            self.on_progress(self.best_arena, self.bound)
        return status

    def time_left(self) -> bool:
        """Whether to decide another capacity: nodes and time left, no stop, the best plan
        not yet within ``tolerance`` of the bound."""
        if self.left <= 0 or (
            self.best_arena is not None and self.best_arena - self.bound <= self.tolerance
        ):
            return False
        if self.stop is not None and self.stop.stopped:
            return False
        if time.perf_counter() - self.clock < self.wall:
            return True
        note_cut()
        return False

    def first_plan(self, cap: int) -> bool:
        """No plan within the capacity ``cap`` yet: first get one, or prove there is none
        (False)."""
        if self.attempt(cap, last=True, decision=True) == EXHAUSTED:
            return False
        if self.best_arena is not None:
            self.high = min(self.high, self.best_arena - self.step)
        elif self.low == cap:
            self.low += self.step  # undecided at the only capacity worth trying
        return True

    def try_bound(self, last: bool, part: int) -> None:
        """Decide the lowest capacity worth trying, where a plan is optimal."""
        self.attempt(self.low, last=last, part=part)
        self.low += self.step
        if self.best_arena is not None:
            self.high = min(self.high, self.best_arena - self.step)

    def bisect(self, descend: bool) -> None:
        """Decide capacities between ``low`` and ``high`` until they meet or time is up."""
        step = self.step
        while self.low <= self.high and self.time_left():
            # Large graphs: a capacity a quarter of the way down from the best arena, where
            # plans are easier to find than at the middle (which mostly runs out of nodes
            # there).
            fall = (self.high - self.low) // step // (DESCEND_PART if descend else 2) * step
            mid = self.high - fall if descend else self.low + fall
            status = self.attempt(mid, last=self.low == self.high)
            if status == FOUND and self.best_arena is not None:
                self.high = self.best_arena - step
            else:
                self.low = mid + step  # proved impossible, or undecided within its share
