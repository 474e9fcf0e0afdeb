"""Device profiles: shared-memory limits per compute capability (docs/design.md, Device
profiles)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, NotRequired, TypedDict

__all__ = [
    "STATIC_SMEM_LIMIT",
    "TARGETS",
    "DeviceProfile",
    "LaunchFigures",
    "blocks_per_sm",
    "launch_figures",
    "profile_dicts",
]

STATIC_SMEM_LIMIT = 49152  # bytes; above this a kernel needs dynamic smem and the opt-in


@dataclass(frozen=True)
class DeviceProfile:
    """Shared-memory limits of one compute capability."""

    name: str
    devices: str
    max_smem_per_block: int  # bytes, dynamic, with the opt-in attribute
    smem_per_sm: int  # bytes
    reserved_per_block: int  # bytes the driver keeps per resident block
    max_blocks_per_sm: int
    # bytes: the largest alignment of the dynamic shared-memory base the device lets a kernel
    # rely on (an ``__align__`` on the ``extern __shared__`` arena); 16 where nothing more is
    # documented, 1024 where TMA's 128-byte swizzle needs it (sm_90 and later)
    base_alignment: int = 16
    vendor: str = "nvidia"  # "nvidia", "amd", or "other" for a device given as figures
    tma: bool = False  # the Tensor Memory Accelerator (swizzled tensor tiles): sm_90 and later


TARGETS: dict[str, DeviceProfile] = {
    p.name: p
    for p in (
        DeviceProfile("sm_70", "V100", 98304, 98304, 0, 32),
        DeviceProfile("sm_75", "T4", 65536, 65536, 0, 16),
        DeviceProfile("sm_80", "A100", 166912, 167936, 1024, 32),
        DeviceProfile("sm_86", "RTX 30xx, A10", 101376, 102400, 1024, 16),
        DeviceProfile("sm_87", "Jetson AGX Orin", 166912, 167936, 1024, 16),
        DeviceProfile("sm_89", "L4, RTX 4090", 101376, 102400, 1024, 24),
        DeviceProfile("sm_90", "H100, H200", 232448, 233472, 1024, 32, 1024, tma=True),
        DeviceProfile("sm_100", "B200, GB200", 232448, 233472, 1024, 32, 1024, tma=True),
        DeviceProfile("sm_103", "B300, GB300", 232448, 233472, 1024, 32, 1024, tma=True),
        DeviceProfile("sm_120", "RTX 50xx, RTX PRO 6000", 101376, 102400, 1024, 32, 1024, tma=True),
        # AMD: LDS per workgroup is the whole LDS of a compute unit; no reserved bytes; at
        # most 32 workgroups per compute unit (one wave each, 8 waves on each of 4 SIMDs).
        DeviceProfile("gfx90a", "MI210, MI250X", 65536, 65536, 0, 32, 16, "amd"),
        DeviceProfile("gfx942", "MI300X, MI300A, MI325X", 65536, 65536, 0, 32, 16, "amd"),
        DeviceProfile("gfx950", "MI350X, MI355X", 163840, 163840, 0, 32, 16, "amd"),
    )
}


def blocks_per_sm(profile: DeviceProfile, smem_bytes: int) -> int:
    """Resident blocks per SM as limited by shared memory alone (0 if one block cannot fit)."""
    if smem_bytes > profile.max_smem_per_block:
        return 0
    per_block = smem_bytes + profile.reserved_per_block
    if per_block == 0:
        return profile.max_blocks_per_sm
    return min(profile.smem_per_sm // per_block, profile.max_blocks_per_sm)


class LaunchFigures(TypedDict):
    """The fields of ``planner.core.models.Launch``."""

    dynamic_smem_bytes: int
    requires_opt_in: bool
    blocks_per_sm: int | None
    naive_blocks_per_sm: int | None
    base_alignment: NotRequired[int]


def launch_figures(
    target: str | DeviceProfile | None,
    arena_bytes: int,
    naive_bytes: int,
    base_alignment: int | None = None,
) -> LaunchFigures:
    """Launch needs of an arena, and the occupancy it wins over the naive sum of sizes;
    ``base_alignment`` (bytes) where the plan states it."""
    profile = TARGETS.get(target) if isinstance(target, str) else target
    figures = LaunchFigures(
        dynamic_smem_bytes=arena_bytes,
        requires_opt_in=arena_bytes > STATIC_SMEM_LIMIT,
        blocks_per_sm=None if profile is None else blocks_per_sm(profile, arena_bytes),
        naive_blocks_per_sm=None if profile is None else blocks_per_sm(profile, naive_bytes),
    )
    if base_alignment is not None:
        figures["base_alignment"] = base_alignment
    return figures


def profile_dicts() -> list[dict[str, Any]]:
    """Every profile as a plain dict, in table order (for JSON listings)."""
    return [asdict(p) for p in TARGETS.values()]
