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
    req, g = ctx.req, ctx.reference
    arena = attempt.arena
    notes: list[Diagnostic] = list(ctx.notes)
    capacity = req.effective_capacity
    if status == "infeasible" and attempt.result.infeasible is not None:
        assert capacity is not None
        count = len(attempt.result.infeasible)
        notes.append(
            Diagnostic(
                level="error",
                code="over_capacity",
                message=f"proved: the {count} buffers in the certificate cannot be placed "
                f"together within the capacity of {capacity}; no placement exists",
            )
        )
    elif status == "infeasible":
        assert capacity is not None
        plain = g.lower_bound.bytes > capacity
        bound = g.lower_bound if plain else g.aligned_bound
        padded = "" if plain else " with their alignment padding"
        notes.append(
            Diagnostic(
                level="error",
                code="over_capacity",
                message=f"{bound.bytes} bytes are live at point {bound.point}{padded}, "
                f"over the capacity of {capacity}; no placement exists",
            )
        )
    elif status == "unknown":
        assert capacity is not None
        notes.append(
            Diagnostic(
                level="warning",
                code="over_capacity",
                message=f"the best plan found needs {arena} bytes, {arena - capacity} over the "
                f"capacity of {capacity}; the lower bound is {ctx.bound.bytes}",
            )
        )
    for note in attempt.result.notes:
        notes.append(Diagnostic(level="warning", code="solver_unavailable", message=note))
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
    if attempt.aliases:
        pairs = [f"{g.ids[b]} on {g.ids[a]}" for a, b in attempt.aliases]
        many = len(pairs) > 1
        notes.append(
            Diagnostic(
                level="info",
                code="thread_local_alias",
                message=f"{len(pairs)} reuse{'s' if many else ''} with no barrier "
                f"({_listed(pairs)}): each shared byte is touched by one and the same thread "
                "in both",
            )
        )
    notes.extend(_footprint_notes(ctx))
    if ctx.owners is not None:
        notes.extend(budget_diagnostics(req))
    if len(notes) > MAX_DIAGNOSTICS:
        dropped = len(notes) - MAX_DIAGNOSTICS + 1
        notes = [
            *notes[: MAX_DIAGNOSTICS - 1],
            Diagnostic(level="info", code="truncated", message=f"{dropped} more notes omitted"),
        ]
    return notes


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
