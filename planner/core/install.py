"""How this installation was made, so that a message about a missing extra names a command
that works from where the user is.

The project is installed from a checkout (editable or not) or from a wheel; pip records the
source of a direct install in ``direct_url.json``. The hint reinstalls from that source with
the extra added, or, when the source is unknown, names the checkout to install from.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["DISTRIBUTION", "available", "install_hint"]

DISTRIBUTION = "alloc-planner"
_ROOT = Path(__file__).resolve().parent.parent  # a checkout's root, if this is one

# The module each extra adds, as importlib can look it up without importing it.
_MODULES = {
    "exact": "ortools",
    "server": "fastapi",
    "gpu": "cupy",
    "compare": "omnimalloc",
    "mlir": "iree.compiler",
    "triton": "triton",
}


def available(extra: str) -> bool:
    """Whether the extra's main dependency can be imported (found, not imported)."""
    try:
        return importlib.util.find_spec(_MODULES[extra]) is not None
    except (ImportError, ValueError):
        return False


def _source() -> tuple[str, bool] | None:
    """Where pip installed this distribution from, and whether editable; None if unknown."""
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    if text:
        try:
            info = json.loads(text)
            url = str(info["url"])
        except (ValueError, KeyError, TypeError):
            return None
        editable = bool(info.get("dir_info", {}).get("editable", False))
        parsed = urlparse(url)
        if parsed.scheme == "file":
            return unquote(parsed.path), editable
        return url, editable
    if (_ROOT / "pyproject.toml").is_file():
        return str(_ROOT), True  # a checkout run in place
    return None


def install_hint(extra: str) -> str:
    """A pip command that adds ``extra`` to this installation."""
    source = _source()
    if source is None:
        return f"pip install '<path to the {DISTRIBUTION} checkout>[{extra}]'"
    where, editable = source
    if where.endswith(".whl"):
        return f"pip install '{DISTRIBUTION}[{extra}] @ file://{where}'"
    flag = "-e " if editable else ""
    return f"pip install {flag}'{where}[{extra}]'"
