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
    "ClusterBarriers",
    "Diagnostic",
    "Fence",
    "Footprint",
    "GraphStats",
    "Inval",
    "Launch",
    "NamedBarrier",
    "ParetoPoint",
    "Placement",
    "Plan",
    "Ring",
    "SolverAttempt",
    "SolverInfo",
    "Status",
    "Stopped",
    "Wait",
    "shared_placements",
]

Status = Literal["optimal", "feasible", "infeasible", "unknown"]
Stopped = Literal["proved", "within_tolerance", "budget", "time"]


def _absent(value: object) -> bool:
    return value is None


def _empty(value: object) -> bool:
    return value == []


def _false(value: object) -> bool:
    return value is False


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Placement(_Model):
    """Where one buffer lives."""

    id: str = Field(description="The buffer's id in the request.")
    offset: int = Field(  # bytes from the arena base
        description="Bytes from the arena base (shared) or the workspace base (global)."
    )
    size: int = Field(  # bytes
        description="Bytes planned for the buffer (its footprint when shrunk)."
    )
    memory: Literal["shared", "global"] = Field(
        default="shared",
        description='"shared", or "global" for a buffer spilled to the global-memory workspace.',
    )


def shared_placements(ids: list[str], offsets: list[int], sizes: list[int]) -> list[Placement]:
    """Placements in shared memory from checked values, built as ``model_construct`` builds
    them (the same models, fields set and dumps) without its per-call work: a million
    placements take a second, not twenty."""
    new = Placement.__new__
    put = object.__setattr__
    # One set of the fields set for all of them (216 bytes each, a fifth of the plan at a
    # million buffers): the models are frozen, so nothing adds to it, and model_copy copies
    # it before an update.
    fields = {"id", "offset", "size", "memory"}
    out = []
    for ident, offset, size in zip(ids, offsets, sizes, strict=True):
        placement = new(Placement)
        put(
            placement, "__dict__", {"id": ident, "offset": offset, "size": size, "memory": "shared"}
        )
        put(placement, "__pydantic_fields_set__", fields)
        put(placement, "__pydantic_extra__", None)
        put(placement, "__pydantic_private__", None)
        out.append(placement)
    return out


class Barriers(_Model):
    """Block-wide barriers, by program point; each runs before the accesses at its point."""

    existing: list[int] = Field(  # from the request, sorted
        default_factory=list, description="The request's barriers, sorted program points."
    )
    inserted: list[int] = Field(  # new ones the plan needs
        default_factory=list,
        description='Program points of the barriers the plan adds (sync "insert").',
    )
    required: list[int] = Field(  # the fewest the plan relies on
        default_factory=list,
        description=(
            'The fewest barriers (points) the plan relies on; under sync "none", the points the '
            "caller\n"
            "must synchronize at."
        ),
    )
    # Only for requests with loops, branches or ranges (absent otherwise, so older plans read
    # as they did): barrier counts of the kernel as planned, existing and inserted together.
    static: int | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "Barrier points in the kernel as planned (existing and inserted); only for requests "
            "with\n"
            "loops, branches or ranges."
        ),
    )
    executions: int | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "Barrier executions of one block: each point counts the product of the trips of the "
            "loops\n"
            "around it (unknown trips count 1000); only for requests with loops, branches or "
            "ranges."
        ),
    )
    required_executions: int | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "Executions of the required barriers, counted the same way; only for requests with "
            "loops,\n"
            "branches or ranges."
        ),
    )


class ClusterBarriers(_Model):
    """Cluster barriers (``barrier.cluster.arrive`` + ``barrier.cluster.wait``), by program
    point: each orders every thread of every CTA of the cluster, the CTA's own included, so
    it also serves as a block barrier at its point (docs/design.md, Clusters)."""

    existing: list[int] = Field(
        default_factory=list, description="The request's cluster_barrier syncs, sorted points."
    )
    inserted: list[int] = Field(
        default_factory=list,
        description='Points of the cluster barriers the plan adds (sync "insert").',
    )
    required: list[int] = Field(
        default_factory=list,
        description=(
            "The fewest cluster barriers the plan relies on for reuses of cluster-scoped bytes; "
            'under\nsync "none", the points where the caller must put one.'
        ),
    )
    executions: int = Field(
        default=0,
        description=(
            "Executions of the cluster barriers that run (existing and inserted; under sync "
            '"none" the\nrequired ones too), each point counted per trip of the loops around it.'
        ),
    )


class Footprint(_Model):
    """Per-block slice of a buffer indexed by blockIdx (planned with ``options.shrink``).

    Block ``(bx, by, bz)`` touches declared bytes ``[base, base + planned)`` with
    ``base = index_base["blockIdx.x"] * bx + ... + index_base["constant"]``, all in bytes;
    the compiler subtracts ``base`` from every byte address of the buffer.
    """

    id: str = Field(description="The buffer's id.")
    declared: int = Field(  # bytes
        description="Bytes the request declared."
    )
    planned: int = Field(  # bytes
        description="Bytes one block touches, as planned."
    )
    index_base: dict[str, int] = Field(  # bytes per block index, constant
        default_factory=dict,
        description=(
            'Bytes per unit of each blockIdx variable, and "constant": block (bx, by, bz) '
            "touches\n"
            "declared bytes from sum(index_base[v] * v) + constant on."
        ),
    )


class Fence(_Model):
    """A fence_proxy_async the plan adds (or the caller must add) for a reuse."""

    at: int = Field(
        description="Program point; it runs before the barrier there, which orders the reuse."
    )
    origin: Literal["inserted", "required"] = Field(
        description='"inserted": the plan adds it (sync "insert"); "required": the caller must '
        '(sync "none").'
    )
    # Only in a request with partitions (absent otherwise, so older plans read as they did):
    # the partition that runs the fence, right after its write.
    partition: str | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "In a request with partitions: the partition that runs it, after its generic "
            "writes and\nbefore its releases at that point."
        ),
    )


class NamedBarrier(_Model):
    """A named barrier (``bar.sync id, threads``) the plan adds for a reuse between the warp
    groups taking part, in a request with partitions."""

    at: int = Field(description="Program point; it runs with the barriers there.")
    id: int = Field(description="The barrier id, 1 to 15: one the request does not use.")
    partitions: list[str] = Field(description="The partitions taking part, in request order.")
    threads: int = Field(description="Threads taking part: those of the partitions.")
    origin: Literal["inserted", "required"] = Field(
        description='"inserted": the plan adds it (sync "insert"); "required": the caller must '
        '(sync "none").'
    )


class Inval(_Model):
    """An mbarrier_inval that frees an mbarrier's bytes for a later buffer."""

    mbarrier: str = Field(description="The mbarrier buffer's id.")
    at: int = Field(description="Program point of the inval (after the mbarrier's last use).")
    origin: Literal["existing", "inserted", "required"] = Field(
        description=(
            '"existing": the request\'s; "inserted": the plan adds it (sync "insert"); '
            '"required": the\ncaller must add it (sync "none").'
        )
    )
    # Only in a request with partitions (absent otherwise, so other plans read as they did):
    # the partition whose threads run the inval.
    partition: str | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "In a request with partitions: the partition that runs it, once every other "
            "operation on\nthe mbarrier is ordered before it."
        ),
    )


class Wait(_Model):
    """A wait_group the plan adds (or the caller must add) to complete asynchronous accesses
    that no sync of the request covers."""

    kind: Literal["cp.async", "bulk", "wgmma"] = Field(
        description=(
            'The group it waits for: "cp.async" (cp.async.wait_group 0), "bulk" '
            "(cp.async.bulk.wait_group.read 0:\nthe TMA stores have read their sources) or "
            '"wgmma" (wgmma.wait_group.sync.aligned 0).'
        )
    )
    at: int = Field(
        description=(
            "Program point: the first after the issues it completes in their scope; it runs "
            "before the\naccesses and barriers there."
        )
    )
    origin: Literal["inserted", "required"] = Field(
        description='"inserted": the plan adds it (sync "insert"); "required": the caller must '
        '(sync "none").'
    )
    # Only in a request with partitions (absent otherwise, so other plans read as they did):
    # the partition whose threads run the wait, the one that issued what it completes.
    partition: str | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "In a request with partitions: the partition that runs it, the one that issued "
            "the accesses\nit completes (a wait_group covers its own partition's groups only)."
        ),
    )


class Launch(_Model):
    """What the kernel launch needs for this arena."""

    dynamic_smem_bytes: int = Field(
        description="Dynamic shared memory to launch with, in bytes (the arena)."
    )
    requires_opt_in: bool = Field(  # above the 48 KB static limit
        description=(
            "True above the 48 KB static limit: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) "
            "is\n"
            "needed."
        )
    )
    blocks_per_sm: int | None = Field(  # limited by shared memory; None without a target
        default=None, description="Blocks per SM that shared memory allows; null without a target."
    )
    naive_blocks_per_sm: int | None = Field(  # the same for naive_bytes: what reuse wins
        default=None,
        description=(
            "The same for naive_bytes (no reuse): what the plan's reuse wins; null without a "
            "target."
        ),
    )
    # Only for requests with a TMA tile or a target given as figures (absent otherwise, so
    # older plans read as they did; theirs is the request's largest alignment).
    base_alignment: int | None = Field(  # bytes
        default=None,
        exclude_if=_absent,
        description=(
            "Alignment of the dynamic shared-memory base the plan assumes, in bytes (the "
            "largest\nalignment it needs): the kernel declares its arena __align__(N). Present "
            "for requests with a\nTMA tile (swizzle) or a target given as figures; otherwise "
            "it is the request's largest\nalignment."
        ),
    )

    # Only for requests with a cluster (absent otherwise).
    cluster: list[int] | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "Cluster dimensions [x, y, z] to launch with (cudaLaunchAttributeClusterDimension); "
            "present\nfor requests with a cluster."
        ),
    )
    cluster_non_portable: bool = Field(
        default=False,
        exclude_if=_false,
        description=(
            "True when the cluster has more than 8 CTAs: the kernel needs\n"
            "cudaFuncSetAttribute(cudaFuncAttributeNonPortableClusterSizeAllowed, 1). Absent "
            "when false."
        ),
    )


class SolverAttempt(_Model):
    """One method the portfolio ran and the arena it reached."""

    name: str = Field(description="The method tried.")
    arena_bytes: int = Field(description="The arena its plan needs, in bytes.")


class SolverInfo(_Model):
    """Which method won and what is proved."""

    name: str = Field(description="The method whose plan is returned.")
    proved_optimal: bool = Field(description="True when no plan of this request needs fewer bytes.")
    bound: int = Field(  # bytes; no plan can use fewer
        description="Bytes no plan of this request can do with (a proved lower bound)."
    )
    gap: float = Field(  # (arena - bound) / bound, 0 when bound is 0
        description="(arena_bytes - bound) / bound; 0 when proved optimal or the bound is 0."
    )
    tried: list[SolverAttempt] = Field(
        default_factory=list, description="Every method tried and its arena, in order."
    )
    stopped: Stopped = Field(
        default="budget",
        description=(
            'Why the search ended: "proved" (the arena is optimal, or nothing fits), '
            '"within_tolerance"\n(options.gap_tolerance of the bound), "budget" (the time '
            'limit\'s deterministic work ran\nout) or "time" (the clock cut it: see '
            "cut_by_clock)."
        ),
    )
    # Absent when false, so plans the clock did not cut read as they always did.
    cut_by_clock: bool = Field(
        default=False,
        exclude_if=_false,
        description=(
            "True when the clock, not the time limit's deterministic budgets, ended some of "
            "the work:\nthe machine was slower than the limit allows for, and the same request "
            "may get another\nplan. Absent when false: then the plan is the request's alone."
        ),
    )


class GraphStats(_Model):
    """Size of the interference graph."""

    buffers: int = Field(description="Buffers in the request.")
    live_edges: int = Field(  # pairs live at the same time
        description="Pairs of buffers live at the same time."
    )
    hazard_edges: int = Field(  # sequential pairs that may not share bytes under the sync policy
        description=(
            "Pairs live one after the other that may not share bytes under the sync policy."
        )
    )
    components: int = Field(description="Connected components of the interference graph.")


class Diagnostic(_Model):
    """A note for the compiler engineer."""

    level: Literal["info", "warning", "error"] = Field(description='"info", "warning" or "error".')
    code: str = Field(description="Stable machine-readable code, e.g. reuse_after_barrier.")
    message: str = Field(description="What it means, for a person.")


class Certificate(_Model):
    """Why no plan fits: at ``point`` the ``buffers`` need ``live_bytes`` > ``capacity``."""

    reason: str = Field(description="Why no plan fits, in words.")
    capacity: int = Field(description="The capacity in bytes.")
    live_bytes: int = Field(description="Bytes the named buffers need together, over capacity.")
    point: int | None = Field(
        default=None,
        description=(
            "The program point where they are live together; null for a set that cannot be "
            "stacked at any\n"
            "one point."
        ),
    )
    buffers: list[str] = Field(
        default_factory=list, description="Ids of a small set of buffers that cannot fit together."
    )


class ParetoPoint(_Model):
    """One non-dominated trade-off of sync "insert": ``arena_bytes`` for ``new_barriers``."""

    arena_bytes: int = Field(description="Arena of this plan, in bytes.")
    new_barriers: int = Field(description="Barriers this plan inserts.")
    # The whole plan of this trade-off, its own pareto empty. A description here would be
    # copied onto every reference to Plan in the service's OpenAPI document.
    plan: Plan


class Ring(_Model):
    """The depth chosen for one ring (a buffer with copies): its placement holds ``copies``
    slots of ``stride`` bytes, slot ``k`` at ``offset + k * stride``."""

    id: str = Field(description="The ring's buffer id.")
    copies: int = Field(description="Slots chosen, between the request's min and max.")
    stride: int = Field(
        description="Bytes from one slot to the next: the size rounded up to the alignment."
    )


class Plan(_Model):
    """Offsets for every buffer, the barriers they rely on, and what is proved about them."""

    name: str = Field(description="The request's name.")
    status: Status = Field(
        description=(
            '"optimal" (proved), "feasible" (fits, gap reported), "infeasible" (proved: see '
            "certificate),\n"
            '"unknown" (no fitting plan found in time; placements hold the best, over capacity).'
        )
    )
    arena_bytes: int = Field(
        description=(
            "Shared-memory bytes the plan needs: max(offset + size) over shared placements."
        )
    )
    lower_bound: int = Field(
        description=(
            "Bytes no plan can do with: the peak of live bytes (on barrier-extended lifetimes "
            "where the\n"
            "sync policy extends them), or a stronger proved bound."
        )
    )
    naive_bytes: int = Field(  # every buffer laid end to end, no reuse
        description="Bytes with every buffer laid end to end (no reuse), for comparison."
    )
    capacity: int | None = Field(  # bytes; None: unbounded (a default, so /docs examples read)
        default=None,
        description="Bytes available, from the request or its target; null: unbounded.",
    )
    placements: list[Placement] = Field(description="One per buffer, in request order.")
    barriers: Barriers = Field(
        description="The request's barriers, the inserted ones, and the ones the plan relies on."
    )
    spilled: list[str] = Field(  # ids placed in the global workspace
        default_factory=list,
        description='Ids of the buffers placed in the global-memory workspace (overflow "spill").',
    )
    global_bytes: int = Field(  # per-block global-memory workspace for the spilled buffers
        default=0,
        description=(
            "Per-block bytes of the global-memory workspace for the spilled buffers. Default 0."
        ),
    )
    footprints: list[Footprint] = Field(
        default_factory=list, description="Per-block slices planned with options.shrink."
    )
    launch: Launch = Field(description="What launching the kernel with this plan takes.")
    solver: SolverInfo = Field(description="Which method won, what is proved, and what was tried.")
    graph: GraphStats = Field(
        description="The interference graph's size: buffers, edge kinds, components."
    )
    diagnostics: list[Diagnostic] = Field(
        default_factory=list, description="Notes on the plan: reuses, waste, budgets that were hit."
    )
    certificate: Certificate | None = Field(
        default=None, description="Why the request is infeasible; null otherwise."
    )
    request_sha256: str = Field(
        description=(
            "SHA-256 of the canonical request: equal requests give equal plans, byte for byte."
        )
    )
    # Pairs [earlier, later] that share bytes with no barrier between them, safe because each
    # shared byte is touched by one and the same thread in both (thread-local aliasing).
    aliases: list[list[str]] = Field(
        default_factory=list,
        description=(
            "Pairs [earlier, later] sharing bytes with no barrier between them, safe because each "
            "shared\n"
            "byte stays with one thread."
        ),
    )
    # Only for requests with mbarrier buffers whose bytes a later buffer takes (absent
    # otherwise, so older plans read as they did).
    invals: list[Inval] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            "The mbarrier_invals the plan relies on (the request's) or needs (inserted under "
            'sync "insert",\nrequired under "none"), one per mbarrier whose bytes a later '
            "buffer takes."
        ),
    )
    # Only for requests with asynchronous accesses that no sync of theirs completes (absent
    # otherwise).
    waits: list[Wait] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'The wait_groups the plan adds (sync "insert") or the caller must add (sync '
            '"none") for the\ncp.async writes, TMA stores and wgmma reads that no sync of the '
            "request completes."
        ),
    )
    # Only for requests whose reuses of thread-written bytes by TMA or wgmma need a fence the
    # request lacks (absent otherwise).
    fences: list[Fence] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'The fence_proxy_asyncs the plan adds (sync "insert") or the caller must add (sync '
            '"none"),\neach at a barrier of the request, for reuses of thread-written bytes by '
            "TMA or wgmma."
        ),
    )
    # Only for requests with partitions whose reuses need a barrier of just some warp groups
    # (absent otherwise).
    named_barriers: list[NamedBarrier] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'The named barriers the plan adds (sync "insert") or the caller must add (sync '
            '"none"), each\nfor the warp groups of the reuses it orders.'
        ),
    )
    # options.pareto: the non-dominated (arena, new barriers) plans, fewest new barriers first,
    # the last one this plan's; each entry is a full plan (its own pareto list empty). Empty
    # without the option; one entry unless sync is "insert".
    pareto: list[ParetoPoint] = Field(
        default_factory=list,
        description=(
            "With options.pareto: every non-dominated (arena, new barriers) plan, fewest new "
            "barriers\n"
            "first."
        ),
    )
    rings: list[Ring] | None = Field(
        default=None,
        exclude_if=_absent,
        description="The depth chosen per ring, in request order; absent without rings.",
    )
    cluster_barriers: ClusterBarriers | None = Field(
        default=None,
        exclude_if=_absent,
        description=(
            "Cluster barriers the request has, the plan adds and relies on, apart from block "
            "barriers;\npresent for requests with a cluster."
        ),
    )


ParetoPoint.model_rebuild()
