"""Emitters: a plan as CUDA C++, as MLIR, or as an SVG memory map.

Each takes the request and a plan of it (already checked by the static validator) and
returns text; none of them plans anything.
"""

from planner.emit.cuda import CudaSnippet, cuda_snippet, emit_cuda
from planner.emit.mlir import emit_mlir
from planner.emit.svg import emit_svg

EMITTERS = {"cuda": emit_cuda, "mlir": emit_mlir, "svg": emit_svg}

__all__ = ["EMITTERS", "CudaSnippet", "cuda_snippet", "emit_cuda", "emit_mlir", "emit_svg"]
