"""Thread-block clusters (docs/design.md, Clusters): which targets run them, how large, and
which buffers peer CTAs touch.

A request's ``cluster`` gives the cluster's dimensions; a buffer's ``scope: "cluster"`` says
that CTAs of the cluster other than its own touch its bytes (distributed shared memory, a
multicast TMA load), so a reuse of those bytes by another buffer needs a cluster barrier
(``barrier.cluster.arrive`` + ``barrier.cluster.wait``) between the two, not a block barrier:
a block barrier orders only the CTA's own threads. The arena is the same in every CTA of the
cluster (one kernel, one plan), so a peer's copy of a buffer sits at the same offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.core.models._base import Errors
    from planner.core.models.request import Buffer
    from planner.core.models.sync import Sync
    from planner.core.targets import DeviceProfile

__all__ = [
    "MAX_CLUSTER",
    "PORTABLE_CLUSTER",
    "check_cluster",
    "cluster_barrier_points",
    "cluster_size",
    "is_cluster_pair",
]

# CTAs: the portable cluster size (CUDA programming guide, Thread Block Clusters)
PORTABLE_CLUSTER = 8
# CTAs a cluster may hold per target, with cudaFuncAttributeNonPortableClusterSizeAllowed past
# the portable 8 (16 on sm_90 and the sm_100 family); sm_120 keeps to the portable size.
MAX_CLUSTER: dict[str, int] = {"sm_90": 16, "sm_100": 16, "sm_103": 16, "sm_120": 8}


def cluster_size(dims: Sequence[int]) -> int:
    """CTAs in a cluster of ``dims``."""
    n = 1
    for d in dims:
        n *= d
    return n


def cluster_barrier_points(syncs: Sequence[Sync]) -> list[int]:
    """Points of the request's cluster barriers, sorted."""
    return sorted({s.at for s in syncs if s.kind == "cluster_barrier"})


def is_cluster_pair(a: Buffer, b: Buffer) -> bool:
    """Whether a reuse between two different buffers needs a cluster barrier: a peer CTA
    touches the bytes of one of them."""
    return a is not b and (a.scope == "cluster" or b.scope == "cluster")


def check_cluster(
    cluster: list[int] | None,
    grid: list[int] | None,
    buffers: Sequence[Buffer],
    profile: DeviceProfile | None,
    errors: Errors,
) -> None:
    """A cluster needs a target that runs clusters (sm_90 and later), at most its cluster
    limit of CTAs, and a grid of whole clusters; a cluster-scoped buffer needs a cluster."""
    if cluster is None:
        for i, b in enumerate(buffers):
            if b.scope == "cluster":
                errors.add(
                    ("buffers", i, "scope"),
                    "scope_without_cluster",
                    f"buffer {b.id!r} is cluster-scoped but the request gives no cluster "
                    "dimensions (cluster)",
                    b.scope,
                )
        return
    limit = None if profile is None else MAX_CLUSTER.get(profile.name)
    if profile is None or limit is None or profile.devices == "given as figures":
        where = "no target" if profile is None else f"target {profile.name!r}"
        errors.add(
            ("cluster",),
            "cluster_unsupported",
            f"a thread-block cluster {cluster} needs a target that runs clusters (sm_90, "
            f"sm_100, sm_103, sm_120); the request has {where}",
            cluster,
        )
        return
    n = cluster_size(cluster)
    if n > limit:
        errors.add(
            ("cluster",),
            "cluster_too_large",
            f"cluster {cluster} has {n} CTAs; target {profile.name!r} runs at most {limit} "
            f"({PORTABLE_CLUSTER} portable)",
            cluster,
        )
    if grid is not None:
        for axis, (g, c) in enumerate(zip(grid, cluster, strict=True)):
            if g % c:
                errors.add(
                    ("grid", axis),
                    "grid_not_multiple_of_cluster",
                    f"grid[{axis}] = {g} is not a multiple of cluster[{axis}] = {c}: a grid "
                    "is made of whole clusters",
                    g,
                )
