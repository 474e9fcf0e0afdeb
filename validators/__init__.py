"""Checks that a plan keeps the contract: the exact static validator (DESIGN section 6)."""

from planner.validators.static import validate_plan

__all__ = ["validate_plan"]
