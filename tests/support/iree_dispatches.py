"""IREE dispatches for the MLIR bridge's tests and its measured table: a matmul, a softmax, a
row reduction, a convolution and an attention, compiled with the ``iree-compile`` of the
``mlir`` extra for CUDA sm_80 and ROCm gfx942 (no GPU needed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

COMPILE = Path(sys.executable).with_name("iree-compile")
Compiled = tuple[str, int | None]  # IREE's IR, and the workgroup memory IREE gives (bytes)

MATMUL = """
func.func @matmul(%a: tensor<512x256xf16>, %b: tensor<256x512xf16>) -> tensor<512x512xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.matmul ins(%a, %b : tensor<512x256xf16>, tensor<256x512xf16>)
      outs(%f : tensor<512x512xf32>) -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}
"""
SOFTMAX = """
func.func @softmax(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %e = tensor.empty() : tensor<64x1024xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<64x1024xf32>)
      outs(%e : tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %r : tensor<64x1024xf32>
}
"""
REDUCTION = """
func.func @row_sum(%x: tensor<512x4096xf32>) -> tensor<512xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<512xf32>) -> tensor<512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
      iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<512x4096xf32>) outs(%f : tensor<512xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<512xf32>
  return %r : tensor<512xf32>
}
"""
CONVOLUTION = """
func.func @conv(%x: tensor<1x34x34x64xf16>, %w: tensor<3x3x64x128xf16>)
    -> tensor<1x32x32x128xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x32x128xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<1x32x32x128xf32>)
      -> tensor<1x32x32x128xf32>
  %r = linalg.conv_2d_nhwc_hwcf
      {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x34x34x64xf16>, tensor<3x3x64x128xf16>)
      outs(%f : tensor<1x32x32x128xf32>) -> tensor<1x32x32x128xf32>
  return %r : tensor<1x32x32x128xf32>
}
"""
ATTENTION = """
func.func @attention(%q: tensor<4x1024x64xf16>, %k: tensor<4x1024x64xf16>,
    %v: tensor<4x1024x64xf16>) -> tensor<4x1024x64xf16> {
  %scale = arith.constant 0.125 : f16
  %e = tensor.empty() : tensor<4x1024x64xf16>
  %r = iree_linalg_ext.attention <{indexing_maps = [
      affine_map<(b, m, n, k1, k2) -> (b, m, k1)>,
      affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>,
      affine_map<(b, m, n, k1, k2) -> (b, k2, n)>,
      affine_map<(b, m, n, k1, k2) -> ()>,
      affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}>
      ins(%q, %k, %v, %scale : tensor<4x1024x64xf16>, tensor<4x1024x64xf16>,
          tensor<4x1024x64xf16>, f16)
      outs(%e : tensor<4x1024x64xf16>) {
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  } -> tensor<4x1024x64xf16>
  return %r : tensor<4x1024x64xf16>
}
"""
SOURCES = {
    "matmul": MATMUL,
    "softmax": SOFTMAX,
    "reduction": REDUCTION,
    "convolution": CONVOLUTION,
    "attention": ATTENTION,
}
CUDA = ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]
ROCM = ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"]
TARGETS = {"cuda": CUDA, "rocm": ROCM}
DISPATCHES = [(t, name) for t in TARGETS for name in SOURCES]


def compile_dispatch(source: str, flags: list[str], tmp: Path) -> tuple[str, int | None]:
    """IREE's IR where workgroup memory is allocated (after its pad-dynamic-alloc pass, the
    whole module), and the workgroup memory IREE itself gives the dispatch (bytes)."""
    src = tmp / "in.mlir"
    src.write_text(source)
    out = tmp / "out.mlir"
    done = subprocess.run(
        [
            str(COMPILE),
            str(src),
            *flags,
            "--compile-to=executable-targets",
            "--mlir-print-ir-after=iree-codegen-pad-dynamic-alloc",
            "--mlir-print-ir-module-scope",
            "--mlir-disable-threading",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    dump = done.stderr.split("\n", 1)[1]  # the "IR Dump After" header goes
    found = re.search(r"workgroup_local_memory = (\d+)", out.read_text())
    return dump, int(found.group(1)) if found else None
