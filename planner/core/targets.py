"""Device profiles: shared-memory limits per compute capability (docs/design.md, Device
profiles)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, TypedDict

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


TARGETS: dict[str, DeviceProfile] = {
    p.name: p
    for p in (
        DeviceProfile("sm_70", "V100", 98304, 98304, 0, 32),
        DeviceProfile("sm_75", "T4", 65536, 65536, 0, 16),
        DeviceProfile("sm_80", "A100", 166912, 167936, 1024, 32),
        DeviceProfile("sm_86", "RTX 30xx, A10", 101376, 102400, 1024, 16),
        DeviceProfile("sm_89", "L4, RTX 4090", 101376, 102400, 1024, 24),
        DeviceProfile("sm_90", "H100, H200", 232448, 233472, 1024, 32),
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


def launch_figures(target: str | None, arena_bytes: int, naive_bytes: int) -> LaunchFigures:
    """Launch needs of an arena, and the occupancy it wins over the naive sum of sizes."""
    profile = TARGETS.get(target) if target is not None else None
    return LaunchFigures(
        dynamic_smem_bytes=arena_bytes,
        requires_opt_in=arena_bytes > STATIC_SMEM_LIMIT,
        blocks_per_sm=None if profile is None else blocks_per_sm(profile, arena_bytes),
        naive_blocks_per_sm=None if profile is None else blocks_per_sm(profile, naive_bytes),
    )


def profile_dicts() -> list[dict[str, Any]]:
    """Every profile as a plain dict, in table order (for JSON listings)."""
    return [asdict(p) for p in TARGETS.values()]
