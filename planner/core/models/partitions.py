"""Warp-specialised partitions (docs/design.md, Warp-specialised partitions): a request's
``partitions`` (warp groups, each a range of the block's threads), the ``partition`` that
makes each access and sync, and the checks that tie them together.

Partitions run concurrently. Each has its own program order on the request's point axis;
points of two partitions are unordered unless a sync edge orders them (a block barrier, a
named barrier both take part in, an mbarrier arrive a later wait observes).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.models._base import Errors
from planner.core.models.partition_control import check_partition_control

if TYPE_CHECKING:
    from planner.core.models.control import Branch, Loop
    from planner.core.models.request import Buffer
    from planner.core.models.sync import Sync

__all__ = ["MAX_PARTITIONS", "Partition", "check_partitions"]

MAX_PARTITIONS = 16  # warp groups of one block: 1024 threads / 128, with room to spare

PartitionId = Annotated[str, Field(min_length=1, max_length=64)]


class Partition(BaseModel):
    """One warp group: an id and the block's threads ``[first, end)`` that run it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: PartitionId = Field(description="The partition's name, unique in the request.")
    threads: list[Annotated[int, Field(ge=0, le=1 << 20)]] = Field(
        min_length=2,
        max_length=2,
        description="Linear thread indices [first, end), half-open, e.g. [128, 256].",
    )

    @model_validator(mode="after")
    def _range(self) -> Partition:
        errors = Errors("Partition")
        first, end = self.threads
        if end <= first:
            errors.add(
                ("threads",), "empty_partition", f"threads [{first}, {end}) is empty", self.threads
            )
        errors.raise_if_any()
        return self

    @property
    def size(self) -> int:
        """Threads in the partition."""
        return self.threads[1] - self.threads[0]


def check_partitions(
    partitions: Sequence[Partition],
    buffers: Sequence[Buffer],
    syncs: Sequence[Sync],
    loops: Sequence[Loop],
    branches: Sequence[Branch],
    block_threads: int | None,
    errors: Errors,
    cluster: bool = False,
) -> None:
    """Partition ids and thread ranges, and a known partition on every access and sync of a
    partitioned request; no partition anywhere in a request without ``partitions``."""
    if not partitions:
        _check_unpartitioned(buffers, syncs, errors)
        return
    names = {p.id for p in partitions}
    _check_partition_list(partitions, block_threads, errors)
    if loops or branches:
        check_partition_control(loops, branches, cluster, errors)
    _check_partitioned_buffers(buffers, names, errors)
    _check_partitioned_syncs(syncs, names, errors)


def _check_unpartitioned(buffers: Sequence[Buffer], syncs: Sequence[Sync], errors: Errors) -> None:
    """No access and no sync names a partition in a request without ``partitions``."""
    for i, b in enumerate(buffers):
        for k, a in enumerate(b.accesses):
            if a.partition is not None:
                errors.add(
                    ("buffers", i, "accesses", k, "partition"),
                    "unknown_partition",
                    f"access of {b.id!r} names partition {a.partition!r}; the request "
                    "has no partitions",
                    a.partition,
                )
    for k, s in enumerate(syncs):
        if s.partition is not None or s.partitions is not None:
            errors.add(
                ("syncs", k, "partition"),
                "unknown_partition",
                f"{s.kind} at point {s.at} names a partition; the request has no partitions",
                s.partition,
            )


def _check_partition_list(
    partitions: Sequence[Partition], block_threads: int | None, errors: Errors
) -> None:
    """At most ``MAX_PARTITIONS`` partitions, unique ids, thread ranges inside the block
    that do not overlap."""
    if len(partitions) > MAX_PARTITIONS:
        errors.add(
            ("partitions",),
            "too_many_partitions",
            f"{len(partitions)} partitions exceed the limit of {MAX_PARTITIONS}",
            len(partitions),
        )
    seen: dict[str, int] = {}
    spans = sorted((p.threads[0], p.threads[1], k) for k, p in enumerate(partitions))
    for k, p in enumerate(partitions):
        if p.id in seen:
            errors.add(
                ("partitions", k, "id"),
                "duplicate_partition",
                f"partition id {p.id!r} is already used by partitions[{seen[p.id]}]",
                p.id,
            )
        seen.setdefault(p.id, k)
        if block_threads is not None and p.threads[1] > block_threads:
            errors.add(
                ("partitions", k, "threads"),
                "partition_outside_block",
                f"partition {p.id!r} runs threads {p.threads} past the block's {block_threads}",
                p.threads,
            )
    for (_, end, _), (first, _, k) in itertools.pairwise(spans):
        if first < end:
            errors.add(
                ("partitions", k, "threads"),
                "partitions_overlap",
                f"partition {partitions[k].id!r} shares threads with another partition",
                partitions[k].threads,
            )


def _check_partitioned_buffers(buffers: Sequence[Buffer], names: set[str], errors: Errors) -> None:
    """One lifetime per buffer, and a known partition on every access."""
    for i, b in enumerate(buffers):
        if b.ranges is not None:
            errors.add(
                ("buffers", i, "ranges"),
                "partitions_ranges",
                f"buffer {b.id!r}: a request with partitions gives one lifetime per buffer",
                b.ranges,
            )
        for k, a in enumerate(b.accesses):
            loc = ("buffers", i, "accesses", k, "partition")
            if a.partition is None:
                errors.add(
                    loc,
                    "missing_partition",
                    f"access of {b.id!r} at point {a.at}: name the partition that makes it",
                    None,
                )
            elif a.partition not in names:
                errors.add(loc, "unknown_partition", f"no partition {a.partition!r}", a.partition)


def _check_partitioned_syncs(syncs: Sequence[Sync], names: set[str], errors: Errors) -> None:
    """The partitions taking part in each named barrier, the partition running each other
    sync (a cluster barrier names none)."""
    for k, s in enumerate(syncs):
        if s.kind == "named_barrier":
            if s.partition is not None:
                errors.add(
                    ("syncs", k, "partition"),
                    "partition_not_allowed",
                    "a named_barrier lists the partitions taking part in partitions",
                    s.partition,
                )
            if not s.partitions:
                errors.add(
                    ("syncs", k, "partitions"),
                    "missing_partition",
                    f"named_barrier at point {s.at}: list the partitions taking part",
                    None,
                )
            for name in s.partitions or []:
                if name not in names:
                    errors.add(
                        ("syncs", k, "partitions"),
                        "unknown_partition",
                        f"no partition {name!r}",
                        name,
                    )
            continue
        if s.kind == "cluster_barrier":
            continue
        if s.partition is None:
            errors.add(
                ("syncs", k, "partition"),
                "missing_partition",
                f"{s.kind} at point {s.at}: name the partition that runs it",
                None,
            )
        elif s.partition not in names:
            errors.add(
                ("syncs", k, "partition"),
                "unknown_partition",
                f"no partition {s.partition!r}",
                s.partition,
            )
