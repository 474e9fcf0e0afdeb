"""The plan the planner returns (docs/design.md, Wire format). A pure function of its request.

Read from the wire strictly, like a request (``planner.core.io.parse_plan``, ``/validate``,
``/emit``): an integer field takes only a JSON integer, a boolean only ``true``/``false``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Barriers",
    "Certificate",
    "Diagnostic",
    "Footprint",
    "GraphStats",
    "Launch",
    "ParetoPoint",
    "Placement",
    "Plan",
    "SolverAttempt",
    "SolverInfo",
    "Status",
    "shared_placements",
]

Status = Literal["optimal", "feasible", "infeasible", "unknown"]


def _absent(value: object) -> bool:
    return value is None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Placement(_Model):
    """Where one buffer lives."""

    id: str
    """The buffer's id in the request."""
    offset: int  # bytes from the arena base
    """Bytes from the arena base (shared) or the workspace base (global)."""
    size: int  # bytes
    """Bytes planned for the buffer (its footprint when shrunk)."""
    memory: Literal["shared", "global"] = "shared"
    """"shared", or "global" for a buffer spilled to the global-memory workspace."""


def shared_placements(ids: list[str], offsets: list[int], sizes: list[int]) -> list[Placement]:
    """Placements in shared memory from checked values, built as ``model_construct`` builds
    them (the same models, fields set and dumps) without its per-call work: a million
    placements take a second, not twenty."""
    new = Placement.__new__
    put = object.__setattr__
    fields = frozenset(("id", "offset", "size", "memory"))
    out = []
    for ident, offset, size in zip(ids, offsets, sizes, strict=True):
        placement = new(Placement)
        put(
            placement, "__dict__", {"id": ident, "offset": offset, "size": size, "memory": "shared"}
        )
        put(placement, "__pydantic_fields_set__", set(fields))
        put(placement, "__pydantic_extra__", None)
        put(placement, "__pydantic_private__", None)
        out.append(placement)
    return out


class Barriers(_Model):
    """Block-wide barriers, by program point; each runs before the accesses at its point."""

    existing: list[int] = Field(default_factory=list)  # from the request, sorted
    """The request's barriers, sorted program points."""
    inserted: list[int] = Field(default_factory=list)  # new ones the plan needs
    """Program points of the barriers the plan adds (sync "insert")."""
    required: list[int] = Field(default_factory=list)  # the fewest the plan relies on
    """The fewest barriers (points) the plan relies on; under sync "none", the points the caller
    must synchronize at.
    """
    # Only for requests with loops, branches or ranges (absent otherwise, so older plans read
    # as they did): barrier counts of the kernel as planned, existing and inserted together.
    static: int | None = Field(default=None, exclude_if=_absent)
    """Barrier points in the kernel as planned (existing and inserted); only for requests with
    loops, branches or ranges.
    """
    executions: int | None = Field(default=None, exclude_if=_absent)
    """Barrier executions of one block: each point counts the product of the trips of the loops
    around it (unknown trips count 1000); only for requests with loops, branches or ranges.
    """
    required_executions: int | None = Field(default=None, exclude_if=_absent)
    """Executions of the required barriers, counted the same way; only for requests with loops,
    branches or ranges.
    """


class Footprint(_Model):
    """Per-block slice of a buffer indexed by blockIdx (planned with ``options.shrink``).

    Block ``(bx, by, bz)`` touches declared bytes ``[base, base + planned)`` with
    ``base = index_base["blockIdx.x"] * bx + ... + index_base["constant"]``, all in bytes;
    the compiler subtracts ``base`` from every byte address of the buffer.
    """

    id: str
    """The buffer's id."""
    declared: int  # bytes
    """Bytes the request declared."""
    planned: int  # bytes
    """Bytes one block touches, as planned."""
    index_base: dict[str, int] = Field(default_factory=dict)  # bytes per block index, constant
    """Bytes per unit of each blockIdx variable, and "constant": block (bx, by, bz) touches
    declared bytes from sum(index_base[v] * v) + constant on.
    """


class Launch(_Model):
    """What the kernel launch needs for this arena."""

    dynamic_smem_bytes: int
    """Dynamic shared memory to launch with, in bytes (the arena)."""
    requires_opt_in: bool  # above the 48 KB static limit
    """True above the 48 KB static limit: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) is
    needed.
    """
    blocks_per_sm: int | None = None  # limited by shared memory; None without a target
    """Blocks per SM that shared memory allows; null without a target."""
    naive_blocks_per_sm: int | None = None  # the same for naive_bytes: what reuse wins
    """The same for naive_bytes (no reuse): what the plan's reuse wins; null without a target."""


class SolverAttempt(_Model):
    """One method the portfolio ran and the arena it reached."""

    name: str
    """The method tried."""
    arena_bytes: int
    """The arena its plan needs, in bytes."""


class SolverInfo(_Model):
    """Which method won and what is proved."""

    name: str
    """The method whose plan is returned."""
    proved_optimal: bool
    """True when no plan of this request needs fewer bytes."""
    bound: int  # bytes; no plan can use fewer
    """Bytes no plan of this request can do with (a proved lower bound)."""
    gap: float  # (arena - bound) / bound, 0 when bound is 0
    """(arena_bytes - bound) / bound; 0 when proved optimal or the bound is 0."""
    tried: list[SolverAttempt] = Field(default_factory=list)
    """Every method tried and its arena, in order."""


class GraphStats(_Model):
    """Size of the interference graph."""

    buffers: int
    """Buffers in the request."""
    live_edges: int  # pairs live at the same time
    """Pairs of buffers live at the same time."""
    hazard_edges: int  # sequential pairs that may not share bytes under the sync policy
    """Pairs live one after the other that may not share bytes under the sync policy."""
    components: int
    """Connected components of the interference graph."""


class Diagnostic(_Model):
    """A note for the compiler engineer."""

    level: Literal["info", "warning", "error"]
    """"info", "warning" or "error"."""
    code: str
    """Stable machine-readable code, e.g. reuse_after_barrier."""
    message: str
    """What it means, for a person."""


class Certificate(_Model):
    """Why no plan fits: at ``point`` the ``buffers`` need ``live_bytes`` > ``capacity``."""

    reason: str
    """Why no plan fits, in words."""
    capacity: int
    """The capacity in bytes."""
    live_bytes: int
    """Bytes the named buffers need together, over capacity."""
    point: int | None = None
    """The program point where they are live together; null for a set that cannot be stacked at any
    one point.
    """
    buffers: list[str] = Field(default_factory=list)
    """Ids of a small set of buffers that cannot fit together."""


class ParetoPoint(_Model):
    """One non-dominated trade-off of sync "insert": ``arena_bytes`` for ``new_barriers``."""

    arena_bytes: int
    """Arena of this plan, in bytes."""
    new_barriers: int
    """Barriers this plan inserts."""
    plan: Plan  # the full plan, its own pareto list empty; described by Plan's docstring


class Plan(_Model):
    """Offsets for every buffer, the barriers they rely on, and what is proved about them."""

    name: str
    """The request's name."""
    status: Status
    """"optimal" (proved), "feasible" (fits, gap reported), "infeasible" (proved: see certificate),
    "unknown" (no fitting plan found in time; placements hold the best, over capacity).
    """
    arena_bytes: int
    """Shared-memory bytes the plan needs: max(offset + size) over shared placements."""
    lower_bound: int
    """Bytes no plan can do with: the peak of live bytes (on barrier-extended lifetimes where the
    sync policy extends them), or a stronger proved bound.
    """
    naive_bytes: int  # every buffer laid end to end, no reuse
    """Bytes with every buffer laid end to end (no reuse), for comparison."""
    capacity: int | None = None  # bytes; None: unbounded (a default, so /docs examples read)
    """Bytes available, from the request or its target; null: unbounded."""
    placements: list[Placement]
    """One per buffer, in request order."""
    barriers: Barriers
    """The request's barriers, the inserted ones, and the ones the plan relies on."""
    spilled: list[str] = Field(default_factory=list)  # ids placed in the global workspace
    """Ids of the buffers placed in the global-memory workspace (overflow "spill")."""
    global_bytes: int = 0  # per-block global-memory workspace for the spilled buffers
    """Per-block bytes of the global-memory workspace for the spilled buffers. Default 0."""
    footprints: list[Footprint] = Field(default_factory=list)
    """Per-block slices planned with options.shrink."""
    launch: Launch
    """What launching the kernel with this plan takes."""
    solver: SolverInfo
    """Which method won, what is proved, and what was tried."""
    graph: GraphStats
    """The interference graph's size: buffers, edge kinds, components."""
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    """Notes on the plan: reuses, waste, budgets that were hit."""
    certificate: Certificate | None = None
    """Why the request is infeasible; null otherwise."""
    request_sha256: str
    """SHA-256 of the canonical request: equal requests give equal plans, byte for byte."""
    # Pairs [earlier, later] that share bytes with no barrier between them, safe because each
    # shared byte is touched by one and the same thread in both (thread-local aliasing).
    aliases: list[list[str]] = Field(default_factory=list)
    """Pairs [earlier, later] sharing bytes with no barrier between them, safe because each shared
    byte stays with one thread.
    """
    # options.pareto: the non-dominated (arena, new barriers) plans, fewest new barriers first,
    # the last one this plan's; each entry is a full plan (its own pareto list empty). Empty
    # without the option; one entry unless sync is "insert".
    pareto: list[ParetoPoint] = Field(default_factory=list)
    """With options.pareto: every non-dominated (arena, new barriers) plan, fewest new barriers
    first.
    """


ParetoPoint.model_rebuild()
