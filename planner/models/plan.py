"""The plan the planner returns (DESIGN section 3). A pure function of its request.

Read from the wire strictly, like a request (``planner.io.parse_plan``, ``/validate``,
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
]

Status = Literal["optimal", "feasible", "infeasible", "unknown"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Placement(_Model):
    """Where one buffer lives."""

    id: str
    offset: int  # bytes from the arena base
    size: int  # bytes
    memory: Literal["shared", "global"] = "shared"


class Barriers(_Model):
    """Block-wide barriers, by program point; each runs before the accesses at its point."""

    existing: list[int] = Field(default_factory=list)  # from the request, sorted
    inserted: list[int] = Field(default_factory=list)  # new ones the plan needs
    required: list[int] = Field(default_factory=list)  # the fewest the plan relies on


class Footprint(_Model):
    """Per-block slice of a buffer indexed by blockIdx (planned with ``options.shrink``).

    Block ``(bx, by, bz)`` touches declared bytes ``[base, base + planned)`` with
    ``base = index_base["blockIdx.x"] * bx + ... + index_base["constant"]``, all in bytes;
    the compiler subtracts ``base`` from every byte address of the buffer.
    """

    id: str
    declared: int  # bytes
    planned: int  # bytes
    index_base: dict[str, int] = Field(default_factory=dict)  # bytes per block index, constant


class Launch(_Model):
    """What the kernel launch needs for this arena."""

    dynamic_smem_bytes: int
    requires_opt_in: bool  # above the 48 KB static limit
    blocks_per_sm: int | None = None  # limited by shared memory; None without a target
    naive_blocks_per_sm: int | None = None  # the same for naive_bytes: what reuse wins


class SolverAttempt(_Model):
    """One method the portfolio ran and the arena it reached."""

    name: str
    arena_bytes: int


class SolverInfo(_Model):
    """Which method won and what is proved."""

    name: str
    proved_optimal: bool
    bound: int  # bytes; no plan can use fewer
    gap: float  # (arena - bound) / bound, 0 when bound is 0
    tried: list[SolverAttempt] = Field(default_factory=list)


class GraphStats(_Model):
    """Size of the interference graph."""

    buffers: int
    live_edges: int  # pairs live at the same time
    hazard_edges: int  # sequential pairs that may not share bytes under the sync policy
    components: int


class Diagnostic(_Model):
    """A note for the compiler engineer."""

    level: Literal["info", "warning", "error"]
    code: str
    message: str


class Certificate(_Model):
    """Why no plan fits: at ``point`` the ``buffers`` need ``live_bytes`` > ``capacity``."""

    reason: str
    capacity: int
    live_bytes: int
    point: int | None = None
    buffers: list[str] = Field(default_factory=list)


class ParetoPoint(_Model):
    """One non-dominated trade-off of sync "insert": ``arena_bytes`` for ``new_barriers``."""

    arena_bytes: int
    new_barriers: int
    plan: Plan


class Plan(_Model):
    """Offsets for every buffer, the barriers they rely on, and what is proved about them."""

    name: str
    status: Status
    arena_bytes: int
    lower_bound: int
    naive_bytes: int  # every buffer laid end to end, no reuse
    capacity: int | None = None  # bytes; None: unbounded (a default, so /docs examples read)
    placements: list[Placement]
    barriers: Barriers
    spilled: list[str] = Field(default_factory=list)  # ids placed in the global workspace
    global_bytes: int = 0  # per-block global-memory workspace for the spilled buffers
    footprints: list[Footprint] = Field(default_factory=list)
    launch: Launch
    solver: SolverInfo
    graph: GraphStats
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    certificate: Certificate | None = None
    request_sha256: str
    # Pairs [earlier, later] that share bytes with no barrier between them, safe because each
    # shared byte is touched by one and the same thread in both (thread-local aliasing).
    aliases: list[list[str]] = Field(default_factory=list)
    # options.pareto: the non-dominated (arena, new barriers) plans, fewest new barriers first,
    # the last one this plan's; each entry is a full plan (its own pareto list empty). Empty
    # without the option; one entry unless sync is "insert".
    pareto: list[ParetoPoint] = Field(default_factory=list)


ParetoPoint.model_rebuild()
