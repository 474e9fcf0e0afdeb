"""Checks that a plan keeps the contract (docs/design.md, Validation), on the ground layer
alone: the exact static check of every plan (``static``); the kernel program a plan implies
(``program``), run byte by byte on the CPU by the emulator (``emulator``) and on a GPU by the
CUDA harness (``cuda``, ``cuda_kernel`` and ``kernel.cu``); and planted faults (``faults``)
that show each check catching what it must."""

from planner.validators.static import validate_plan

__all__ = ["validate_plan"]
