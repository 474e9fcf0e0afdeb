"""What an operator may tune about the service; one frozen object per app."""

from __future__ import annotations

from dataclasses import dataclass

from planner.models import DEFAULT_MAX_BUFFERS

__all__ = ["Settings"]

MAX_BODY_BYTES = 32 << 20  # 32 MiB: about 150k buffers with access patterns


@dataclass(frozen=True)
class Settings:
    """Limits on one request; ``create_app(Settings(...))`` lets tests shrink them."""

    max_buffers: int = DEFAULT_MAX_BUFFERS
    max_body_bytes: int = MAX_BODY_BYTES
