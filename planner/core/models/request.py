"""The version-1 request (docs/design.md, Wire format) and every semantic check on it.

A request that constructs is a request the planner can plan: each check that needs more than
one field lives in a model validator that raises one ``ValidationError`` listing every
problem, each with a ``loc`` naming the field and a message naming the value.

Requests are read strictly (``planner.core.io`` validates with ``strict=True``): an integer field
takes only a JSON integer (not ``true``, ``"256"`` or ``1.0``), a boolean only ``true`` or
``false``; a float field still takes an integer (``"time_limit": 10``).
"""

from __future__ import annotations

import bisect
import difflib
import heapq
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from planner.core.clusters import check_cluster
from planner.core.dtypes import DTYPES
from planner.core.models._base import (
    MAX_POINT,
    MAX_SIZE,
    Bytes,
    Errors,
    Loc,
    Point,
    Span,
    absent,
)
from planner.core.models.control import (
    Branch,
    Loop,
    check_control,
    check_ranges_vs_arms,
    check_ranges_vs_loops,
    executions_at,
)
from planner.core.models.partitions import Partition, check_partitions
from planner.core.models.sync import Agent, Sync, check_syncs
from planner.core.solver_names import HEURISTICS, METHODS, SOLVER_NAMES
from planner.core.targets import TARGETS, DeviceProfile

__all__ = [
    "DEFAULT_MAX_BUFFERS",
    "EXAMPLE",
    "MAX_POINT",
    "MAX_SIZE",
    "THREAD_VARS",
    "Access",
    "Branch",
    "Buffer",
    "Copies",
    "Loop",
    "Options",
    "PlanRequest",
    "SyncPolicy",
    "TargetFigures",
]

MAX_ALIGNMENT = 1 << 30  # bytes
MAX_TIME_LIMIT = 3600.0  # seconds
DEFAULT_MAX_BUFFERS = 100_000  # overridable with validation context {"max_buffers": n}
THREAD_VARS = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
BLOCK_VARS = {"blockIdx.x": 0, "blockIdx.y": 1, "blockIdx.z": 2}
MAX_BLOCK = (1024, 1024, 64)  # CUDA's per-dimension block limits; 1024 threads in all
MAX_GRID = ((1 << 31) - 1, 65535, 65535)

MAX_NAME = 64  # characters of a loop or index variable's name
VarName = Annotated[str, Field(max_length=MAX_NAME)]

SyncPolicy = Literal["existing", "insert", "none"]
Swizzle = Literal["none", "32B", "64B", "128B"]
# bytes: the alignment of a TMA tile's shared-memory address per swizzle mode (a 128-byte
# swizzle permutes 16-byte chunks within 8 rows of 128 bytes, a 1024-byte atom, and the
# pattern is taken from the absolute address bits; CUDA programming guide, "Tensor Memory
# Access", swizzle modes; PTX ISA, "Tensor-map", shared memory alignment)
MBARRIER_ALIGNMENT = 8  # bytes: an mbarrier is an 8-byte, 8-aligned object (PTX ISA, mbarrier)
SWIZZLE_ALIGNMENT: dict[str, int] = {"none": 128, "32B": 256, "64B": 512, "128B": 1024}
_Errors = Errors


class _Hull(int):
    """A buffer's start or end derived from its ranges: the ranges are what is serialized, so
    a dump reads back (giving ranges and start/end together is an error)."""

    __slots__ = ()


def _data(value: str) -> bool:
    return value == "data"


def _threads(value: str) -> bool:
    return value == "threads"


def _cta(value: str) -> bool:
    return value == "cta"


def _derived(value: int) -> bool:
    return type(value) is _Hull


def _empty(value: list[Any]) -> bool:
    return not value


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_alignment(value: int | None) -> int | None:
    if value is not None and not _is_power_of_two(value):
        raise PydanticCustomError(
            "alignment_not_power_of_two", f"alignment {value} is not a power of two"
        )
    return value


def _normalize_dims(value: list[int] | None, limits: tuple[int, int, int], what: str) -> Any:
    if value is None:
        return None
    dims = [*value, *[1] * (3 - len(value))]
    for axis, (d, cap) in enumerate(zip(dims, limits, strict=True)):
        if d > cap:
            raise PydanticCustomError(
                f"{what}_too_large", f"{what}[{axis}] = {d} exceeds the CUDA limit {cap}"
            )
    if what == "block" and dims[0] * dims[1] * dims[2] > 1024:
        raise PydanticCustomError(
            "block_too_large", f"block {dims} has {dims[0] * dims[1] * dims[2]} threads; max 1024"
        )
    return dims


class Access(BaseModel):
    """One access of a buffer by every thread: element ``sum(coeff * var) + offset``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Literal["read", "write"] = Field(
        description="Whether the access reads or writes the buffer's elements."
    )
    at: Point = Field(
        description="Program point of the access; within the buffer's lifetime [start, end)."
    )
    bytes: int = Field(  # element width
        ge=1,
        le=256,
        description=(
            "Element width in bytes (1 to 256); element i covers bytes [i*bytes, (i+1)*bytes)."
        ),
    )
    index: dict[VarName, int] | None = Field(  # var -> coefficient, in elements
        default=None,
        description=(
            "Element index as {variable: coefficient}: sum(coeff * var) + offset, in elements. "
            "Variables:\n"
            "threadIdx.x|y|z, blockIdx.x|y|z, or a name in loops (at most 64 characters). Give "
            "index or\nthreads, not both."
        ),
    )
    offset: int = Field(  # elements
        default=0, description="Constant added to the element index, in elements. Default 0."
    )
    loops: dict[VarName, Annotated[int, Field(ge=1, le=1 << 30)]] = Field(
        default_factory=dict,
        description=(
            "Extent of each loop variable the index uses: {name: iterations}. Default none."
        ),
    )
    threads: Literal["all"] | None = Field(  # "all": any thread may touch any byte
        default=None,
        description='"all": a broadcast, any thread may touch any byte (instead of index).',
    )
    agent: Agent = Field(
        default="threads",
        exclude_if=_threads,
        description=(
            'Who makes the access: "threads" (ld/st by the threads), or asynchronously '
            '"cp.async" (a\nwrite), "tma" (a write: a load into shared memory; a read: a '
            'store\'s source) or "mma" (a\nwgmma operand read); an asynchronous access '
            'completes at the sync that covers it. Default\n"threads".'
        ),
    )
    mbarrier: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        exclude_if=absent,
        description="A TMA write only (required there): the mbarrier its completion arrives on.",
    )
    partition: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        exclude_if=absent,
        description=(
            "The partition (warp group) whose threads make the access, or issue it when it is\n"
            "asynchronous; required in a request with partitions, not allowed without."
        ),
    )

    @model_validator(mode="after")
    def _index_or_threads(self) -> Access:
        errors = _Errors("Access")
        if self.index is None and self.threads is None:
            errors.add(("index",), "missing_index", "give either index or threads: 'all'", None)
        if self.index is not None and self.threads is not None:
            errors.add(
                ("threads",), "index_and_threads", "give index or threads: 'all', not both", "all"
            )
        for var in self.loops:
            if var in THREAD_VARS or var in BLOCK_VARS:
                errors.add(
                    ("loops", var), "reserved_loop_name", f"loop name {var!r} is reserved", var
                )
        errors.raise_if_any()
        return self


MAX_COPIES = 64  # slots of one ring
MAX_RING_CHOICES = 4096  # combinations of ring depths one request may leave open


class Copies(BaseModel):
    """A ring of ``copies`` slots used round-robin by a loop: the planner chooses how many,
    between ``min`` and ``max``, together with the offsets (docs/design.md, Rings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int = Field(ge=1, le=MAX_COPIES, description="Fewest slots (1 to 64).")
    max: int = Field(ge=1, le=MAX_COPIES, description="Most slots (1 to 64); max >= min.")
    priority: int = Field(
        default=1,
        ge=0,
        le=1 << 20,
        description="Weight of one more slot of this ring: the planner maximises the sum of "
        "priority * copies over the rings that fit, then the smallest arena. Default 1.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> Copies:
        if self.max < self.min:
            errors = _Errors("Copies")
            errors.add(
                ("max",),
                "copies_reversed",
                f"copies max ({self.max}) is less than min ({self.min})",
                self.max,
            )
            errors.raise_if_any()
        return self

    @property
    def choices(self) -> int:
        return self.max - self.min + 1


class Buffer(BaseModel):
    """One temporary buffer: ``size`` bytes live on the half-open interval ``[start, end)``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        min_length=1,
        max_length=256,
        description="Unique name of the buffer (1 to 256 characters), echoed in the plan.",
    )
    size: Bytes = Field(description="Size in bytes (at least 1).")
    start: Point = Field(
        exclude_if=_derived,
        description=(
            "First program point of the lifetime (inclusive). With ranges: the first range's "
            "start\n"
            "(then not given)."
        ),
    )
    end: Point = Field(
        exclude_if=_derived,
        description=(
            "End of the lifetime, exclusive: the buffer is live on [start, end); end > start. "
            "With\n"
            "ranges: the last range's end (then not given)."
        ),
    )
    alignment: int | None = Field(  # None: the request's
        default=None,
        ge=1,
        le=MAX_ALIGNMENT,
        description=(
            "Alignment of the offset in bytes, a power of two. Default: the request's alignment."
        ),
    )
    offset: int | None = Field(  # pinned by the caller
        default=None,
        ge=0,
        le=MAX_SIZE,
        description=(
            "Pins the buffer at this byte offset from the arena base. Default: the planner chooses."
        ),
    )
    accesses: list[Access] = Field(
        default_factory=list,
        description=(
            "Which thread touches which element when; optional. Without them any thread may touch "
            "any\n"
            "byte from start to end - 1."
        ),
    )
    dtype: Annotated[str, Field(json_schema_extra={"enum": [*DTYPES]})] | None = Field(
        # element type for the emitters; None: bytes
        default=None,
        description='Element type for the emitted CUDA/MLIR pointers (e.g. "f16"). Default: bytes.',
    )
    kind: Literal["data", "mbarrier"] = Field(
        default="data",
        exclude_if=_data,
        description=(
            '"mbarrier": an 8-byte mbarrier object (8-aligned), initialised at start; the '
            "syncs naming\nits id are its accesses, and its bytes are free for another buffer "
            "only after an\nmbarrier_inval that follows its last operation. Default "
            '"data".'
        ),
    )
    swizzle: Swizzle | None = Field(
        default=None,
        exclude_if=absent,
        description=(
            'A tile TMA writes or reads, and its swizzle mode ("none", "32B", "64B", "128B"): '
            "its\nabsolute shared-memory address then needs 128, 256, 512 or 1024-byte "
            "alignment, which the\nbuffer's alignment is raised to (sm_90 and later). "
            "Default: no TMA tile."
        ),
    )
    ranges: list[Span] | None = Field(
        default=None,
        min_length=1,
        exclude_if=absent,
        description=(
            "Several live ranges [[s1, e1], [s2, e2], ...] instead of start/end: half-open, "
            "non-empty,\n"
            "sorted and disjoint; between them the buffer's bytes hold nothing the kernel needs. "
            "Default:\n"
            "the one range [start, end)."
        ),
    )

    scope: Literal["cta", "cluster"] = Field(
        default="cta",
        exclude_if=_cta,
        description=(
            '"cluster": CTAs of the cluster other than its own touch its bytes (distributed '
            "shared\nmemory, a multicast TMA load), so another buffer takes them only after a "
            'cluster barrier.\nDefault "cta" (its own CTA only).'
        ),
    )

    copies: Copies | None = Field(
        default=None,
        exclude_if=absent,
        description=(
            'A ring: {"min", "max", "priority"} slots of size bytes each, used round-robin by a '
            "loop;\nthe planner chooses the slots and the plan states them (rings). Default: one "
            "buffer."
        ),
    )

    _alignment = field_validator("alignment")(_check_alignment)

    @model_validator(mode="before")
    @classmethod
    def _hull_of_ranges(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("ranges") is None:
            return data
        if "start" in data or "end" in data:
            errors = _Errors("Buffer")
            given = "start" if "start" in data else "end"
            errors.add(
                (given,),
                "ranges_and_start_end",
                "give either ranges or start/end, not both",
                data[given],
            )
            errors.raise_if_any()
        ranges = data["ranges"]
        start, end = 0, 1  # placeholders: malformed ranges are reported on ranges alone
        if (
            isinstance(ranges, list)
            and ranges
            and all(isinstance(r, list) and len(r) == 2 for r in ranges)
            and all(type(p) is int for r in ranges for p in r)
        ):
            start, end = ranges[0][0], ranges[-1][1]
        return {**data, "start": start, "end": end}

    @property
    def lifetimes(self) -> list[tuple[int, int]]:
        """The live ranges, half-open and sorted: ``ranges``, else ``[(start, end)]``."""
        if self.ranges is None:
            return [(self.start, self.end)]
        return [(s, e) for s, e in self.ranges]

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str | None) -> str | None:
        if value is not None and value not in DTYPES:
            known = ", ".join(DTYPES)
            raise PydanticCustomError(
                "unknown_dtype", f"unknown dtype {value!r}; known dtypes: {known}"
            )
        return value

    @model_validator(mode="after")
    def _lifetime(self) -> Buffer:
        errors = _Errors("Buffer")
        if self.dtype is not None and self.size % DTYPES[self.dtype].bytes:
            width = DTYPES[self.dtype].bytes
            errors.add(
                ("size",),
                "size_not_multiple_of_dtype",
                f"size {self.size} of buffer {self.id!r} is not a multiple of the {width}-byte "
                f"dtype {self.dtype!r}",
                self.size,
            )
        if self.copies is not None and self.accesses:
            errors.add(
                ("copies",),
                "copies_with_accesses",
                f"ring {self.id!r} gives access patterns; a ring's slots take none",
                None,
            )
        if self.copies is not None and self.offset is not None:
            errors.add(
                ("copies",),
                "copies_with_offset",
                f"ring {self.id!r} is pinned at offset {self.offset}; a ring's depth and "
                "offset are chosen together",
                None,
            )
        if self.kind == "mbarrier":
            self._check_mbarrier(errors)
        if self.ranges is not None:
            self._check_ranges(errors)
        elif self.end <= self.start:
            errors.add(
                ("end",),
                "empty_lifetime",
                f"end ({self.end}) must be greater than start ({self.start})",
                self.end,
            )
        for k, access in enumerate(self.accesses):
            if self.ranges is not None:
                if not any(s <= access.at < e for s, e in self.ranges):
                    errors.add(
                        ("accesses", k, "at"),
                        "access_outside_lifetime",
                        f"access at point {access.at} is outside every live range "
                        f"{self.ranges} of buffer {self.id!r}",
                        access.at,
                    )
            elif not self.start <= access.at < self.end:
                errors.add(
                    ("accesses", k, "at"),
                    "access_outside_lifetime",
                    f"access at point {access.at} is outside the lifetime "
                    f"[{self.start}, {self.end}) of buffer {self.id!r}",
                    access.at,
                )
        errors.raise_if_any()
        if self.ranges is not None:
            object.__setattr__(self, "start", _Hull(self.start))
            object.__setattr__(self, "end", _Hull(self.end))
        return self

    def _check_mbarrier(self, errors: _Errors) -> None:
        if self.size != 8:
            errors.add(
                ("size",),
                "mbarrier_size",
                f"mbarrier {self.id!r} is an 8-byte object, not {self.size} bytes",
                self.size,
            )
        if self.accesses:
            errors.add(
                ("accesses",),
                "mbarrier_accesses",
                f"mbarrier {self.id!r} is accessed by the syncs naming it, not by accesses",
                len(self.accesses),
            )
        for field, value in (("ranges", self.ranges), ("swizzle", self.swizzle)):
            if value is not None:
                errors.add(
                    (field,),
                    "mbarrier_field",
                    f"mbarrier {self.id!r} takes no {field}",
                    value,
                )

    def _check_ranges(self, errors: _Errors) -> None:
        assert self.ranges is not None
        for k, (s, e) in enumerate(self.ranges):
            if e <= s:
                errors.add(
                    ("ranges", k),
                    "empty_lifetime",
                    f"range [{s}, {e}) of buffer {self.id!r} is empty: end must be greater "
                    "than start",
                    [s, e],
                )
            elif k and s < self.ranges[k - 1][1]:
                p = self.ranges[k - 1]
                errors.add(
                    ("ranges", k),
                    "ranges_overlap",
                    f"range [{s}, {e}) of buffer {self.id!r} starts before the previous range "
                    f"[{p[0]}, {p[1]}) ends; ranges must be sorted and disjoint",
                    [s, e],
                )


class Options(BaseModel):
    """How to plan."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    solver: str = Field(
        default="auto",
        min_length=1,
        max_length=64,
        json_schema_extra={"enum": [*SOLVER_NAMES]},
        description=(
            '"auto" (greedy, then exact methods while the bound is not met), "greedy", "exact", '
            '"search",\n'
            '"cpsat" (the exact extra), or one heuristic such as "size/best-fit". Default "auto".'
        ),
    )
    time_limit: float = Field(  # s
        default=10.0,
        gt=0,
        le=MAX_TIME_LIMIT,
        allow_inf_nan=False,
        description=(
            "Seconds the whole plan may take (0 < t <= 3600), parsing and checks included. "
            "Default 10."
        ),
    )
    sync: SyncPolicy = Field(
        default="insert",
        description=(
            'Barrier policy: "existing" (only the request\'s barriers), "insert" (the planner '
            "may add\n"
            'barriers where that saves memory), "none" (the caller synchronizes; the plan lists '
            "where).\n"
            'Default "insert".'
        ),
    )
    overflow: Literal["error", "spill"] = Field(
        default="error",
        description=(
            'When the peak of live bytes exceeds capacity: "error" (an infeasible plan with a\n'
            'certificate) or "spill" (cheapest buffers to a global-memory workspace). Default '
            '"error".'
        ),
    )
    barrier_candidates: list[Point] | None = Field(
        default=None,
        description='Program points where sync "insert" may add a barrier. Default: every point.',
    )
    max_new_barriers: int | None = Field(
        default=None,
        ge=0,
        le=MAX_POINT,
        description=(
            'Most barriers sync "insert" may add (0 is the same as "existing"). Default: no cap.'
        ),
    )
    shrink: bool = Field(  # plan each blockIdx-indexed buffer's per-block slice
        default=False,
        description=(
            "Plan only the slice of each blockIdx-indexed buffer one block touches, and report "
            "its\n"
            "index_base. Default false."
        ),
    )
    pareto: bool = Field(  # sync "insert": also return every non-dominated plan
        default=False,
        description=(
            'With sync "insert": also return every non-dominated (arena bytes, new barriers) '
            "plan.\n"
            "Default false."
        ),
    )

    gap_tolerance: int | float | None = Field(  # bytes (int) or a fraction of the bound
        default=None,
        exclude_if=absent,
        description=(
            "How far above the lower bound a plan may stay for the exact methods not to run, "
            "or to stop:\nbytes (an integer), or a fraction of the bound (a number below 1); 0 "
            "asks for a proof of\noptimality. Default: a millionth of the bound, and at most "
            "0.25 s of exact search on a gap\nsmaller than the largest alignment in the request."
        ),
    )

    @field_validator("gap_tolerance")
    @classmethod
    def _tolerance_in_range(cls, value: int | float | None) -> int | float | None:
        if isinstance(value, bool):
            raise PydanticCustomError(
                "gap_tolerance_type", f"gap_tolerance {value!r} is not a number of bytes"
            )
        if isinstance(value, int) and not 0 <= value <= MAX_SIZE:
            raise PydanticCustomError(
                "gap_tolerance_range",
                f"gap_tolerance {value} bytes is outside 0 .. {MAX_SIZE}",
            )
        if isinstance(value, float) and not 0.0 <= value < 1.0:
            raise PydanticCustomError(
                "gap_tolerance_range",
                f"gap_tolerance {value!r} as a fraction of the bound is outside [0, 1); "
                "give bytes as an integer",
            )
        return value

    @field_validator("solver")
    @classmethod
    def _known_solver(cls, value: str) -> str:
        if value not in SOLVER_NAMES:
            known = ", ".join([*METHODS, *HEURISTICS])
            close = difflib.get_close_matches(value, [*METHODS, *HEURISTICS], n=1, cutoff=0.6)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise PydanticCustomError(
                "unknown_solver",
                f"unknown solver {value!r}; {guess}known solvers: {known} (a heuristic also "
                "as greedy:NAME)",
            )
        return value


class TargetFigures(BaseModel):
    """A device the profile table lacks, given by its shared-memory figures."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        default="custom",
        min_length=1,
        max_length=64,
        description='A label for the device, echoed nowhere but in messages. Default "custom".',
    )
    capacity: Bytes = Field(
        description="Bytes of dynamic shared memory one block may use (with the opt-in)."
    )
    reserved: int = Field(  # bytes per resident block
        default=0,
        ge=0,
        le=MAX_SIZE,
        description="Bytes the system reserves per resident block (1024 on sm_80 and later). "
        "Default 0.",
    )
    blocks_per_sm: int = Field(
        ge=1,
        le=1024,
        description="Resident blocks per multiprocessor at most (the hardware cap).",
    )
    smem_per_sm: int | None = Field(  # bytes; None: capacity + reserved
        default=None,
        ge=1,
        le=MAX_SIZE,
        description="Shared memory per multiprocessor in bytes. Default: capacity + reserved.",
    )
    base_alignment: int = Field(  # bytes
        default=16,
        ge=1,
        le=MAX_ALIGNMENT,
        description=(
            "Largest alignment of the dynamic shared-memory base the device guarantees, a power "
            "of two;\nno buffer may need more. Default 16."
        ),
    )
    tma: bool = Field(
        default=False,
        description="Whether the device has TMA (swizzled tensor tiles). Default false.",
    )

    _alignment = field_validator("base_alignment")(_check_alignment)

    @model_validator(mode="after")
    def _per_sm(self) -> TargetFigures:
        if self.smem_per_sm is not None and self.smem_per_sm < self.capacity + self.reserved:
            errors = _Errors("TargetFigures")
            errors.add(
                ("smem_per_sm",),
                "smem_per_sm_too_small",
                f"smem_per_sm {self.smem_per_sm} is less than capacity {self.capacity} plus "
                f"reserved {self.reserved}: not even one block fits",
                self.smem_per_sm,
            )
            errors.raise_if_any()
        return self

    @property
    def profile(self) -> DeviceProfile:
        """The figures as a device profile."""
        per_sm = self.smem_per_sm
        return DeviceProfile(
            name=self.name,
            devices="given as figures",
            max_smem_per_block=self.capacity,
            smem_per_sm=self.capacity + self.reserved if per_sm is None else per_sm,
            reserved_per_block=self.reserved,
            max_blocks_per_sm=self.blocks_per_sm,
            base_alignment=self.base_alignment,
            vendor="other",
            tma=self.tma,
        )


# A two-phase kernel: A_s and B_s die at the barrier at 4, where C_s takes their bytes.
EXAMPLE: dict[str, Any] = {
    "name": "two_phase",
    "target": "sm_90",
    "alignment": 16,
    "barriers": [4],
    "buffers": [
        {"id": "A_s", "size": 8192, "start": 0, "end": 4},
        {"id": "B_s", "size": 8192, "start": 0, "end": 4},
        {"id": "C_s", "size": 16384, "start": 4, "end": 8},
    ],
    "options": {"sync": "existing", "time_limit": 1.0},
}


class PlanRequest(BaseModel):
    """The buffers of one kernel, their lifetimes and barriers, and how to plan them."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={"examples": [EXAMPLE]},
    )

    name: str = Field(
        default="kernel",
        max_length=256,
        description='Name of the kernel, echoed in the plan. Default "kernel".',
    )
    target: Annotated[str, Field(json_schema_extra={"enum": [*TARGETS]})] | TargetFigures | None = (
        Field(
            default=None,
            description=(
                "Device profile by name (sm_70 to sm_120, gfx90a, gfx942, gfx950; GET /targets), "
                "or a device\n"
                'the table lacks given as figures {"capacity", "reserved", "blocks_per_sm", ...}: '
                "its per-block\n"
                "shared memory is the capacity unless one is given, and it sets the launch figures "
                "and the base\nalignment the plan may assume. Default: none."
            ),
        )
    )
    capacity: int | None = Field(  # bytes; None: target's
        default=None,
        ge=1,
        le=MAX_SIZE,
        description=(
            "Bytes of shared memory available to the arena. Default: the target's per-block "
            "maximum, else\n"
            "unbounded."
        ),
    )
    alignment: int = Field(  # default per buffer, bytes
        default=1,
        ge=1,
        le=MAX_ALIGNMENT,
        description=(
            "Default alignment of every buffer's offset in bytes, a power of two. Default 1."
        ),
    )
    block: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        description=(
            "Threads per block [x, y, z] (1 to 3 numbers) for access patterns over threadIdx. "
            "Default:\n"
            "none."
        ),
    )
    grid: list[Annotated[int, Field(ge=1)]] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        description=(
            "Blocks per grid [x, y, z] (1 to 3 numbers) for access patterns over blockIdx. "
            "Default: none.\n"
            "    "
        ),
    )
    cluster: list[Annotated[int, Field(ge=1, le=16)]] | None = Field(
        default=None,
        min_length=1,
        max_length=3,
        exclude_if=absent,
        description=(
            "Thread-block cluster dimensions [x, y, z] (1 to 3 numbers; sm_90 and later, at "
            "most the\ntarget's cluster size). Default: no cluster."
        ),
    )
    barriers: list[Point] = Field(
        default_factory=list,
        description=(
            "Program points where the kernel already has a block-wide barrier (__syncthreads()); "
            "each\n"
            "runs before the accesses at its point. Default none."
        ),
    )
    loops: list[Loop] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'Point ranges that repeat: [{"start", "end", "trips"}], nested or disjoint; a '
            "barrier\n"
            "inside a loop runs on every iteration. Default none (straight-line)."
        ),
    )
    branches: list[Branch] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'Branches whose arms exclude each other: [{"arms": [[s, e], ...]}]; exactly one arm '
            "runs\n"
            "(a block-uniform condition), so buffers in different arms never conflict. Default "
            "none."
        ),
    )
    syncs: list[Sync] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            "Synchronisation besides block barriers: wait_group, mbarrier_wait, expect_tx, "
            "fence_proxy_async,\nmbarrier_arrive, named_barrier, cluster_barrier, each at a "
            "point; they complete and order\nasynchronous accesses. Default none."
        ),
    )
    partitions: list[Partition] = Field(
        default_factory=list,
        exclude_if=_empty,
        description=(
            'Warp-specialised partitions: [{"id", "threads": [first, end)}], each with its own '
            "program\norder, run concurrently and ordered only by syncs. Default none (one "
            "block of threads)."
        ),
    )
    buffers: list[Buffer] = (
        Field(  # required: a request without it is a mistake, not an empty kernel
            description="The kernel's temporary buffers (required; ids unique)."
        )
    )
    options: Options = Field(
        default_factory=Options,
        description="How to plan: solver, time limit, sync policy, overflow.",
    )

    _alignment = field_validator("alignment")(_check_alignment)
    _control_flow: bool = PrivateAttr(default=False)

    @field_validator("target")
    @classmethod
    def _known_target(cls, value: str | TargetFigures | None) -> str | TargetFigures | None:
        if isinstance(value, str) and value not in TARGETS:
            known = ", ".join(TARGETS)
            raise PydanticCustomError(
                "unknown_target", f"unknown target {value!r}; known targets: {known}"
            )
        return value

    @field_validator("block")
    @classmethod
    def _block(cls, value: list[int] | None) -> list[int] | None:
        result: list[int] | None = _normalize_dims(value, MAX_BLOCK, "block")
        return result

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, value: list[int] | None) -> list[int] | None:
        return None if value is None else [*value, *[1] * (3 - len(value))]

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: list[int] | None) -> list[int] | None:
        result: list[int] | None = _normalize_dims(value, MAX_GRID, "grid")
        return result

    @property
    def effective_capacity(self) -> int | None:
        """Bytes available: ``capacity`` if given, else the target's per-block maximum."""
        if self.capacity is not None:
            return self.capacity
        profile = self.profile
        return None if profile is None else profile.max_smem_per_block

    @property
    def profile(self) -> DeviceProfile | None:
        """The target's device profile: from the table, or from the figures given."""
        if self.target is None:
            return None
        if isinstance(self.target, str):
            return TARGETS[self.target]
        return self.target.profile

    @property
    def horizon(self) -> int:
        """One past the last program point any buffer is live at."""
        return max((b.end for b in self.buffers), default=0)

    def alignment_of(self, buffer: Buffer) -> int:
        """The buffer's alignment in bytes, defaulting to the request's; at least its
        element width when it declares a dtype (a typed pointer needs it)."""
        align = buffer.alignment if buffer.alignment is not None else self.alignment
        if buffer.dtype is not None:
            align = max(align, DTYPES[buffer.dtype].bytes)
        if buffer.swizzle is not None:
            align = max(align, SWIZZLE_ALIGNMENT[buffer.swizzle])
        if buffer.kind == "mbarrier":
            align = max(align, MBARRIER_ALIGNMENT)
        return align

    @property
    def max_alignment(self) -> int:
        """The largest alignment of any buffer (bytes; the request's default without any)."""
        return max((self.alignment_of(b) for b in self.buffers), default=self.alignment)

    @property
    def largest_alignment(self) -> int:
        """The alignment the arena base needs: the largest of the request and its buffers
        (bytes; docs/design.md, Offsets and the arena)."""
        return max([self.alignment, *(self.alignment_of(b) for b in self.buffers)])

    @property
    def states_base_alignment(self) -> bool:
        """Whether the plan states the base alignment it assumes (``launch.base_alignment``):
        for a request with a TMA tile or a target given as figures. Other plans leave it out,
        so plans of version-1 requests stay as they were; their base alignment is
        ``largest_alignment`` all the same."""
        return isinstance(self.target, TargetFigures) or any(
            b.swizzle is not None for b in self.buffers
        )

    @property
    def stated_base_alignment(self) -> int | None:
        """``largest_alignment`` where the plan states it, else None."""
        return self.largest_alignment if self.states_base_alignment else None

    @property
    def has_control_flow(self) -> bool:
        """Whether the request uses loops, branches or buffers with several ranges (wire format
        1.1): such a request is planned on its unrolled program."""
        return self._control_flow

    def executions_at(self, point: int) -> int:
        """How many times a barrier at the point runs: the product of the trips of the loops
        around it (unknown trips count as ``UNKNOWN_TRIPS``)."""
        return executions_at(self.loops, point)

    @model_validator(mode="after")
    def _semantics(self, info: Any) -> PlanRequest:
        errors = _Errors("PlanRequest")
        context = getattr(info, "context", None) or {}
        max_buffers = int(context.get("max_buffers", DEFAULT_MAX_BUFFERS))
        if len(self.buffers) > max_buffers:
            errors.add(
                ("buffers",),
                "too_many_buffers",
                f"{len(self.buffers)} buffers exceed the limit of {max_buffers}",
                len(self.buffers),
            )
            errors.raise_if_any()
        self._check_ids(errors)
        self._check_rings(errors)
        self._check_base_alignment(errors)
        self._check_pins(errors)
        self._check_points(errors)
        self._check_accesses(errors)
        ranged = any(b.ranges is not None for b in self.buffers)
        control_ok = True
        if self.loops or self.branches or ranged:
            control_ok = check_control(self.loops, self.branches, errors)
            if control_ok:
                check_ranges_vs_arms(self.buffers, self.branches, errors)
                check_ranges_vs_loops(self.buffers, self.loops, errors)
            self._control_flow = True
        check_cluster(self.cluster, self.grid, self.buffers, self.profile, errors)
        if self.cluster is not None:
            self._check_cluster_options(errors)
            # Planned on the program route: cluster barriers are chosen on its hazards.
            self._control_flow = True
        if (
            self.partitions
            or any(s.partition or s.partitions for s in self.syncs)
            or any(a.partition is not None for b in self.buffers for a in b.accesses)
        ):
            threads = None if self.block is None else self.block[0] * self.block[1] * self.block[2]
            check_partitions(
                self.partitions,
                self.buffers,
                self.syncs,
                self.loops,
                self.branches,
                threads,
                errors,
                cluster=self.cluster is not None,
            )
            self._check_partition_options(errors)
            # Planned on the partitions' happens-before order (planner.core.partitions).
            self._control_flow = True
        if self.syncs or self.has_async:
            if control_ok:
                check_syncs(
                    self.buffers,
                    self.syncs,
                    self.loops,
                    self.branches,
                    self.horizon,
                    errors,
                    waits=self.waits_allowed,
                )
            self._check_async_options(errors)
            # Planned on the program route: asynchronous completion and proxy fences add
            # conflicts that are no interval's.
            self._control_flow = True
        errors.raise_if_any()
        return self

    @property
    def waits_allowed(self) -> bool:
        """Whether a wait_group that completes an asynchronous access may be the plan's:
        inserted under sync "insert", required under "none" (with partitions, run by the
        partition that issued the access, also inside loops and branches)."""
        return self.options.sync in ("insert", "none")

    @property
    def has_async(self) -> bool:
        """Whether an access is asynchronous (``agent`` other than ``"threads"``) or a buffer
        is an mbarrier: such a request is planned on its lowered form."""
        return any(b.kind == "mbarrier" for b in self.buffers) or any(
            a.agent != "threads" for b in self.buffers for a in b.accesses
        )

    def _check_cluster_options(self, errors: _Errors) -> None:
        if self.options.shrink:
            errors.add(
                ("options", "shrink"),
                "shrink_with_cluster",
                "shrink plans per-block slices; a request with a cluster is planned whole (its "
                "arena is the same in every CTA of the cluster)",
                True,
            )
        if self.options.overflow == "spill":
            errors.add(
                ("options", "overflow"),
                "spill_with_cluster",
                "a request with a cluster is planned whole in shared memory, where the peer "
                "CTAs reach it; it cannot spill",
                "spill",
            )

    def _check_partition_options(self, errors: _Errors) -> None:
        if not self.partitions:
            return
        for i in self.rings:
            errors.add(
                ("buffers", i, "copies"),
                "copies_with_partitions",
                "a request with partitions gives each ring slot as its own buffer",
                self.buffers[i].id,
            )
        if self.options.shrink:
            errors.add(
                ("options", "shrink"),
                "shrink_with_partitions",
                "a request with partitions is planned whole",
                True,
            )
        if self.options.overflow == "spill":
            errors.add(
                ("options", "overflow"),
                "spill_with_partitions",
                "a request with partitions cannot spill",
                "spill",
            )

    def _check_async_options(self, errors: _Errors) -> None:
        if not self.has_async:
            return
        if self.options.shrink:
            errors.add(
                ("options", "shrink"),
                "shrink_with_async",
                "shrink plans per-block slices of thread accesses; a request with asynchronous "
                "accesses is planned whole",
                True,
            )
        if self.options.overflow == "spill":
            errors.add(
                ("options", "overflow"),
                "spill_with_async",
                "a request with asynchronous accesses cannot spill: TMA and wgmma address "
                "shared memory",
                "spill",
            )

    def _check_ids(self, errors: _Errors) -> None:
        seen: dict[str, int] = {}
        for i, b in enumerate(self.buffers):
            if b.id in seen:
                errors.add(
                    ("buffers", i, "id"),
                    "duplicate_id",
                    f"id {b.id!r} is already used by buffers[{seen[b.id]}]",
                    b.id,
                )
            else:
                seen[b.id] = i

    @property
    def rings(self) -> list[int]:
        """Indices of the buffers with copies (rings)."""
        return [i for i, b in enumerate(self.buffers) if b.copies is not None]

    def _check_rings(self, errors: _Errors) -> None:
        combos = 1
        for i in self.rings:
            copies = self.buffers[i].copies
            assert copies is not None
            combos *= copies.choices
            if combos > MAX_RING_CHOICES:
                errors.add(
                    ("buffers", i, "copies"),
                    "too_many_ring_choices",
                    f"the rings up to {self.buffers[i].id!r} leave {combos} combinations of "
                    f"depths open; at most {MAX_RING_CHOICES}",
                    copies.max,
                )
                return

    def _check_base_alignment(self, errors: _Errors) -> None:
        """A TMA tile needs a device with TMA, and no alignment may pass what the target
        guarantees for the base. A version-1 request (no TMA tile, a target by name) keeps
        its meaning: its alignments are taken as the caller's promise, as before."""
        profile = self.profile
        if profile is None:
            return
        figures = isinstance(self.target, TargetFigures)
        if figures and self.alignment > profile.base_alignment:
            errors.add(
                ("alignment",),
                "alignment_beyond_target",
                f"alignment {self.alignment} passes the {profile.base_alignment}-byte base "
                f"alignment target {profile.name!r} guarantees",
                self.alignment,
            )
        for i, b in enumerate(self.buffers):
            if b.swizzle is not None and not profile.tma:
                errors.add(
                    ("buffers", i, "swizzle"),
                    "swizzle_without_tma",
                    f"buffer {b.id!r} is a TMA tile (swizzle {b.swizzle!r}) but target "
                    f"{profile.name!r} has no TMA (sm_90 and later have it)",
                    b.swizzle,
                )
                continue
            if b.swizzle is None and not figures:
                continue
            align = self.alignment_of(b)
            if align > profile.base_alignment:
                field = "swizzle" if b.swizzle is not None else "alignment"
                why = f"swizzle {b.swizzle!r} needs" if field == "swizzle" else "needs"
                errors.add(
                    ("buffers", i, field),
                    "alignment_beyond_target",
                    f"buffer {b.id!r} {why} {align}-byte alignment of its absolute address, "
                    f"beyond the {profile.base_alignment}-byte base alignment target "
                    f"{profile.name!r} guarantees",
                    b.swizzle if field == "swizzle" else b.alignment,
                )

    def _check_pins(self, errors: _Errors) -> None:
        pinned = [(i, b) for i, b in enumerate(self.buffers) if b.offset is not None]
        for i, b in pinned:
            assert b.offset is not None
            align = self.alignment_of(b)
            if b.offset % align:
                errors.add(
                    ("buffers", i, "offset"),
                    "misaligned_offset",
                    f"pinned offset {b.offset} of {b.id!r} is not a multiple of its "
                    f"alignment {align}",
                    b.offset,
                )
        # Two pinned buffers that are live together and share a byte can never be planned.
        # Sweep in start order; live pinned extents stay disjoint and sorted by offset, so only
        # the neighbours of an insertion point can clash. A clashing buffer is not inserted.
        live: list[tuple[int, int, int]] = []  # (offset, end offset, index), sorted
        expiry: list[tuple[int, int, int, int]] = []  # heap of (end point, offset, end, index)
        for i, b in sorted(pinned, key=lambda ib: (ib[1].start, ib[0])):
            assert b.offset is not None
            while expiry and expiry[0][0] <= b.start:
                _, lo_, hi_, j = heapq.heappop(expiry)
                del live[bisect.bisect_left(live, (lo_, hi_, j))]
            lo, hi = b.offset, b.offset + b.size
            pos = bisect.bisect_left(live, (lo, hi, i))
            near = live[max(pos - 1, 0) : pos + 1]
            clash = next((x for x in near if x[0] < hi and lo < x[1]), None)
            if clash is not None:
                other = self.buffers[clash[2]]
                errors.add(
                    ("buffers", i, "offset"),
                    "pinned_overlap",
                    f"pinned {b.id!r} at [{lo}, {hi}) overlaps pinned {other.id!r} at "
                    f"[{clash[0]}, {clash[1]}) while both are live",
                    b.offset,
                )
                continue
            live.insert(pos, (lo, hi, i))
            heapq.heappush(expiry, (b.end, lo, hi, i))

    def _check_points(self, errors: _Errors) -> None:
        horizon = self.horizon
        for k, p in enumerate(self.barriers):
            if p > horizon:
                errors.add(
                    ("barriers", k),
                    "barrier_out_of_range",
                    f"barrier at point {p} is past the last point {horizon} of any lifetime",
                    p,
                )
        for k, p in enumerate(self.options.barrier_candidates or ()):
            if p > horizon:
                errors.add(
                    ("options", "barrier_candidates", k),
                    "barrier_out_of_range",
                    f"barrier candidate {p} is past the last point {horizon} of any lifetime",
                    p,
                )

    def _extent(self, var: str, access: Access) -> int | None:
        if var in THREAD_VARS:
            return None if self.block is None else self.block[THREAD_VARS[var]]
        if var in BLOCK_VARS:
            return None if self.grid is None else self.grid[BLOCK_VARS[var]]
        return access.loops.get(var)

    def _check_accesses(self, errors: _Errors) -> None:
        for i, b in enumerate(self.buffers):
            for k, access in enumerate(b.accesses):
                loc: Loc = ("buffers", i, "accesses", k)
                if access.index is None:
                    if access.bytes > b.size:
                        # A broadcast touches the buffer's whole elements; with none, the
                        # access would claim bytes the buffer does not have.
                        errors.add(
                            (*loc, "bytes"),
                            "access_outside_buffer",
                            f"a broadcast of {access.bytes}-byte elements is wider than buffer "
                            f"{b.id!r} of {b.size} bytes",
                            access.bytes,
                        )
                    continue
                lo = hi = access.offset  # element index range
                complete = True
                for var, coeff in access.index.items():
                    extent = self._extent(var, access)
                    if extent is None:
                        complete = False
                        if var in THREAD_VARS:
                            why = f"index variable {var!r} needs the request's block"
                        elif var in BLOCK_VARS:
                            why = f"index variable {var!r} needs the request's grid"
                        else:
                            why = (
                                f"index variable {var!r} is neither threadIdx/blockIdx nor a "
                                "declared loop"
                            )
                        errors.add((*loc, "index", var), "unknown_index_variable", why, var)
                        continue
                    span = coeff * (extent - 1)
                    lo += min(0, span)
                    hi += max(0, span)
                if not complete:
                    continue
                first, last = lo * access.bytes, (hi + 1) * access.bytes  # bytes, half-open
                if first < 0 or last > b.size:
                    errors.add(
                        (*loc, "index"),
                        "access_outside_buffer",
                        f"access touches bytes [{first}, {last}) outside buffer {b.id!r} of "
                        f"{b.size} bytes",
                        access.index,
                    )
