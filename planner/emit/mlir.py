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
    Placed,
    barrier_notes,
    identifiers,
    outline_lines,
    placed,
    quoted,
    status_warning,
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


def emit_mlir(request: PlanRequest, plan: Plan) -> str:
    """A module holding one ``gpu.func`` that carves the plan's buffers out of the arena."""
    kernel = identifiers([request.name], {CLUSTER_BARRIER, FENCE_PROXY_ASYNC})[0]
    # Values of our own start with "_"; buffer names never do (see identifiers).
    buffers = placed(request, plan, set())
    spilled = [b for b in buffers if b.memory == "global"]
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
    args = f"%_workspace: {_GLOBAL}" if spilled else ""
    body = [
        f"%_smem = gpu.dynamic_shared_memory : {_SHARED}",
    ]
    base = plan.launch.base_alignment
    if base is not None:
        # The lowering gives the dynamic shared-memory global 16-byte alignment unless told
        # otherwise; a plan that states more (TMA tiles) needs the global declared with it.
        lines.append(
            f"// The arena base must be {base}-byte aligned: declare the lowered dynamic "
            f"shared-memory global with {{alignment = {base}}}."
        )
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
        body += [
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
        per_block = const(plan.global_bytes)
        body.append(f"%_base = arith.muli %_block, {per_block} : index")
        for b in spilled:
            body.append(f"// {_where(b)}")
            body.append(f"%_at_{b.name} = arith.addi %_base, {const(b.offset)} : index")
            body.append(_view(b, "%_workspace", f"%_at_{b.name}", _GLOBAL, None))
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
    body.append("gpu.return")
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
    lines += [
        "module attributes {gpu.container_module} {",
        f"  gpu.module @{kernel}_plan {{",
        *helper,
        f"    gpu.func @{kernel}({args}) kernel {{",
        *(f"      {line}" for line in body),
        "    }",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


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
