"""The plan as MLIR: ``gpu.dynamic_shared_memory`` and one ``memref.view`` per buffer, in
a ``gpu.func`` that a pass pipeline (or a person) merges into the real kernel.

Buffer ids and the request's name appear only as SSA value and symbol names derived from them
(C identifiers: valid MLIR names, unique, never starting with ``_`` like the values of our
own) and, where the name differs from the id, as a JSON-quoted label in a ``//`` comment
(see ``planner.emit._common``): no id can add an operation.
"""

from __future__ import annotations

from planner.core.models import Plan, PlanRequest
from planner.emit._common import (
    OWN_OPS,
    Placed,
    SyncCall,
    barrier_notes,
    identifiers,
    outline_lines,
    placed,
    quoted,
    status_warning,
    sync_calls,
    sync_notes,
)

__all__ = ["emit_mlir"]

_SYNTAX = {
    "loop": "scf.for ...",
    "if": "scf.if ...",
    "elif": "} else { scf.if ...",
    "else": "} else",
    "end": "}",
}
_SHARED = "memref<?xi8, #gpu.address_space<workgroup>>"
CLUSTER_BARRIER = "planner_cluster_barrier"
FENCE_PROXY_ASYNC = "planner_fence_proxy_async"
_GLOBAL = "memref<?xi8>"
# The block's linear index, %_block: x + grid_x * (y + grid_y * z).
_BLOCK_INDEX = [
    "%_bx = gpu.block_id x",
    "%_by = gpu.block_id y",
    "%_bz = gpu.block_id z",
    "%_gx = gpu.grid_dim x",
    "%_gy = gpu.grid_dim y",
    "%_t0 = arith.muli %_gy, %_bz : index",
    "%_t1 = arith.addi %_by, %_t0 : index",
    "%_t2 = arith.muli %_gx, %_t1 : index",
    "%_block = arith.addi %_bx, %_t2 : index",
]


def emit_mlir(request: PlanRequest, plan: Plan) -> str:
    """A module holding one ``gpu.func`` that carves the plan's buffers out of the arena."""
    # Values of our own start with "_"; buffer names never do (see identifiers).
    buffers = placed(request, plan, set())
    calls = sync_calls(request, plan, buffers)
    own = [c for c in calls if c.op in OWN_OPS]
    kernel = identifiers(
        [request.name], {CLUSTER_BARRIER, FENCE_PROXY_ASYNC, *(_symbol(c) for c in own)}
    )[0]
    spilled = [b for b in buffers if b.memory == "global"]
    args = f"%_workspace: {_GLOBAL}" if spilled else ""
    body = _views(plan, buffers, spilled)
    body += _sync_lines(request, plan, buffers, calls, own)
    body.append("gpu.return")
    return (
        "\n".join(
            [
                *_header(plan, kernel),
                "module attributes {gpu.container_module} {",
                f"  gpu.module @{kernel}_plan {{",
                *_helpers(request, plan, own),
                f"    gpu.func @{kernel}({args}) kernel {{",
                *(f"      {line}" for line in body),
                "    }",
                "  }",
                "}",
            ]
        )
        + "\n"
    )


def _header(plan: Plan, kernel: str) -> list[str]:
    """The comments above the module: status, arena, launch size and base alignment."""
    lines = [
        f"// Shared-memory plan for kernel {kernel}: status {plan.status}, arena "
        f"{plan.arena_bytes} bytes (lower bound {plan.lower_bound}, naive sum "
        f"{plan.naive_bytes}).",
        f"// Launch with dynamic_shared_memory_size {plan.arena_bytes}; offsets are bytes "
        "from the arena base.",
    ]
    warning = status_warning(plan)
    if warning is not None:
        lines.append(f"// {warning}")
    base = plan.launch.base_alignment
    if base is not None:
        # The lowering gives the dynamic shared-memory global 16-byte alignment unless told
        # otherwise; a plan that states more (TMA tiles) needs the global declared with it.
        lines.append(
            f"// The arena base must be {base}-byte aligned: declare the lowered dynamic "
            f"shared-memory global with {{alignment = {base}}}."
        )
    return lines


def _views(plan: Plan, buffers: list[Placed], spilled: list[Placed]) -> list[str]:
    """The kernel's first lines: the arena, one view per shared buffer, then the spilled
    buffers' views into this block's slice of the workspace."""
    body = [f"%_smem = gpu.dynamic_shared_memory : {_SHARED}"]
    base = plan.launch.base_alignment
    if base is not None:
        body.append(f"%_smem_aligned = memref.assume_alignment %_smem, {base} : {_SHARED}")
    constants: dict[int, str] = {}

    def const(value: int) -> str:
        if value not in constants:
            constants[value] = f"%_c{value}"
            body.append(f"{constants[value]} = arith.constant {value} : index")
        return constants[value]

    for b in buffers:
        if b.memory == "shared":
            shift = const(b.offset)
            body.append(f"// {_where(b)}")
            source = "%_smem" if base is None else "%_smem_aligned"
            body.append(_view(b, source, shift, _SHARED, "#gpu.address_space<workgroup>"))
    if spilled:
        body.append(f"// Spilled buffers: %_workspace holds {plan.global_bytes} bytes per block.")
        body += _BLOCK_INDEX
        per_block = const(plan.global_bytes)
        body.append(f"%_base = arith.muli %_block, {per_block} : index")
        for b in spilled:
            body.append(f"// {_where(b)}")
            body.append(f"%_at_{b.name} = arith.addi %_base, {const(b.offset)} : index")
            body.append(_view(b, "%_workspace", f"%_at_{b.name}", _GLOBAL, None))
    return body


def _sync_lines(
    request: PlanRequest,
    plan: Plan,
    buffers: list[Placed],
    calls: list[SyncCall],
    own: list[SyncCall],
) -> list[str]:
    """The barriers, the other synchronisation and the helper calls by program point (the
    outline of a request with control flow), as comments."""
    body: list[str] = []
    notes = barrier_notes(request, plan)
    if request.has_control_flow:
        body += outline_lines(request, plan, "gpu.barrier", _SYNTAX)
    elif notes:
        body.append("// Barriers by program point (each runs before the accesses there):")
        body += [f"//   point {p}: gpu.barrier  // {why}" for p, why in notes]
    syncs = sync_notes(request, plan, buffers)
    if syncs:
        body.append(
            "// Synchronisation by program point besides barriers (before the accesses there):"
        )
        body += [f"//   point {p}: {text}" for p, text in syncs]
    if own:
        body.append(
            "// Calls by program point (each before the accesses there), the helpers above:"
        )
        for c in calls:
            note = f"  // {c.note}" if c.note else ""
            body.append(f"//   point {c.at}: {_call(c)}{note}")
    return body


def _helpers(request: PlanRequest, plan: Plan, own: list[SyncCall]) -> list[str]:
    """The ``gpu.func`` helpers the kernel calls: the cluster barrier, the proxy fence and
    one per other synchronisation operation."""
    helper: list[str] = []
    if plan.cluster_barriers is not None:
        # The cluster barrier the plan relies on, as NVVM ops (barrier.cluster.arrive/wait).
        helper = [
            f"    // Call @{CLUSTER_BARRIER} at each cluster barrier point (every thread).",
            f"    gpu.func @{CLUSTER_BARRIER}() {{",
            "      nvvm.cluster.arrive aligned",
            "      nvvm.cluster.wait aligned",
            "      gpu.return",
            "    }",
        ]
    if plan.fences or any(x.kind == "fence_proxy_async" for x in request.syncs):
        # The proxy fence (fence.proxy.async.shared::cta), in the generic form.
        helper += [
            f"    // Call @{FENCE_PROXY_ASYNC} at each proxy fence point (every thread).",
            f"    gpu.func @{FENCE_PROXY_ASYNC}() {{",
            '      "nvvm.fence.proxy"() <{kind = #nvvm.proxy_kind<async.shared>, '
            "space = #nvvm.shared_space<cta>}> : () -> ()",
            "      gpu.return",
            "    }",
        ]
    return helper + _own_helpers(own)


# The other synchronisation, one gpu.func per operation (and per wait_group depth) of NVVM
# ops on the mbarrier's shared-memory pointer: mbarrier.init, .inval, .arrive,
# .arrive.expect_tx, .try_wait.parity (it loops until the phase completes), bar.sync id, n
# (nvvm.barrier), cp.async.wait_group, cp.async.bulk.wait_group[.read], wgmma.wait_group.
_PTR = "!llvm.ptr<3>"
_BASE = {
    "mbarrier_init": "planner_mbarrier_init",
    "mbarrier_inval": "planner_mbarrier_inval",
    "mbarrier_arrive": "planner_mbarrier_arrive",
    "expect_tx": "planner_mbarrier_arrive_expect_tx",
    "mbarrier_wait": "planner_mbarrier_wait",
    "named_barrier": "planner_named_barrier",
    "wait_group": "planner_wait_group",
    "bulk_wait_group": "planner_bulk_wait_group",
    "bulk_wait_group_read": "planner_bulk_wait_group_read",
    "wgmma_wait_group": "planner_wgmma_wait_group",
    "fence_proxy_async": FENCE_PROXY_ASYNC,
    "cluster_barrier": CLUSTER_BARRIER,
}
_WAITS = {
    "wait_group": "nvvm.cp.async.wait.group {n}",
    "bulk_wait_group": "nvvm.cp.async.bulk.wait_group {n}",
    "bulk_wait_group_read": "nvvm.cp.async.bulk.wait_group {n} read",
    "wgmma_wait_group": "nvvm.wgmma.wait.group.sync.aligned {n}",
}
_BODIES = {
    "mbarrier_init": (
        f"%bar: {_PTR}, %count: i32",
        [f"nvvm.mbarrier.init %bar, %count : {_PTR}, i32"],
    ),
    "mbarrier_inval": (f"%bar: {_PTR}", [f"nvvm.mbarrier.inval %bar : {_PTR}"]),
    "mbarrier_arrive": (f"%bar: {_PTR}", [f"%state = nvvm.mbarrier.arrive %bar : {_PTR} -> i64"]),
    "expect_tx": (
        f"%bar: {_PTR}, %bytes: i32",
        [f"nvvm.mbarrier.arrive.expect_tx %bar, %bytes : {_PTR}, i32"],
    ),
    "mbarrier_wait": (
        f"%bar: {_PTR}, %phase: i32",
        [
            "%ticks = arith.constant 10000000 : i32",
            f"nvvm.mbarrier.try_wait.parity %bar, %phase, %ticks : {_PTR}, i32, i32",
        ],
    ),
    "named_barrier": (
        "%id: i32, %threads: i32",
        ["nvvm.barrier id = %id number_of_threads = %threads"],
    ),
}


def _symbol(c: SyncCall) -> str:
    """The helper's symbol: one per wait_group depth."""
    if c.op in _WAITS:
        return f"{_BASE[c.op]}_{c.pending}"
    return _BASE[c.op]


def _own_helpers(own: list[SyncCall]) -> list[str]:
    """One gpu.func per helper ``own`` calls, in a fixed order."""
    lines: list[str] = []
    done: set[str] = set()
    for c in sorted(own, key=lambda c: (list(_BASE).index(c.op), c.pending)):
        name = _symbol(c)
        if name in done:
            continue
        done.add(name)
        if c.op in _WAITS:
            args, ops = "", [_WAITS[c.op].format(n=c.pending)]
        else:
            args, ops = _BODIES[c.op]
        lines += [
            f"    gpu.func @{name}({args}) {{",
            *(f"      {op}" for op in ops),
            "      gpu.return",
            "    }",
        ]
    if lines:
        lines.insert(
            0, "    // The synchronisation the plan relies on: call each where the table says."
        )
    return lines


def _call(c: SyncCall) -> str:
    """The helper call for ``c``, as the table lists it (mbarriers as !llvm.ptr<3>)."""
    bar = f"%{c.mbarrier}" if c.own else f"<mbarrier {c.mbarrier}>"
    name = f"@{_symbol(c)}"
    if c.op == "mbarrier_init":
        return f"{name}({bar}, {c.count})"
    if c.op in ("mbarrier_inval", "mbarrier_arrive"):
        return f"{name}({bar})"
    if c.op == "expect_tx":
        return f"{name}({bar}, <bytes>)"
    if c.op == "mbarrier_wait":
        return f"{name}({bar}, <phase>)"
    if c.op == "named_barrier":
        threads = "<block threads>" if c.threads is None else c.threads
        return f"{name}({c.barrier_id}, {threads})"
    return f"{name}()"


def _view(b: Placed, source: str, shift: str, source_type: str, space: str | None) -> str:
    count = b.size // b.dtype.bytes
    memspace = f", {space}" if space is not None else ""
    return (
        f"%{b.name} = memref.view {source}[{shift}][] : {source_type} to "
        f"memref<{count}x{b.dtype.mlir}{memspace}>"
    )


def _where(b: Placed) -> str:
    label = f"{quoted(b.id)}: " if b.id != b.name else ""
    if b.ranges:
        live = ", ".join(f"[{s}, {e})" for s, e in b.ranges)
        return f"{label}{b.size} bytes at offset {b.offset}, live {live}"
    return f"{label}{b.size} bytes at offset {b.offset}, live [{b.start}, {b.end})"
