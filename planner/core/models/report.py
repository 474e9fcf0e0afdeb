"""What the static validator says about a plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ValidationReport", "Violation", "ViolationCode"]

ViolationCode = Literal[
    "overlap",  # two buffers live at the same time share a byte
    "misaligned",  # offset negative or not a multiple of the buffer's alignment
    "pinned_moved",  # a buffer pinned by the request is placed elsewhere
    "over_capacity",  # a plan that claims to fit uses more than the capacity
    "missing_barrier",  # a reuse with no barrier between the last and the first access
    "bad_barrier",  # barrier lists that contradict the request or its sync policy
    "wrong_arena",  # arena_bytes differs from max(offset + size)
    "wrong_size",  # a placement's size differs from its buffer's
    "missing_buffer",  # a request buffer with no placement
    "unknown_buffer",  # a placement for no request buffer
    "duplicate_buffer",  # two placements for one buffer
    "race",  # emulator: two threads touch a byte for two buffers in one epoch, one writes
    "clobbered",  # emulator: a read finds another buffer's stamp on a byte its buffer wrote
    "bad_alias",  # a claimed alias whose shared bytes are not touched by one thread only
    "bad_footprint",  # a footprint that differs from the per-block slice the accesses touch
    "too_many_paths",  # loops and branches unroll to more executions than a validator checks
    "missing_fence",  # generic-proxy writes, then an async-proxy access, with no proxy fence
    "missing_inval",  # an mbarrier's bytes reused with no mbarrier_inval after its last use
    "missing_wait",  # an asynchronous access no sync of the request or the plan completes
    "missing_cluster_barrier",  # cluster-scoped bytes reused with no cluster barrier between
]


class Violation(BaseModel):
    """One way a plan breaks the contract."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: ViolationCode = Field(description="The kind of violation, a stable code.")
    message: str = Field(description="What is wrong, naming buffers, bytes and points.")
    buffers: list[str] = Field(default_factory=list, description="The buffers involved.")
    point: int | None = Field(default=None, description="The program point, where one applies.")


class ValidationReport(BaseModel):
    """Every violation found; ``valid`` when there is none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    valid: bool = Field(description="No violation was found.")
    violations: list[Violation] = Field(default_factory=list, description="Every violation.")
    truncated: bool = Field(default=False, description="More violations exist than are listed.")
