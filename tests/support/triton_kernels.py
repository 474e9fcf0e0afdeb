# ruff: noqa: N803  (Triton kernels name their block sizes in capitals)
"""Kernels in the manner of Triton's tutorials (matmul, fused softmax, layer norm, attention
forward), compiled for a CUDA target without a GPU (Triton ships ptxas)."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def matmul_kernel(  # type: ignore[no-untyped-def]
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_am = pid_m * BM + tl.arange(0, BM)
    offs_bn = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_bn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c = acc.to(tl.float16)
    tl.store(c_ptr + offs_am[:, None] * scm + offs_bn[None, :] * scn, c)


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * stride + offs, mask=offs < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride + offs, num / den, mask=offs < n_cols)


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n, eps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + row * stride + offs, d * rstd * w + b, mask=mask)


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def attention_kernel(  # type: ignore[no-untyped-def]
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    n_ctx,
    scale,
    BM: tl.constexpr,
    BN: tl.constexpr,
    D: tl.constexpr,
):
    start_m = tl.program_id(0)
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    for start_n in range(0, n_ctx, BN):
        k = tl.load(k_ptr + (start_n + offs_n)[None, :] * D + offs_d[:, None])
        qk = tl.dot(q, k) * scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp(qk - m_ij[:, None])
        alpha = tl.exp(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + (start_n + offs_n)[:, None] * D + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(o_ptr + offs_m[:, None] * D + offs_d[None, :], acc.to(tl.float16))


_MATMUL_SIG = {
    **dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*fp16"),
    **dict.fromkeys(("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn"), "i32"),
    **dict.fromkeys(("BM", "BN", "BK"), "constexpr"),
}
KERNELS: dict[str, tuple[Any, dict[str, str], dict[str, Any], dict[str, Any]]] = {
    "matmul": (
        matmul_kernel,
        _MATMUL_SIG,
        {"BM": 128, "BN": 128, "BK": 32},
        {"num_warps": 4, "num_stages": 3},
    ),
    "softmax": (
        softmax_kernel,
        {
            "out_ptr": "*fp32",
            "in_ptr": "*fp32",
            "stride": "i32",
            "n_cols": "i32",
            "BLOCK": "constexpr",
        },
        {"BLOCK": 1024},
        {"num_warps": 4},
    ),
    "layer_norm": (
        layer_norm_kernel,
        {
            "x_ptr": "*fp16",
            "y_ptr": "*fp16",
            "w_ptr": "*fp32",
            "b_ptr": "*fp32",
            "stride": "i32",
            "n": "i32",
            "eps": "fp32",
            "BLOCK": "constexpr",
        },
        {"BLOCK": 1024},
        {"num_warps": 8},
    ),
    "attention": (
        attention_kernel,
        {
            "q_ptr": "*fp16",
            "k_ptr": "*fp16",
            "v_ptr": "*fp16",
            "o_ptr": "*fp16",
            "n_ctx": "i32",
            "scale": "fp32",
            "BM": "constexpr",
            "BN": "constexpr",
            "D": "constexpr",
        },
        {"BM": 64, "BN": 64, "D": 64},
        {"num_warps": 4, "num_stages": 2},
    ),
}


# The matmul as Triton's autotuner specializes it: unit strides as constants, pointers and the
# other strides divisible by 16. Then the loads are cp.async copies and the loop is pipelined
# (multi-buffered operand tiles in shared memory).
_UNIT = ("sak", "sbn", "scn")
KERNELS["matmul_pipelined"] = (
    matmul_kernel,
    {**_MATMUL_SIG, **dict.fromkeys(_UNIT, "constexpr")},
    {"BM": 128, "BN": 128, "BK": 32, **dict.fromkeys(_UNIT, 1)},
    {"num_warps": 4, "num_stages": 3},
)
_DIVISIBLE = {"matmul_pipelined": ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "sam", "sbk", "scm")}


def compile_kernel(name: str, capability: int) -> Any:
    """``triton.compile`` of one kernel for ``sm_<capability>``."""
    fn, signature, constexprs, options = KERNELS[name]
    names = list(signature)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in _DIVISIBLE.get(name, ())}
    source = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)
