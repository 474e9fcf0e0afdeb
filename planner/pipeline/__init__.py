"""The planning pipeline: a request in, a checked plan out (see ``facade``)."""

from planner.pipeline.facade import plan, validate

__all__ = ["plan", "validate"]
