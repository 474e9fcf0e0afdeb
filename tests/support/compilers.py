"""The CUDA compiler for tests that build emitted code: where it is, and one object build."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NVCC = shutil.which("nvcc")


def nvcc_object(source: str, arch: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``source`` compiled by nvcc for ``arch`` to an object file in ``tmp_path``."""
    assert NVCC is not None
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    return subprocess.run(
        [NVCC, "-std=c++17", f"-arch={arch}", "-c", "-o", str(tmp_path / "k.o"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
