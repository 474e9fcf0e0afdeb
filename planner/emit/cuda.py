"""The plan as CUDA C++: the ``extern __shared__`` arena, one typed pointer per buffer at its
offset, the barrier points, and the host-side opt-in when the arena needs it.

Buffer ids and the request's name appear only as C identifiers derived from them (valid,
unique, never a keyword) and, where the identifier differs from the id, as a JSON-quoted
label in a line comment (see ``planner.emit._common``): no id can add a line of code.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.core.models import Plan, PlanRequest
from planner.core.targets import STATIC_SMEM_LIMIT
from planner.emit._common import (
    OWN_OPS,
    Placed,
    SyncCall,
    barrier_notes,
    identifiers,
    max_alignment,
    outline_lines,
    placed,
    quoted,
    status_warning,
    sync_calls,
    sync_notes,
)

__all__ = [
    "ARENA",
    "HELPERS",
    "WORKSPACE",
    "CudaSnippet",
    "call_table",
    "cuda_snippet",
    "emit_cuda",
]

ARENA = "smem_arena"  # the extern __shared__ array
WORKSPACE = "workspace"  # the kernel's global-memory workspace parameter, when buffers spill
_BLOCK_BASE = "workspace_block"  # this block's slice of the workspace
_SYNTAX = {
    "loop": "for (...)",
    "if": "if (...)",
    "elif": "} else if (...)",
    "else": "} else",
    "end": "}",
}
_INCLUDES = {"__half": "cuda_fp16.h", "__nv_bfloat16": "cuda_bf16.h"}


@dataclass(frozen=True)
class CudaSnippet:
    """The snippet in its three parts: file scope, kernel body, host code before the launch."""

    kernel: str  # the kernel's name: the request's name as a C identifier
    includes: str
    device: str
    host: str

    @property
    def text(self) -> str:
        return "\n".join(part for part in (self.includes, self.device, self.host) if part)


CLUSTER_BARRIER = "planner_cluster_barrier"
# The cluster barrier the plan relies on (PTX ISA, barrier.cluster): every thread of every CTA
# of the cluster arrives, then waits for all; release and acquire by default.
_CLUSTER_HELPER = f"""
// barrier.cluster.arrive + barrier.cluster.wait: call {CLUSTER_BARRIER}() at each cluster
// barrier point below (every thread of the CTA, as __syncthreads()).
__device__ __forceinline__ void {CLUSTER_BARRIER}() {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "cluster barriers need sm_90 or later"
#else
  asm volatile("barrier.cluster.arrive.aligned;\\n\\tbarrier.cluster.wait.aligned;" ::: "memory");
#endif
}}
"""

FENCE_PROXY_ASYNC = "planner_fence_proxy_async"
# The proxy fence a reuse by TMA or wgmma of thread-written bytes relies on (PTX ISA,
# membar/fence: fence.proxy.async), before the barrier that follows it.
_FENCE_HELPER = f"""
// fence.proxy.async.shared::cta: call {FENCE_PROXY_ASYNC}() at each proxy fence point below.
__device__ __forceinline__ void {FENCE_PROXY_ASYNC}() {{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "fence.proxy.async needs sm_90 or later"
#else
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}}
"""


# The other synchronisation a plan relies on, one helper per operation in inline PTX (PTX ISA:
# mbarrier, bar.sync, cp.async.wait_group, cp.async.bulk.wait_group, wgmma.wait_group), each
# refused by an #error below the architecture that has it (wgmma: see _guard). An mbarrier is
# the 8-byte shared object the pointer given points at.
_SMEM = "static_cast<unsigned>(__cvta_generic_to_shared(bar))"


def _guard(test: str, message: str, body: list[str]) -> list[str]:
    if test == _FEATURE:
        # Below sm_90 an error; the generic PTX nvcc builds besides the sm_90a code (and a
        # plain sm_90 build) has no wgmma: a trap there, as CUTLASS does.
        return [
            "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900",
            f'#error "{message}"',
            f"#elif defined(__CUDA_ARCH__) && {test}",
            "  __trap();  // not sm_90a code: no wgmma here",
            "#else",
            *body,
            "#endif",
        ]
    return [
        f"#if defined(__CUDA_ARCH__) && {test}",
        f'#error "{message}"',
        "#else",
        *body,
        "#endif",
    ]


def _helper(head: str, guard: tuple[str, str] | None, body: list[str]) -> list[str]:
    inner = [f"  {line}" for line in body]
    lines = inner if guard is None else _guard(*guard, inner)
    return [f"__device__ __forceinline__ void {head} {{", *lines, "}"]


_SM80 = ("__CUDA_ARCH__ < 800", "{} needs sm_80 or later")
_SM90 = ("__CUDA_ARCH__ < 900", "{} needs sm_90 or later")
_FEATURE = "!defined(__CUDA_ARCH_FEAT_SM90_ALL)"
_SM90A = (_FEATURE, "{} needs sm_90a")


def _arch(guard: tuple[str, str], what: str) -> tuple[str, str]:
    return guard[0], guard[1].format(what)


MBARRIER_INIT = "planner_mbarrier_init"
MBARRIER_INVAL = "planner_mbarrier_inval"
MBARRIER_ARRIVE = "planner_mbarrier_arrive"
MBARRIER_EXPECT_TX = "planner_mbarrier_arrive_expect_tx"
MBARRIER_WAIT = "planner_mbarrier_wait"
NAMED_BARRIER = "planner_named_barrier"
WAIT_GROUP = "planner_wait_group"
BULK_WAIT_GROUP = "planner_bulk_wait_group"
BULK_WAIT_GROUP_READ = "planner_bulk_wait_group_read"
WGMMA_WAIT_GROUP = "planner_wgmma_wait_group"
HELPERS = {
    "mbarrier_init": MBARRIER_INIT,
    "mbarrier_inval": MBARRIER_INVAL,
    "mbarrier_arrive": MBARRIER_ARRIVE,
    "expect_tx": MBARRIER_EXPECT_TX,
    "mbarrier_wait": MBARRIER_WAIT,
    "named_barrier": NAMED_BARRIER,
    "wait_group": WAIT_GROUP,
    "bulk_wait_group": BULK_WAIT_GROUP,
    "bulk_wait_group_read": BULK_WAIT_GROUP_READ,
    "wgmma_wait_group": WGMMA_WAIT_GROUP,
    "fence_proxy_async": FENCE_PROXY_ASYNC,
    "cluster_barrier": CLUSTER_BARRIER,
}


def _waits(name: str, ptx: str, guard: tuple[str, str] | None) -> list[str]:
    body = [f'asm volatile("{ptx} %0;" :: "n"(N) : "memory");']
    return ["template <int N>", *_helper(f"{name}()", guard, body)]


_OWN_HELPERS: dict[str, list[str]] = {
    "mbarrier_init": _helper(
        f"{MBARRIER_INIT}(void* bar, unsigned count)",
        _arch(_SM80, "mbarrier.init"),
        [
            f'asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"({_SMEM}), "r"(count) '
            ': "memory");'
        ],
    ),
    "mbarrier_inval": _helper(
        f"{MBARRIER_INVAL}(void* bar)",
        _arch(_SM80, "mbarrier.inval"),
        [f'asm volatile("mbarrier.inval.shared.b64 [%0];" :: "r"({_SMEM}) : "memory");'],
    ),
    "mbarrier_arrive": _helper(
        f"{MBARRIER_ARRIVE}(void* bar)",
        _arch(_SM80, "mbarrier.arrive"),
        [
            'asm volatile("{\\n\\t.reg .b64 state;\\n\\tmbarrier.arrive.shared.b64 state, [%0];'
            f'\\n\\t}}" :: "r"({_SMEM}) : "memory");'
        ],
    ),
    "expect_tx": _helper(
        f"{MBARRIER_EXPECT_TX}(void* bar, unsigned bytes)",
        _arch(_SM90, "mbarrier.arrive.expect_tx"),
        [
            'asm volatile("{\\n\\t.reg .b64 state;\\n\\t'
            'mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\\n\\t}" '
            f':: "r"({_SMEM}), "r"(bytes) : "memory");'
        ],
    ),
    "mbarrier_wait": _helper(
        f"{MBARRIER_WAIT}(void* bar, unsigned phase)",
        _arch(_SM90, "mbarrier.try_wait.parity"),
        [
            "unsigned done = 0;",
            "while (!done) {",
            '  asm volatile("{\\n\\t.reg .pred p;\\n\\t'
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\\t"
            'selp.u32 %0, 1, 0, p;\\n\\t}" : "=r"(done) : '
            f'"r"({_SMEM}), "r"(phase) : "memory");',
            "}",
        ],
    ),
    "named_barrier": _helper(
        f"{NAMED_BARRIER}(unsigned id, unsigned threads)",
        None,
        ['asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");'],
    ),
    "wait_group": _waits(WAIT_GROUP, "cp.async.wait_group", _arch(_SM80, "cp.async.wait_group")),
    "bulk_wait_group": _waits(
        BULK_WAIT_GROUP, "cp.async.bulk.wait_group", _arch(_SM90, "cp.async.bulk.wait_group")
    ),
    "bulk_wait_group_read": _waits(
        BULK_WAIT_GROUP_READ,
        "cp.async.bulk.wait_group.read",
        _arch(_SM90, "cp.async.bulk.wait_group.read"),
    ),
    "wgmma_wait_group": _waits(
        WGMMA_WAIT_GROUP, "wgmma.wait_group.sync.aligned", _arch(_SM90A, "wgmma.wait_group")
    ),
}


def _own_helpers(calls: list[SyncCall]) -> str:
    """The helpers of the operations ``calls`` use, in a fixed order, or nothing."""
    used = {c.op for c in calls}
    if not used & OWN_OPS:
        return ""
    lines = [
        "",
        "// The synchronisation the plan relies on, as inline PTX: call each helper where the",
        "// table in the kernel body says (an mbarrier argument is its 8-byte shared object).",
    ]
    for op, text in _OWN_HELPERS.items():
        if op in used:
            lines += text
    return "\n".join(lines) + "\n"


def _call(c: SyncCall) -> str:
    """The helper call for ``c``, as the table lists it."""
    bar = c.mbarrier if c.own else f"<mbarrier {c.mbarrier}>"
    name = HELPERS[c.op]
    if c.op == "mbarrier_init":
        return f"{name}({bar}, {c.count});"
    if c.op in ("mbarrier_inval", "mbarrier_arrive"):
        return f"{name}({bar});"
    if c.op == "expect_tx":
        return f"{name}({bar}, <bytes>);"
    if c.op == "mbarrier_wait":
        return f"{name}({bar}, <phase>);"
    if c.op == "named_barrier":
        threads = "blockDim.x * blockDim.y * blockDim.z" if c.threads is None else c.threads
        return f"{name}({c.barrier_id}, {threads});"
    if c.op in ("fence_proxy_async", "cluster_barrier"):
        return f"{name}();"
    return f"{name}<{c.pending}>();"


def _relies_on_own(request: PlanRequest, plan: Plan) -> bool:
    """Whether ``sync_calls`` lists an operation beyond the proxy fence and the cluster barrier
    (known before the buffers are named, so a plan without one names them as it always did)."""
    return (
        any(b.kind == "mbarrier" for b in request.buffers)
        or any(s.kind not in ("fence_proxy_async", "cluster_barrier") for s in request.syncs)
        or any(inval.origin != "existing" for inval in plan.invals)
        or bool(plan.waits)
    )


def call_table(calls: list[SyncCall]) -> list[str]:
    """The kernel-body table of helper calls by program point, or nothing when the plan
    relies on none of the operations beyond the proxy fence and the cluster barrier."""
    if not {c.op for c in calls} & OWN_OPS:
        return []
    lines = ["// Calls by program point (each before the accesses there), the helpers above:"]
    for c in calls:
        note = f"  // {c.note}" if c.note else ""
        lines.append(f"//   point {c.at}: {_call(c)}{note}")
    return lines


def emit_cuda(request: PlanRequest, plan: Plan) -> str:
    """The whole snippet as text."""
    return cuda_snippet(request, plan).text


def cuda_snippet(request: PlanRequest, plan: Plan) -> CudaSnippet:
    """The snippet's parts, for callers that paste them in different places."""
    reserved = {ARENA, WORKSPACE, _BLOCK_BASE, CLUSTER_BARRIER, FENCE_PROXY_ASYNC}
    if _relies_on_own(request, plan):
        reserved |= set(HELPERS.values())
    kernel = identifiers([request.name], reserved)[0]
    buffers = placed(request, plan, {*reserved, kernel})
    calls = sync_calls(request, plan, buffers)
    includes = _includes(request, plan, buffers, calls, kernel)
    device = _device_lines(request, plan, buffers, calls)
    host = _host_lines(plan, kernel)
    return CudaSnippet(kernel, includes, "\n".join(device) + "\n", "\n".join(host) + "\n")


def _includes(
    request: PlanRequest, plan: Plan, buffers: list[Placed], calls: list[SyncCall], kernel: str
) -> str:
    """The header comment, the includes the buffers' types need and the helpers the calls use."""
    head = [
        f"// Shared-memory plan for kernel {kernel}: status {plan.status}, arena "
        f"{plan.arena_bytes} bytes (lower bound {plan.lower_bound}, naive sum "
        f"{plan.naive_bytes}).",
        "// Generated by alloc-planner; offsets are bytes from the arena base.",
    ]
    warning = status_warning(plan)
    if warning is not None:
        head.append(f"// {warning}")
    types = sorted({b.dtype.cuda for b in buffers} & set(_INCLUDES))
    includes = "\n".join([*head, *(f"#include <{_INCLUDES[t]}>" for t in types)]) + "\n"
    if plan.cluster_barriers is not None:
        includes += _CLUSTER_HELPER
    if plan.fences or any(x.kind == "fence_proxy_async" for x in request.syncs):
        includes += _FENCE_HELPER
    return includes + _own_helpers(calls)


def _device_lines(
    request: PlanRequest, plan: Plan, buffers: list[Placed], calls: list[SyncCall]
) -> list[str]:
    """The kernel body's top: the arena, a pointer per buffer (shared, then spilled), and the
    barriers, other syncs and calls by program point."""
    device = [
        "// ---- device: at the top of the kernel body ----",
        f"extern __shared__ __align__({max_alignment(request, plan)}) unsigned char {ARENA}[];  "
        f"// {plan.arena_bytes} bytes",
    ]
    for b in buffers:
        if b.memory == "shared":
            device.append(_pointer(b.name, b.dtype.cuda, ARENA, b.offset, _where(b)))
    spilled = [b for b in buffers if b.memory == "global"]
    if spilled:
        device += [
            f"// Spilled buffers: the kernel takes `unsigned char* {WORKSPACE}` holding "
            f"{plan.global_bytes} bytes per block.",
            f"unsigned char* const {_BLOCK_BASE} = {WORKSPACE} + {plan.global_bytes}ull * "
            "(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));",
        ]
        for b in spilled:
            device.append(_pointer(b.name, b.dtype.cuda, _BLOCK_BASE, b.offset, _where(b)))
    notes = barrier_notes(request, plan)
    if request.has_control_flow:
        device += outline_lines(request, plan, "__syncthreads();", _SYNTAX)
    elif notes:
        device.append("// Barriers by program point (each runs before the accesses there):")
        device += [f"//   point {p}: __syncthreads();  // {why}" for p, why in notes]
    syncs = sync_notes(request, plan, buffers)
    if syncs:
        device.append(
            "// Synchronisation by program point besides barriers (before the accesses there):"
        )
        device += [f"//   point {p}: {text}" for p, text in syncs]
    return device + call_table(calls)


def _host_lines(plan: Plan, kernel: str) -> list[str]:
    """Before the launch: the opt-in attribute for a large arena, the cluster launch, the
    launch itself."""
    n = plan.arena_bytes
    host = ["// ---- host: before the launch ----"]
    if plan.launch.requires_opt_in:
        host.append(
            f"cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, {n});"
        )
    else:
        host.append(f"// {n} bytes <= {STATIC_SMEM_LIMIT}: no opt-in attribute needed.")
    if plan.launch.cluster is not None:
        x, y, z = plan.launch.cluster
        if plan.launch.cluster_non_portable:
            host.append(
                f"cudaFuncSetAttribute({kernel}, "
                "cudaFuncAttributeNonPortableClusterSizeAllowed, 1);"
            )
        host.append(
            f"// Launch in clusters of ({x}, {y}, {z}) CTAs: cudaLaunchKernelEx with "
            f"cudaLaunchAttributeClusterDimension {{{x}, {y}, {z}}}, or __cluster_dims__({x}, "
            f"{y}, {z}) on {kernel}."
        )
    host.append(f"// {kernel}<<<grid, block, {n}>>>(...);")
    return host


def _pointer(name: str, ctype: str, base: str, offset: int, note: str) -> str:
    return f"{ctype}* const {name} = reinterpret_cast<{ctype}*>({base} + {offset});  // {note}"


def _where(b: Placed) -> str:
    label = f"{quoted(b.id)}: " if b.id != b.name else ""
    if b.ranges:
        live = ", ".join(f"[{s}, {e})" for s, e in b.ranges)
        return f"{label}{b.size} bytes, live {live}"
    return f"{label}{b.size} bytes, live [{b.start}, {b.end})"
