"""Where the repository and the test tree are, for tests at any depth."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The tests/ folder: golden files and data live here."""
ROOT = TESTS.parent
"""The repository root."""
