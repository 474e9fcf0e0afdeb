"""Names and limits of what the tools generate and run: the benchmark families, the scaling
workloads and the bench's repeat counts.

The command line shows them in ``--help`` and checks flags against them, so they live in a
module that imports nothing: ``planner plan`` builds the whole parser without loading the
modules that only ``bench``, ``batch`` or ``selftest`` run.
"""

from __future__ import annotations

__all__ = [
    "EXPECT_SUFFIX",
    "FAMILIES",
    "FAMILY_IDS",
    "FILE_REPEAT",
    "MIN_BUFFERS",
    "MODEL_MAX_BUFFERS",
    "PLAN_SUFFIX",
    "RANDOM_REPEAT",
    "SCALING_KINDS",
    "SCALING_SIZES",
    "is_request_file",
]

# Each family's number is part of the seed of its instances: changing one changes them all.
FAMILY_IDS = {
    "guillotine": 1,
    "pinwheel": 2,
    "mixed": 3,
    "sparse": 4,
    "random-narrow": 5,
    "random-wide": 6,
    "model": 7,
}
FAMILIES = tuple(FAMILY_IDS)
MIN_BUFFERS = 5  # per family instance
MODEL_MAX_BUFFERS = 1_000_000  # per ``model`` instance; the tilings stop far lower

FILE_REPEAT = 3  # bench runs per file instance; the best time is reported
RANDOM_REPEAT = 1  # random instances are large: one run each

SCALING_KINDS = ("model", "random", "all-overlapping")
SCALING_SIZES = (10_000, 100_000, 1_000_000)  # buffers per case by default

# Files that sit beside a request NAME.json and are no requests themselves.
PLAN_SUFFIX = ".plan.json"  # a plan to check instead of planning
EXPECT_SUFFIX = ".expect.json"  # the statuses a batch run expects


def is_request_file(name: str) -> bool:
    """Whether a file name is a request's (``.json`` or ``.csv``), not a plan or an
    expectation beside one."""
    lower = name.lower()
    return lower.endswith((".json", ".csv")) and not lower.endswith((PLAN_SUFFIX, EXPECT_SUFFIX))
