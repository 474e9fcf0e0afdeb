"""``planner mlir``: plan the workgroup buffers of MLIR kernels and rewrite the module to use
the plan (docs/bridges.md, MLIR).

For every kernel function the reader (``planner.bridges.mlir_read``) understands exactly, the
bridge builds a request (lifetimes in operation order, ``scf.for`` as loops, block-uniform
``scf.if`` as branches, ``gpu.barrier`` as barriers), plans it, and rewrites the function:
one arena at its entry (``gpu.dynamic_shared_memory``; in an IREE executable, a workgroup
allocation of the arena's bytes), a ``memref.view`` at the planned byte shift in
place of each allocation (the view has the allocation's type, so no use changes), a
``gpu.barrier`` before each operation where the plan inserts one, and, where the module holds
the launch (``gpu.launch_func``, an IREE ``hal.executable.export``), the launch's dynamic
shared memory set to the arena. A function it cannot read exactly is left as it was, with a
diagnostic naming the operation. The rewritten module is verified, printed and parsed again,
and must still go through ``canonicalize`` and ``cse``.

``check_module`` reads a module whose buffers are already views of
``gpu.dynamic_shared_memory`` (this bridge's output, or another compiler's) and judges the
placement with the static validator and the emulator.

Needs the ``mlir`` extra (``iree-base-compiler``, which ships MLIR's Python bindings).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from planner.bridges._plans import Verdict, foreign_plan, judge, need
from planner.bridges._program import Unsupported
from planner.bridges.mlir_read import KernelRead, kernels, read_kernel, symbol
from planner.core.errors import InternalError, RequestError
from planner.core.models import Plan, PlanRequest
from planner.pipeline import plan as plan_request

__all__ = [
    "KernelCheck",
    "KernelResult",
    "MlirResult",
    "check_module",
    "parse_module",
    "plan_module",
    "requests_of",
]

_FEATURE = "planner mlir"
_SMEM_TYPE = "memref<?xi8, #gpu.address_space<workgroup>>"


@dataclass
class KernelResult:
    """One kernel function: what was planned, or why it was left as it was."""

    name: str
    status: str  # "rewritten", "unchanged" (nothing to plan) or "skipped" (see reason)
    reason: str | None = None
    buffers: int = 0
    compiler_bytes: int = 0  # bytes of the buffers as the module allocated them
    arena_bytes: int = 0
    lower_bound: int = 0
    barriers_existing: int = 0
    barriers_inserted: int = 0
    request: dict[str, Any] | None = None
    plan: Plan | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "buffers": self.buffers,
            "compiler_bytes": self.compiler_bytes,
            "arena_bytes": self.arena_bytes,
            "lower_bound": self.lower_bound,
            "barriers_existing": self.barriers_existing,
            "barriers_inserted": self.barriers_inserted,
            "request": self.request,
            "plan": None if self.plan is None else self.plan.model_dump(mode="json"),
        }


@dataclass
class MlirResult:
    """The rewritten module (text), each kernel's result, and the bridge's own time."""

    module: str
    kernels: list[KernelResult] = field(default_factory=list)
    seconds: float = 0.0  # reading, planning, rewriting and verifying
    bytecode: bytes | None = None  # the module as MLIR bytecode, when asked for

    @property
    def diagnostics(self) -> list[str]:
        return [f"@{k.name}: {k.reason}" for k in self.kernels if k.status == "skipped"]


@dataclass
class KernelCheck:
    """A placed kernel judged by the validators."""

    name: str
    verdict: Verdict | None
    reason: str | None = None  # why it was not judged
    arena_bytes: int = 0
    buffers: int = 0


_CONTEXT_USES = 64  # modules one MLIR context parses before a fresh one (it keeps their types)
_CONTEXTS = threading.local()


def _context() -> Any:
    """An MLIR context, one per thread, renewed every ``_CONTEXT_USES`` calls (a module keeps
    its own context alive)."""
    need("mlir", _FEATURE)
    from iree.compiler import ir

    held = getattr(_CONTEXTS, "held", None)
    if held is None or held[1] >= _CONTEXT_USES:
        ctx = ir.Context()
        ctx.allow_unregistered_dialects = False
        held = _CONTEXTS.held = [ctx, 0]
    held[1] += 1
    return held[0]


def parse_module(source: str | bytes, ctx: Any | None = None) -> Any:
    """An MLIR module from text or bytecode; a ``RequestError`` naming the parser's message
    when it is neither."""
    if ctx is None:
        ctx = _context()
    from iree.compiler import ir

    try:
        with ctx:
            return ir.Module.parse(source)
    except Exception as exc:  # MLIRError: the diagnostics say where
        message = str(exc).strip().replace("\n", " ")
        raise RequestError.field(
            ("module",), f"not a valid MLIR module: {message}", "bad_mlir", None
        ) from None


def requests_of(
    source: str | bytes, *, target: str | None = None, time_limit: float = 5.0
) -> list[tuple[str, dict[str, Any] | None, str | None]]:
    """The request of every kernel (name, request, None), or (name, None, why not)."""
    ctx = _context()
    module = parse_module(source, ctx)
    out: list[tuple[str, dict[str, Any] | None, str | None]] = []
    with ctx:
        for function in kernels(module):
            try:
                read = read_kernel(function)
                out.append((read.name, _request(read, target, time_limit), None))
            except Unsupported as exc:
                out.append((symbol(function), None, str(exc)))
    return out


def _request(read: KernelRead, target: str | None, time_limit: float) -> dict[str, Any]:
    request = read.shape.request(target=target or read.target, time_limit=time_limit)
    if read.capacity is not None and "target" not in request:
        request["capacity"] = read.capacity
    return request


def plan_module(
    source: str | bytes,
    *,
    target: str | None = None,
    time_limit: float = 5.0,
    bytecode: bool = False,
) -> MlirResult:
    """Plan and rewrite every kernel of a module (see the module docstring). ``target``
    replaces the device profile the module names. Raises ``RequestError`` for a module that
    does not parse and ``MissingExtraError`` without the ``mlir`` extra."""
    began = time.perf_counter()
    ctx = _context()
    module = parse_module(source, ctx)
    results: list[KernelResult] = []
    with ctx:
        from iree.compiler import ir

        with ir.Location.unknown():
            for function in list(kernels(module)):
                results.append(_plan_kernel(module, function, target, time_limit))
        _verify(module)
        text = str(module)
        again = parse_module(text, ctx)  # round trip
        _verify(again)
        _simplify(again)
        encoded = None
        if bytecode:
            import io

            buffer = io.BytesIO()
            module.operation.write_bytecode(buffer)
            encoded = buffer.getvalue()
    return MlirResult(
        module=text, kernels=results, seconds=time.perf_counter() - began, bytecode=encoded
    )


def _verify(module: Any) -> None:
    if not module.operation.verify():
        raise InternalError("the rewritten module does not verify")


def _simplify(module: Any) -> None:
    """``canonicalize`` and ``cse`` must still run on the rewritten module."""
    from iree.compiler import passmanager

    pm = passmanager.PassManager.parse("builtin.module(canonicalize,cse)")
    pm.run(module.operation)


def _plan_kernel(module: Any, function: Any, target: str | None, time_limit: float) -> KernelResult:
    name = symbol(function)
    try:
        read = read_kernel(function)
    except Unsupported as exc:
        return KernelResult(name=name, status="skipped", reason=str(exc))
    request = _request(read, target, time_limit)
    result = KernelResult(
        name=name,
        status="unchanged",
        buffers=len(request["buffers"]),
        compiler_bytes=sum(b.size for b in read.shape.buffers.values()),
        barriers_existing=len(request["barriers"]),
        request=request,
    )
    if not read.shape.buffers:
        return result
    try:
        plan = plan_request(request)
    except RequestError as exc:
        result.status, result.reason = "skipped", f"the request is refused: {exc}"
        return result
    result.plan = plan
    result.arena_bytes, result.lower_bound = plan.arena_bytes, plan.lower_bound
    result.barriers_inserted = len(plan.barriers.inserted)
    if plan.status not in ("optimal", "feasible"):
        result.status, result.reason = "skipped", f"the plan is {plan.status}"
        return result
    _rewrite(module, read, plan)
    result.status = "rewritten"
    return result


def _rewrite(module: Any, read: KernelRead, plan: Plan) -> None:
    from iree.compiler import ir

    offsets = {p.id: p.offset for p in plan.placements}
    index = ir.IndexType.get()
    entry = read.function.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry):
        smem = _arena(read, plan)
    # Barriers first: the operations at the points are still the original ones.
    for p in plan.barriers.inserted:
        op = read.ops_at[p]
        if op is None:
            raise InternalError(f"no operation at point {p} to put a barrier before")
        with ir.InsertionPoint(op):
            ir.Operation.create("gpu.barrier")
    for dealloc in read.deallocs:  # the arena is never freed
        dealloc.erase()
    for bid, alloc in read.allocs.items():
        if bid not in offsets:  # never accessed: the allocation goes, its uses are views
            offsets[bid] = 0
        with ir.InsertionPoint(alloc):
            view = _view(smem, offsets[bid], alloc.results[0].type, index)
        _replace(alloc.results[0], view)
        alloc.erase()
    attributions = sorted(read.attributions.items(), key=lambda kv: -kv[1])
    for bid, arg_index in attributions:
        arg = entry.arguments[arg_index]
        with ir.InsertionPoint(entry.operations[1]):  # right after gpu.dynamic_shared_memory
            view = _view(smem, offsets.get(bid, 0), arg.type, index)
        _replace(arg, view)
        entry.erase_argument(arg_index)
    if attributions:
        count = int(ir.IntegerAttr(read.function.attributes["workgroup_attributions"]).value)
        read.function.attributes["workgroup_attributions"] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), count - len(attributions)
        )
    _set_launch(module, read.name, plan.arena_bytes)


def _in_gpu_module(op: Any) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "gpu.module":
            return True
        parent = parent.parent
    return False


def _arena(read: KernelRead, plan: Plan) -> Any:
    """The arena the views are taken of: ``gpu.dynamic_shared_memory`` in a ``gpu.module``;
    in an IREE executable, whose lowering places workgroup memory from its allocations (and
    cannot lower ``gpu.dynamic_shared_memory`` outside a ``gpu.module``), one workgroup
    allocation of the arena's bytes, as IREE's own reuse pass makes."""
    from iree.compiler import ir

    if _in_gpu_module(read.function):
        return ir.Operation.create(
            "gpu.dynamic_shared_memory", results=[ir.Type.parse(_SMEM_TYPE)]
        ).results[0]
    from iree.compiler.dialects import memref

    arena = max(plan.arena_bytes, 1)
    base = max((b.alignment for b in read.shape.buffers.values()), default=1)
    t = ir.Type.parse(f"memref<{arena}xi8, #gpu.address_space<workgroup>>")
    i64 = ir.IntegerType.get_signless(64)
    return memref.AllocOp(t, [], [], alignment=ir.IntegerAttr.get(i64, base)).result


def _view(smem: Any, offset: int, t: Any, index: Any) -> Any:
    """A ``memref.view`` of the arena at ``offset`` bytes, of type ``t`` (identity layout:
    the reader refuses any other)."""
    from iree.compiler import ir

    shift = ir.Operation.create(
        "arith.constant", results=[index], attributes={"value": ir.IntegerAttr.get(index, offset)}
    ).results[0]
    return ir.Operation.create("memref.view", results=[t], operands=[smem, shift]).results[0]


def _replace(old: Any, new: Any) -> None:
    old.replace_all_uses_with(new)


def _set_launch(module: Any, name: str, arena: int) -> None:
    """The launches of the kernel in the module get ``arena`` bytes of dynamic shared memory."""
    from iree.compiler import ir

    i32 = ir.IntegerType.get_signless(32)
    index = ir.IndexType.get()
    found: list[Any] = []

    def visit(op: Any) -> Any:
        o = op.operation if hasattr(op, "operation") else op
        if o.name == "gpu.launch_func" and str(o.attributes["kernel"]).endswith(f"::@{name}"):
            found.append(o)
        elif o.name == "hal.executable.export" and symbol(o) == name:
            o.attributes["workgroup_local_memory"] = ir.IntegerAttr.get(index, arena)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    for launch in found:
        segments = list(ir.DenseI32ArrayAttr(launch.attributes["operandSegmentSizes"]))
        # asyncDependencies, grid x y z, block x y z, cluster x y z, dynamicSharedMemorySize...
        where = sum(segments[:10])
        operands = list(launch.operands)
        with ir.InsertionPoint(launch):
            size = ir.Operation.create(
                "arith.constant",
                results=[i32],
                attributes={"value": ir.IntegerAttr.get(i32, arena)},
            ).results[0]
        if segments[10]:
            operands[where] = size
        else:
            operands.insert(where, size)
            segments[10] = 1
        attributes = {a: launch.attributes[a] for a in launch.attributes}
        attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(segments)
        with ir.InsertionPoint(launch):
            new = ir.Operation.create(
                launch.name,
                results=[r.type for r in launch.results],
                operands=operands,
                attributes=attributes,
            )
        for old, fresh in zip(launch.results, new.results, strict=True):
            old.replace_all_uses_with(fresh)
        launch.erase()


def check_module(
    source: str | bytes, *, emulation: bool = True, target: str | None = None
) -> list[KernelCheck]:
    """Judge the placement of every kernel whose buffers are views of
    ``gpu.dynamic_shared_memory`` at constant shifts (the static validator, then the
    emulator); a kernel without such views is reported with the reason."""
    ctx = _context()
    module = parse_module(source, ctx)
    checks: list[KernelCheck] = []
    with ctx:
        for function in kernels(module):
            name = symbol(function)
            try:
                read = read_kernel(function, placed=True)
            except Unsupported as exc:
                checks.append(KernelCheck(name=name, verdict=None, reason=str(exc)))
                continue
            if read.root is None or not read.views:
                checks.append(KernelCheck(name=name, verdict=None, reason="no placed buffers"))
                continue
            raw = _request(read, target, 5.0)
            raw["options"] = {"sync": "existing", "time_limit": 5.0}
            request = PlanRequest.model_validate(raw)
            offsets = read.shape.placed()
            plan = foreign_plan(request, offsets, "module")
            verdict = judge(request, plan, emulation=emulation)
            checks.append(
                KernelCheck(
                    name=name,
                    verdict=verdict,
                    arena_bytes=plan.arena_bytes,
                    buffers=len(request.buffers),
                )
            )
    return checks
