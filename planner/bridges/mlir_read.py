"""Reads the workgroup buffers of MLIR kernels (docs/bridges.md, MLIR).

A kernel is a ``gpu.func`` marked ``kernel``, or a ``func.func`` inside a ``gpu.module`` or an
IREE executable. Its buffers are ``memref.alloc``/``memref.alloca`` results and workgroup
attributions in ``#gpu.address_space<workgroup>``; with ``placed=True`` (reading a module this
bridge rewrote) they are the ``memref.view``s of the arena (``gpu.dynamic_shared_memory``, or a
workgroup allocation of bytes used only through views) at constant
byte shifts. Each buffer is followed through views and ``scf`` iter_args, yields and results
to the operations that read or write it; an ``arith.select`` between buffers aliases both.

Anything the reader cannot follow exactly raises ``Unsupported`` naming the operation: a
dynamic size, a buffer reaching an operation whose memory effects are not known here
(a call, a pointer extraction, an asynchronous copy), a barrier under thread-dependent
control flow, a function of several blocks. The caller leaves such a function as it is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from planner.bridges._program import BufferShape, KernelShape, Unsupported
from planner.core.targets import TARGETS

__all__ = ["KernelRead", "kernels", "read_kernel", "workgroup"]

WORKGROUP = "#gpu.address_space<workgroup>"

# Operations whose results alias their first memref operand without touching memory.
_VIEWS = frozenset(
    {
        "memref.subview",
        "memref.view",
        "memref.reinterpret_cast",
        "memref.collapse_shape",
        "memref.expand_shape",
        "memref.cast",
        "memref.transpose",
        "memref.assume_alignment",
        "memref.extract_strided_metadata",
        "memref.memory_space_cast",
    }
)
# Operations that read or write the memref operands they are given, synchronously.
_ACCESSES = frozenset(
    {
        "memref.load",
        "memref.store",
        "memref.copy",
        "memref.atomic_rmw",
        "memref.generic_atomic_rmw",
        "vector.transfer_read",
        "vector.transfer_write",
        "vector.load",
        "vector.store",
        "vector.maskedload",
        "vector.maskedstore",
        "vector.gather",
        "vector.scatter",
        "vector.expandload",
        "vector.compressstore",
        "nvgpu.ldmatrix",
        "gpu.subgroup_mma_load_matrix",
        "gpu.subgroup_mma_store_matrix",
        "amdgpu.transpose_load",
    }
)
_IGNORED_USES = frozenset({"memref.dealloc", "memref.dim", "memref.rank"})
# Operations that pass a buffer on (their results or block arguments alias it) untouched.
_ALIASING = frozenset({"scf.for", "scf.yield", "arith.select"})
_BARRIERS = frozenset({"gpu.barrier", "nvvm.barrier0", "nvvm.barrier", "amdgpu.lds_barrier"})
# Values every thread of a block agrees on.
_UNIFORM_SOURCES = frozenset(
    {
        "arith.constant",
        "gpu.block_id",
        "gpu.grid_dim",
        "gpu.block_dim",
        "gpu.cluster_id",
        "gpu.cluster_dim",
        "hal.interface.workgroup.id",
        "hal.interface.workgroup.count",
        "hal.interface.workgroup.size",
        "hal.interface.constant.load",
        "ub.poison",
    }
)
_PURE_PREFIXES = ("arith.", "index.", "math.")
_PURE = frozenset(
    {
        "affine.apply",
        "affine.min",
        "affine.max",
        "affine.linearize_index",
        "affine.delinearize_index",
        "util.assume.int",
    }
)
_MAX_VECTOR_ALIGNMENT = 16  # bytes: the widest shared-memory access a GPU makes


@dataclass
class KernelRead:
    """One kernel as read: its shape, and the operations a rewrite needs."""

    name: str
    function: Any  # the function operation
    shape: KernelShape
    ops_at: list[Any | None]  # program point -> operation (None: a point with no operation)
    allocs: dict[str, Any] = field(default_factory=dict)  # buffer id -> allocating op
    attributions: dict[str, int] = field(default_factory=dict)  # buffer id -> entry arg
    views: dict[str, Any] = field(default_factory=dict)  # placed buffer id -> its view op
    deallocs: list[Any] = field(default_factory=list)  # memref.dealloc of any buffer's alias
    root: Any = None  # the gpu.dynamic_shared_memory value (placed)
    target: str | None = None
    capacity: int | None = None  # bytes, from the target the module names


def workgroup(t: Any) -> bool:
    """Whether an MLIR type is a memref in workgroup memory."""
    from iree.compiler import ir

    return isinstance(t, ir.MemRefType) and str(t.memory_space) == WORKGROUP


def kernels(module: Any) -> Iterator[Any]:
    """The kernel functions of a module, in module order (a kernel's body is not searched)."""

    def visit(op: Any) -> Iterator[Any]:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    c = child.operation
                    if _is_kernel(c):
                        yield c
                    elif c.name not in ("gpu.func", "func.func"):
                        yield from visit(c)

    yield from visit(module.operation)


def _is_kernel(op: Any) -> bool:
    """A ``gpu.func`` marked kernel, or a ``func.func`` with a body in device code."""
    if op.name == "gpu.func":
        return "kernel" in op.attributes or "gpu.kernel" in op.attributes
    return op.name == "func.func" and len(op.regions[0].blocks) > 0 and _in_device_code(op)


def _in_device_code(op: Any) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name in ("gpu.module", "hal.executable.variant"):
            return True
        parent = parent.parent
    return False


def symbol(op: Any) -> str:
    from iree.compiler import ir

    return str(ir.StringAttr(op.attributes["sym_name"]).value)


def _target_of(op: Any) -> tuple[str | None, int | None]:
    """The device profile and shared-memory capacity the enclosing module names."""
    parent = op.parent
    while parent is not None:
        if parent.name in ("gpu.module", "hal.executable.variant"):
            text = " ".join(str(parent.attributes[a]) for a in parent.attributes)
            sm = re.search(r"\bsm_(\d+)", text)
            cap = re.search(r"max_workgroup_memory_bytes\s*=\s*(\d+)", text)
            target = f"sm_{sm.group(1)}" if sm and f"sm_{sm.group(1)}" in TARGETS else None
            return target, int(cap.group(1)) if cap else None
        parent = parent.parent
    return None, None


def _bytes_of(t: Any) -> int:
    """Bytes of one element of an MLIR type: scalars, vectors and complex numbers."""
    from iree.compiler import ir

    if isinstance(t, ir.VectorType):
        return int(math.prod(t.shape)) * _bytes_of(t.element_type)
    if isinstance(t, ir.ComplexType):
        return 2 * _bytes_of(t.element_type)
    if isinstance(t, ir.IndexType):
        return 8
    width = getattr(t, "width", None)
    if isinstance(width, int) and width > 0:
        return max(1, (width + 7) // 8)
    raise Unsupported(f"element type {t} has no known width")


def _static_bytes(t: Any, what: str) -> tuple[int, int]:
    """(bytes, element bytes) of a statically shaped memref type."""
    from iree.compiler import ir

    mt = ir.MemRefType(t)
    if not mt.has_static_shape:
        raise Unsupported(f"{what} has a dynamic size ({t})")
    element = _bytes_of(mt.element_type)
    return math.prod(mt.shape) * element, element


def _constant(value: Any) -> int | None:
    from iree.compiler import ir

    owner = value.owner
    if not isinstance(owner, ir.Operation | ir.OpView):
        return None
    op = owner.operation
    if op.name != "arith.constant":
        return None
    attr = op.attributes["value"]
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    return None


class _Reader:
    def __init__(self, function: Any, *, placed: bool) -> None:
        self.function = function
        self.placed = placed
        self.name = symbol(function)
        self.shape = KernelShape(self.name)
        self.alias: dict[Any, set[str]] = {}
        self.defined: dict[Any, str] = {}  # the value that creates each buffer
        self.uniform: set[Any] = set()
        self.read = KernelRead(self.name, function, self.shape, [])
        self.read.target, self.read.capacity = _target_of(function)

    # Pass 1: buffers, aliases and uniform values ------------------------------------------

    def collect(self) -> None:
        body = self.function.regions[0]
        if len(body.blocks) != 1:
            raise Unsupported(f"function @{self.name} has {len(body.blocks)} blocks")
        entry = body.blocks[0]
        inputs = self._inputs()
        for i, arg in enumerate(entry.arguments):
            if i < inputs:
                self.uniform.add(arg)
            elif workgroup(arg.type):
                self._new_buffer(f"workgroup{i - inputs}", arg, arg.type, None)
                self.read.attributions[f"workgroup{i - inputs}"] = i
        self._declare(entry)
        changed = True
        while changed:
            changed = self._propagate(entry)

    def _inputs(self) -> int:
        from iree.compiler import ir

        ftype = ir.FunctionType(ir.TypeAttr(self.function.attributes["function_type"]).value)
        return len(ftype.inputs)

    def _new_buffer(self, bid: str, value: Any, t: Any, align_attr: int | None) -> BufferShape:
        from iree.compiler import ir

        size, element = _static_bytes(t, f"workgroup buffer {bid}")
        memref = ir.MemRefType(t)
        with ir.Location.unknown(t.context):
            plain = ir.MemRefType.get(memref.shape, memref.element_type, None, memref.memory_space)
        if plain != memref:  # a memref.view has the identity layout, so the rewrite could not
            raise Unsupported(f"workgroup buffer {bid} has the type {t}, with a layout")
        align = max(align_attr or 1, element, 1)
        align = 1 << (align - 1).bit_length()
        buffer = BufferShape(id=bid, size=size, alignment=align, scope=())
        self.shape.allocate(buffer)
        self.alias[value] = {bid}
        self.defined[value] = bid
        return buffer

    def _declare(self, block: Any) -> None:
        """Buffers (with the loops around each) and uniform values, in program order."""
        from iree.compiler import ir

        for child in block.operations:
            op = child.operation
            name = op.name
            if name in ("memref.alloc", "memref.alloca") and self.placed and _arena(op):
                self.read.root = op.results[0]
            elif name in ("memref.alloc", "memref.alloca") and workgroup(op.results[0].type):
                if len(op.operands):
                    raise Unsupported(f"{name} at {op.location} has a dynamic size")
                align = None
                if "alignment" in op.attributes:
                    align = int(ir.IntegerAttr(op.attributes["alignment"]).value)
                bid = self._id(op, len(self.shape.buffers))
                self._new_buffer(bid, op.results[0], op.results[0].type, align)
                self.read.allocs[bid] = op
            elif name == "gpu.dynamic_shared_memory":
                if not self.placed:
                    raise Unsupported(
                        "gpu.dynamic_shared_memory: the kernel already places "
                        "its buffers in dynamic shared memory"
                    )
                self.read.root = op.results[0]
            elif (
                name == "memref.view"
                and self.placed
                and self.read.root is not None
                and (op.operands[0] == self.read.root)
            ):
                shift = _constant(op.operands[1])
                if shift is None:
                    raise Unsupported(f"memref.view at {op.location} has a non-constant shift")
                bid = self._id(op, len(self.shape.buffers))
                buffer = self._new_buffer(bid, op.results[0], op.results[0].type, None)
                buffer.offset = shift
                self.read.views[bid] = op
            if name in _UNIFORM_SOURCES or (
                (name.startswith(_PURE_PREFIXES) or name in _PURE)
                and all(v in self.uniform for v in op.operands)
            ):
                self.uniform.update(op.results)
            if name == "scf.for" and all(v in self.uniform for v in list(op.operands)[:3]):
                self.uniform.add(op.regions[0].blocks[0].arguments[0])
            for region in op.regions:
                for b in region.blocks:
                    self._declare(b)

    def _id(self, op: Any, k: int) -> str:
        """The name the printer gives the value (``alloc_3``), unique in the kernel."""
        try:
            name = str(op.results[0].get_name()).lstrip("%")
        except Exception:  # an older binding: number them
            name = ""
        name = name or f"buffer{k}"
        if name in self.shape.buffers:  # names are per region: another region's may clash
            name = f"{name}#{k}"
        return name

    def _add(self, value: Any, ids: set[str]) -> bool:
        have = self.alias.setdefault(value, set())
        if ids <= have:
            return False
        have |= ids
        return True

    def _propagate(self, block: Any) -> bool:
        """One sweep of alias flow through views and scf values; True when anything grew."""
        changed = False
        for child in block.operations:
            op = child.operation
            name = op.name
            operands = list(op.operands)
            if name in _VIEWS and operands and operands[0] in self.alias:
                for r in op.results:
                    if str(r.type).startswith("memref"):
                        changed |= self._add(r, self.alias[operands[0]])
            elif name == "arith.select" and any(v in self.alias for v in operands[1:]):
                # A choice between buffers aliases every one it may choose.
                for v in operands[1:]:
                    if v in self.alias:
                        changed |= self._add(op.results[0], self.alias[v])
            elif name == "scf.for":
                body = op.regions[0].blocks[0]
                for k, init in enumerate(operands[3:]):
                    if init in self.alias:
                        changed |= self._add(body.arguments[k + 1], self.alias[init])
                        changed |= self._add(op.results[k], self.alias[init])
            elif name == "scf.yield":
                parent = op.parent
                for k, v in enumerate(operands):
                    if v not in self.alias:
                        continue
                    if parent.name == "scf.for":
                        changed |= self._add(parent.results[k], self.alias[v])
                        changed |= self._add(
                            parent.regions[0].blocks[0].arguments[k + 1], self.alias[v]
                        )
                    elif parent.name in ("scf.if", "scf.index_switch", "scf.execute_region"):
                        changed |= self._add(parent.results[k], self.alias[v])
            for region in op.regions:
                for b in region.blocks:
                    changed |= self._propagate(b)
        return changed

    # Pass 2: points, control flow, barriers and accesses ----------------------------------

    def walk(self) -> None:
        self._walk(self.function.regions[0].blocks[0])

    def _point(self, op: Any) -> int:
        p = self.shape.point()
        self.read.ops_at.append(op)
        return p

    def _walk(self, block: Any) -> None:
        for child in block.operations:
            self._visit(child.operation)

    def _visit(self, op: Any) -> None:
        shape = self.shape
        name = op.name
        p = self._point(op)
        for r in op.results:
            if r in self.defined:  # the regions around the allocation
                shape.buffers[self.defined[r]].scope = shape.scope()
        if (
            self.read.root is not None
            and name != "memref.view"
            and any(v == self.read.root for v in op.operands)
        ):
            raise Unsupported(f"{name} at {op.location} uses the dynamic shared memory itself")
        touched: set[str] = set()
        for v in op.operands:
            touched |= self.alias.get(v, set())
        if name in _BARRIERS:
            if name != "gpu.barrier" or _fences_workgroup(op):
                shape.barrier(p)
        elif touched:
            self._use(op, name, p, touched)
        if name == "scf.for":
            bounds = list(op.operands)[:3]
            uniform = all(v in self.uniform for v in bounds)
            self._loop(op, _trips(bounds) if uniform else None, divergent=not uniform)
        elif name == "scf.forall":
            mapping = str(op.attributes["mapping"]) if "mapping" in op.attributes else ""
            if mapping and "workgroup" not in mapping and "block" not in mapping:
                raise Unsupported(f"scf.forall at {op.location} is mapped to {mapping}")
            self._loop(op, None, divergent=False)
        elif name == "scf.while":
            self._loop(op, None, divergent=True)
        elif name == "scf.if":
            cond = op.operands[0]
            if cond in self.uniform and not shape.divergent:
                shape.open_branch()
                for region in op.regions:
                    shape.open_arm()
                    for b in region.blocks:
                        self._walk(b)
                    self._close()
            else:
                shape.divergent += 1
                for region in op.regions:
                    for b in region.blocks:
                        self._walk(b)
                shape.divergent -= 1
        elif op.regions:
            self._opaque(op)

    def _close(self) -> None:
        before = self.shape.points
        self.shape.close()
        if self.shape.points != before:  # an empty arm got a point of its own
            self.read.ops_at.append(None)

    def _loop(self, op: Any, trips: int | None, *, divergent: bool) -> None:
        shape = self.shape
        if divergent:
            shape.divergent += 1
        shape.open_loop(trips)
        for region in op.regions:
            for b in region.blocks:
                self._walk(b)
        self._close()
        if divergent:
            shape.divergent -= 1

    def _opaque(self, op: Any) -> None:
        """An operation with regions this reader does not model: fine while nothing inside
        touches a buffer or synchronizes."""
        inner: list[Any] = []
        for region in op.regions:
            for b in region.blocks:
                for child in b.operations:
                    inner.append(child.operation)
        while inner:
            o = inner.pop()
            if o.name in _BARRIERS or any(v in self.alias for v in o.operands):
                raise Unsupported(
                    f"{op.name} at {op.location} holds {o.name}, which this "
                    "bridge cannot place in program order"
                )
            for region in o.regions:
                for b in region.blocks:
                    inner.extend(c.operation for c in b.operations)

    def _use(self, op: Any, name: str, p: int, touched: set[str]) -> None:
        if name == "memref.dealloc":
            self.read.deallocs.append(op)
        if name in _VIEWS or name in _IGNORED_USES or name in _ALIASING:
            return
        if name in _ACCESSES or name.startswith("linalg."):
            for bid in touched:
                self.shape.access(bid, p)
                self._widen(bid, op)
            return
        raise Unsupported(
            f"{name} at {op.location} uses workgroup buffer "
            f"{', '.join(sorted(touched))} with memory effects this bridge does not know"
        )

    def _widen(self, bid: str, op: Any) -> None:
        """A vector access needs its buffer aligned to the vector's bytes (up to 16)."""
        from iree.compiler import ir

        for v in [*op.results, *op.operands]:
            if isinstance(v.type, ir.VectorType):
                width = min(_MAX_VECTOR_ALIGNMENT, _bytes_of(v.type))
                width = 1 << (width.bit_length() - 1)
                buffer = self.shape.buffers[bid]
                buffer.alignment = max(buffer.alignment, width)


def _arena(op: Any) -> bool:
    """A workgroup allocation of bytes used only through ``memref.view``s: the arena of a
    placed kernel where ``gpu.dynamic_shared_memory`` cannot be used (an IREE executable)."""
    t = op.results[0].type
    if not workgroup(t) or str(t).split("<", 1)[1].split(",")[0].split("x")[-1] != "i8":
        return False
    uses = [getattr(u.owner, "operation", u.owner) for u in op.results[0].uses]
    return bool(uses) and all(u.name == "memref.view" for u in uses)


def _fences_workgroup(op: Any) -> bool:
    if "address_spaces" not in op.attributes:
        return True
    return "workgroup" in str(op.attributes["address_spaces"])


def _trips(bounds: list[Any]) -> int | None:
    lb, ub, step = (_constant(v) for v in bounds)
    if lb is None or ub is None or step is None or step <= 0:
        return None
    trips = -(-(ub - lb) // step)
    return trips if trips >= 1 else None


def read_kernel(function: Any, *, placed: bool = False) -> KernelRead:
    """The shape of one kernel function; raises ``Unsupported`` naming what it cannot read."""
    reader = _Reader(function, placed=placed)
    reader.collect()
    reader.walk()
    return reader.read
