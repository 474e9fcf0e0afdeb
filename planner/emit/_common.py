"""What the emitters share: identifiers from buffer ids, and the plan in request order.

Buffer ids (and the request's name) are free-form text: compilers use ``A_s``, ``T3.smem``,
``buf[2]``, ``%alloc_4``. They reach emitted code in exactly two forms:

- an identifier (``identifiers``): ASCII letters, digits and single underscores, starting
  with a letter, never a keyword, unique in the output; derived deterministically from the
  id, so the same request gives the same text;
- a quoted label inside a ``//`` comment (``quoted``): the id as a JSON string with every
  non-ASCII or control character escaped, so it can end no line and open no code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from planner.core.dtypes import DTYPES, DType
from planner.core.models import Plan, PlanRequest

__all__ = [
    "Placed",
    "barrier_notes",
    "identifiers",
    "max_alignment",
    "placed",
    "quoted",
    "status_warning",
]

# C++ keywords and CUDA built-ins a buffer id must not become.
_RESERVED = frozenset(
    """alignas alignof asm auto bool break case catch char char16_t char32_t char8_t class
    const constexpr const_cast continue decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept nullptr operator private protected public register
    reinterpret_cast return short signed sizeof static static_assert static_cast struct
    switch template this thread_local throw true try typedef typeid typename union unsigned
    using virtual void volatile wchar_t while threadIdx blockIdx blockDim gridDim warpSize
    main NULL assert errno offsetof""".split()  # noqa: SIM905 - a word list reads better as text
)
_BYTE = DTYPES["u8"]


@dataclass(frozen=True)
class Placed:
    """One buffer with its placement, in request order."""

    id: str
    name: str  # a C identifier, unique in the plan
    offset: int  # bytes from the arena base (or the workspace base, when global)
    size: int  # bytes
    start: int  # program point
    end: int  # program point, half-open
    memory: str  # "shared" or "global"
    dtype: DType


def identifiers(ids: list[str], taken: set[str]) -> list[str]:
    """One C identifier per id: characters other than ASCII letters and digits become ``_``
    (a run of them one ``_``: a double underscore is reserved in C++), a leading digit or
    underscore gets a ``b`` in front, keywords and ``taken`` names get ``_``; clashes get a
    number. Unique, valid C and MLIR names whatever the ids hold."""
    used = set(taken)
    names: list[str] = []
    for ident in ids:
        name = re.sub(r"[^A-Za-z0-9]+", "_", ident, flags=re.ASCII) or "b"
        if name[0].isdigit() or name[0] == "_":
            name = "b" + name
        if name in _RESERVED:
            name += "_"
        base, k = name.rstrip("_") + "_", 2  # "b_" numbers as "b_2", never "b__2"
        while name in used:
            name = f"{base}{k}"
            k += 1
        used.add(name)
        names.append(name)
    return names


def quoted(text: str) -> str:
    """``text`` as a JSON string of printable ASCII: safe inside a ``//`` comment (no line
    break, no trailing backslash to splice the next line)."""
    return json.dumps(text, ensure_ascii=True)


def placed(request: PlanRequest, plan: Plan, taken: set[str]) -> list[Placed]:
    """Every buffer with its placement, in request order."""
    where = {p.id: p for p in plan.placements}
    names = identifiers([b.id for b in request.buffers], taken)
    return [
        Placed(
            id=b.id,
            name=name,
            offset=where[b.id].offset,
            size=b.size,
            start=b.start,
            end=b.end,
            memory=where[b.id].memory,
            dtype=DTYPES[b.dtype] if b.dtype is not None else _BYTE,
        )
        for b, name in zip(request.buffers, names, strict=True)
    ]


def barrier_notes(request: PlanRequest, plan: Plan) -> list[tuple[int, str]]:
    """The points that need a barrier, each with why: existing, inserted, or the caller's."""
    existing = set(plan.barriers.existing)
    inserted = set(plan.barriers.inserted)
    notes: list[tuple[int, str]] = []
    for p in sorted(set(plan.barriers.required) | inserted):
        if p in inserted:
            why = "inserted by the plan: add it"
        elif p in existing:
            why = "existing: the plan relies on it"
        else:
            why = "the caller must synchronize here (sync 'none')"
        notes.append((p, why))
    return notes


def status_warning(plan: Plan) -> str | None:
    """A warning line for a plan that does not fit, else None."""
    if plan.status in ("optimal", "feasible"):
        return None
    return (
        f"WARNING: status {plan.status}: this plan does not fit the capacity of "
        f"{plan.capacity} bytes"
    )


def max_alignment(request: PlanRequest) -> int:
    """The arena base alignment: the largest alignment in the request (bytes)."""
    return max([request.alignment, *(request.alignment_of(b) for b in request.buffers)])
