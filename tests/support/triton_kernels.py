# ruff: noqa: N803  (Triton kernels name their block sizes in capitals)
"""Kernels in the manner of Triton's tutorials (matmul, with the autotuner's configurations,
fused softmax, layer norm forward and backward, attention forward and backward, the persistent
TMA matmul), compiled for a CUDA target without a GPU (Triton ships ptxas)."""

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


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def layer_norm_bwd_dx_kernel(  # type: ignore[no-untyped-def]
    dx_ptr,
    dy_ptr,
    dw_ptr,
    db_ptr,
    x_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    lock_ptr,
    stride,
    n,
    GROUP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = tl.where(mask, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / n
    c2 = tl.sum(wdy, axis=0) / n
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(dx_ptr + row * stride + cols, dx, mask=mask)
    # Partial dw, db accumulated per group of rows under a spin lock, as the tutorial does.
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    lock_id = row % GROUP
    lock = lock_ptr + lock_id
    count = lock_ptr + GROUP + lock_id
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    first = tl.load(count)
    if first == 0:
        tl.atomic_xchg(count, 1)
    else:
        partial_dw += tl.load(dw_ptr + lock_id * n + cols, mask=mask)
        partial_db += tl.load(db_ptr + lock_id * n + cols, mask=mask)
    tl.store(dw_ptr + lock_id * n + cols, partial_dw, mask=mask)
    tl.store(db_ptr + lock_id * n + cols, partial_db, mask=mask)
    tl.atomic_xchg(lock, 0)


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def layer_norm_bwd_dwdb_kernel(  # type: ignore[no-untyped-def]
    dw_ptr, db_ptr, fdw_ptr, fdb_ptr, m, n, BM: tl.constexpr, BN: tl.constexpr
):
    pid = tl.program_id(0)
    cols = pid * BN + tl.arange(0, BN)
    dw = tl.zeros((BM, BN), dtype=tl.float32)
    db = tl.zeros((BM, BN), dtype=tl.float32)
    for i in range(0, m, BM):
        rows = i + tl.arange(0, BM)
        mask = (rows[:, None] < m) & (cols[None, :] < n)
        offs = rows[:, None] * n + cols[None, :]
        dw += tl.load(dw_ptr + offs, mask=mask, other=0.0)
        db += tl.load(db_ptr + offs, mask=mask, other=0.0)
    tl.store(fdw_ptr + cols, tl.sum(dw, axis=0), mask=cols < n)
    tl.store(fdb_ptr + cols, tl.sum(db, axis=0), mask=cols < n)


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def attention_bwd_kernel(  # type: ignore[no-untyped-def]
    q_ptr,
    k_ptr,
    v_ptr,
    do_ptr,
    dk_ptr,
    dv_ptr,
    m_ptr,
    delta_ptr,
    n_ctx,
    scale,
    BM: tl.constexpr,
    BN: tl.constexpr,
    D: tl.constexpr,
):
    # The dK/dV half of the tutorial's backward pass: one block of keys, every block of queries.
    start_n = tl.program_id(0) * BN
    offs_n = start_n + tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    k = tl.load(k_ptr + offs_n[:, None] * D + offs_d[None, :])
    v = tl.load(v_ptr + offs_n[:, None] * D + offs_d[None, :])
    dk = tl.zeros([BN, D], dtype=tl.float32)
    dv = tl.zeros([BN, D], dtype=tl.float32)
    for start_m in range(0, n_ctx, BM):
        offs_m = start_m + tl.arange(0, BM)
        q_t = tl.load(q_ptr + offs_m[None, :] * D + offs_d[:, None])
        m = tl.load(m_ptr + offs_m)
        qk_t = tl.dot(k, q_t)
        p_t = tl.math.exp2(qk_t - m[None, :])
        do = tl.load(do_ptr + offs_m[:, None] * D + offs_d[None, :])
        dv += tl.dot(p_t.to(tl.float16), do)
        delta = tl.load(delta_ptr + offs_m)
        dp_t = tl.dot(v, tl.trans(do)).to(tl.float32)
        ds_t = (p_t * (dp_t - delta[None, :])).to(tl.float16)
        dk += tl.dot(ds_t, tl.trans(q_t))
    tl.store(dv_ptr + offs_n[:, None] * D + offs_d[None, :], dv.to(tl.float16))
    tl.store(dk_ptr + offs_n[:, None] * D + offs_d[None, :], (dk * scale).to(tl.float16))


@triton.jit  # type: ignore[untyped-decorator, unused-ignore]
def matmul_tma_persistent_kernel(  # type: ignore[no-untyped-def]
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    # The tutorial's persistent matmul on device-side TMA descriptors.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    start_pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        offs_am = (tile_id // num_pid_n) * BM
        offs_bn = (tile_id % num_pid_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([offs_am, ki * BK])
            b = b_desc.load([offs_bn, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([offs_am, offs_bn], acc.to(tl.float16))


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


KERNELS["layer_norm_bwd"] = (
    layer_norm_bwd_dx_kernel,
    {
        **dict.fromkeys(("dx_ptr", "dy_ptr", "dw_ptr", "db_ptr", "x_ptr", "w_ptr"), "*fp16"),
        **dict.fromkeys(("mean_ptr", "rstd_ptr"), "*fp32"),
        "lock_ptr": "*i32",
        "stride": "i32",
        "n": "i32",
        "GROUP": "constexpr",
        "BLOCK": "constexpr",
    },
    {"GROUP": 64, "BLOCK": 1024},
    {"num_warps": 8},
)
KERNELS["layer_norm_bwd_dwdb"] = (
    layer_norm_bwd_dwdb_kernel,
    {
        **dict.fromkeys(("dw_ptr", "db_ptr", "fdw_ptr", "fdb_ptr"), "*fp16"),
        "m": "i32",
        "n": "i32",
        "BM": "constexpr",
        "BN": "constexpr",
    },
    {"BM": 32, "BN": 128},
    {"num_warps": 4},
)
KERNELS["attention_bwd"] = (
    attention_bwd_kernel,
    {
        **dict.fromkeys(("q_ptr", "k_ptr", "v_ptr", "do_ptr", "dk_ptr", "dv_ptr"), "*fp16"),
        **dict.fromkeys(("m_ptr", "delta_ptr"), "*fp32"),
        "n_ctx": "i32",
        "scale": "fp32",
        **dict.fromkeys(("BM", "BN", "D"), "constexpr"),
    },
    {"BM": 32, "BN": 64, "D": 64},
    {"num_warps": 4, "num_stages": 2},
)
KERNELS["matmul_tma_persistent"] = (
    matmul_tma_persistent_kernel,
    {
        **dict.fromkeys(("a_ptr", "b_ptr", "c_ptr"), "*fp16"),
        **dict.fromkeys(("M", "N", "K"), "i32"),
        **dict.fromkeys(("BM", "BN", "BK", "NUM_SMS"), "constexpr"),
    },
    {"BM": 128, "BN": 128, "BK": 64, "NUM_SMS": 132},
    {"num_warps": 4, "num_stages": 3},
)
HOPPER_ONLY = frozenset({"matmul_tma_persistent"})  # TMA: sm_90 and later
CASES = [
    (name, cap) for cap in (80, 90) for name in KERNELS if cap >= 90 or name not in HOPPER_ONLY
]

# The CUDA configurations of the matmul tutorial's autotuner: (BM, BN, BK, stages, warps).
AUTOTUNE = [
    (128, 256, 64, 3, 8),
    (64, 256, 32, 4, 4),
    (128, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (128, 32, 32, 4, 4),
    (64, 32, 32, 5, 2),
    (32, 64, 32, 5, 2),
]


def compile_autotuned(config: tuple[int, int, int, int, int], capability: int) -> Any:
    """The pipelined matmul (as the autotuner specializes it) in one tutorial configuration."""
    bm, bn, bk, stages, warps = config
    fn, signature, constexprs, _ = KERNELS["matmul_pipelined"]
    names = list(signature)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in _DIVISIBLE["matmul_pipelined"]}
    source = ASTSource(
        fn=fn,
        signature=signature,
        constexprs={**constexprs, "BM": bm, "BN": bn, "BK": bk},
        attrs=attrs,
    )
    options = {"num_warps": warps, "num_stages": stages}
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)


def source_of(name: str) -> tuple[ASTSource, dict[str, Any]]:
    """One kernel as ``triton.compile`` takes it: its source and its options."""
    fn, signature, constexprs, options = KERNELS[name]
    names = list(signature)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in _DIVISIBLE.get(name, ())}
    return ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs), options


def compile_kernel(name: str, capability: int) -> Any:
    """``triton.compile`` of one kernel for ``sm_<capability>``."""
    source, options = source_of(name)
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)
