"""What a plan says about itself: why it is over the capacity, which barriers were added
and why, which buffers alias, what footprints saved, and what the access budgets cut."""

from __future__ import annotations

from collections.abc import Sequence

from planner.core.access import budget_diagnostics
from planner.core.models import Diagnostic, Status
from planner.core.patterns import block_slice
from planner.pipeline.context import Context
from planner.pipeline.placement import Placement
from planner.pipeline.schedule import Kind

__all__ = ["MAX_DIAGNOSTICS", "diagnostics"]

MAX_DIAGNOSTICS = 50


def diagnostics(ctx: Context, attempt: Placement, status: Status, chosen: bool) -> list[Diagnostic]:
    """The notes of a straight-line plan: the context's, why it is over the capacity, what
    the solvers lacked, the barriers and aliases it relies on, the footprints and the access
    budgets; at most ``MAX_DIAGNOSTICS``."""
    req = ctx.req
    notes: list[Diagnostic] = list(ctx.notes)
    notes.extend(_capacity_notes(ctx, attempt, status))
    for note in attempt.result.notes:
        notes.append(Diagnostic(level="warning", code="solver_unavailable", message=note))
    notes.extend(_barrier_notes(ctx, attempt, chosen))
    notes.extend(_alias_notes(ctx, attempt))
    notes.extend(_footprint_notes(ctx))
    if ctx.owners is not None:
        notes.extend(budget_diagnostics(req))
    return _truncated(notes)


def _capacity_notes(ctx: Context, attempt: Placement, status: Status) -> list[Diagnostic]:
    """Why the plan is over the capacity: proved by a set of buffers or by the live bytes at
    a point (infeasible), or not proved (unknown)."""
    capacity = ctx.req.effective_capacity
    g = ctx.reference
    if status == "infeasible" and attempt.result.infeasible is not None:
        assert capacity is not None
        count = len(attempt.result.infeasible)
        message = (
            f"proved: the {count} buffers in the certificate cannot be placed "
            f"together within the capacity of {capacity}; no placement exists"
        )
        return [Diagnostic(level="error", code="over_capacity", message=message)]
    if status == "infeasible":
        assert capacity is not None
        plain = g.lower_bound.bytes > capacity
        bound = g.lower_bound if plain else g.aligned_bound
        padded = "" if plain else " with their alignment padding"
        message = (
            f"{bound.bytes} bytes are live at point {bound.point}{padded}, "
            f"over the capacity of {capacity}; no placement exists"
        )
        return [Diagnostic(level="error", code="over_capacity", message=message)]
    if status == "unknown":
        assert capacity is not None
        arena = attempt.arena
        message = (
            f"the best plan found needs {arena} bytes, {arena - capacity} over the "
            f"capacity of {capacity}; the lower bound is {ctx.bound.bytes}"
        )
        return [Diagnostic(level="warning", code="over_capacity", message=message)]
    return []


def _barrier_notes(ctx: Context, attempt: Placement, chosen: bool) -> list[Diagnostic]:
    """Why the chosen plan adds no barrier under "insert", or which barriers it adds."""
    req = ctx.req
    notes: list[Diagnostic] = []
    insert = req.options.sync == "insert"
    if chosen and insert and not attempt.barriers.inserted and attempt.kind is not Kind.POLICY:
        cap = req.options.max_new_barriers
        notes.append(
            Diagnostic(
                level="info",
                code="no_new_barriers",
                message="planned on barrier-extended lifetimes: inserting barriers would "
                "not make the arena smaller"
                if cap is None or cap > 0
                else "planned on barrier-extended lifetimes to respect max_new_barriers",
            )
        )
    inserted = attempt.barriers.inserted
    if inserted:
        many = len(inserted) > 1
        notes.append(
            Diagnostic(
                level="info",
                code="barrier_inserted",
                message=f"{len(inserted)} barrier{'s' if many else ''} inserted at point"
                f"{'s' if many else ''} {_listed(inserted)} so that buffers can reuse bytes "
                f"freed before {'them' if many else 'it'}",
            )
        )
    return notes


def _alias_notes(ctx: Context, attempt: Placement) -> list[Diagnostic]:
    """The reuses with no barrier, whose shared bytes one and the same thread touches."""
    if not attempt.aliases:
        return []
    ids = ctx.reference.ids
    pairs = [f"{ids[b]} on {ids[a]}" for a, b in attempt.aliases]
    many = len(pairs) > 1
    message = (
        f"{len(pairs)} reuse{'s' if many else ''} with no barrier "
        f"({_listed(pairs)}): each shared byte is touched by one and the same thread in both"
    )
    return [Diagnostic(level="info", code="thread_local_alias", message=message)]


def _truncated(notes: list[Diagnostic]) -> list[Diagnostic]:
    """At most ``MAX_DIAGNOSTICS`` notes, the last saying how many more were left out."""
    if len(notes) <= MAX_DIAGNOSTICS:
        return notes
    dropped = len(notes) - MAX_DIAGNOSTICS + 1
    return [
        *notes[: MAX_DIAGNOSTICS - 1],
        Diagnostic(level="info", code="truncated", message=f"{dropped} more notes omitted"),
    ]


LISTED = 20  # items a grouped note names before it counts the rest


def _listed(items: Sequence[object]) -> str:
    """The first ``LISTED`` items, comma-separated, then how many more."""
    shown = ", ".join(str(x) for x in items[:LISTED])
    rest = len(items) - LISTED
    return f"{shown} and {rest} more" if rest > 0 else shown


def _footprint_notes(ctx: Context) -> list[Diagnostic]:
    """Per buffer indexed by blockIdx: bytes each block declares but never touches."""
    notes: list[Diagnostic] = []
    for f in ctx.footprints:
        notes.append(
            Diagnostic(
                level="info",
                code="footprint_shrunk",
                message=f"{f.id}: each block touches {f.planned} of its {f.declared} declared "
                f"bytes; planned {f.planned}, the compiler subtracts index_base",
            )
        )
    if ctx.req.options.shrink:
        return notes
    for b in ctx.req.buffers:
        part = block_slice(ctx.req, b)
        if part is not None and part.size < b.size:
            notes.append(
                Diagnostic(
                    level="info",
                    code="untouched_bytes",
                    message=f"{b.id}: each block touches only {part.size} of its {b.size} "
                    f"declared bytes; options.shrink would save {b.size - part.size} bytes",
                )
            )
    return notes
