"""Reads Triton's TTGIR, as Triton prints it after its own shared-memory allocation, into a
kernel shape (docs/bridges.md, Triton).

The printed form is one operation per line; a line ending in ``{`` opens the operation's
region, ``} else {`` moves to an ``scf.if``'s else region, and a line starting with ``}``
closes it (its rest, such as ``}) {allocation.offset = 0 : i32} : ...``, belongs to the
operation). Buffers are ``ttg.local_alloc`` results (Triton's ``allocation.offset``) followed
through ``ttg.memdesc_*`` views and ``scf`` values, and the scratch of operations that carry
``allocation.offset`` and ``allocation.size`` (a layout conversion, a reduction), live at
their operation alone. ``ttg.barrier local`` and ``gpu.barrier`` are barriers. Every scalar
in TTGIR is one value per program, so every loop and branch is block-uniform.

An asynchronous copy (``ttg.async_copy_global_to_local``) is a ``cp.async`` write, an
asynchronous wgmma (``ttng.warp_group_dot``) an ``mma`` read of its operands and a TMA store
(``ttng.async_tma_copy_local_to_global``) a ``tma`` read of its buffer, each completed by a
``wait_group`` at the wait that retires it (``ttg.async_wait {num = N}``,
``ttng.warp_group_dot_wait {pendings = N}``, ``ttng.async_tma_store_wait``) where that wait
follows it in its own region and the request's group counting agrees with Triton's
(``_Reader._cover``); ``ttng.fence_async_shared`` is then a ``fence_proxy_async``. An
mbarrier array indexed only by constants is one 8-byte ``"mbarrier"`` buffer per element,
whose operations are syncs (``barrier_expect`` an ``expect_tx``, ``wait_barrier`` an
``mbarrier_wait``, ...), and a TMA load (``ttng.async_tma_copy_global_to_local``) arriving on
one is a ``tma`` write completed by the element's ``wait_barrier`` where the TTGIR states it
(``_Reader._tma_cover``). Otherwise (a wait in a later iteration, a stage computed in a loop)
the operation is taken, as Triton's allocation assumes, as the threads' access up to the first
such wait with nothing pending after the last of them on its buffer, else to the end of the
kernel; TMA loads up to the buffer's ``ttg.local_dealloc``, and an mbarrier array kept whole
is a buffer its operations access. Barriers Triton's lowering
adds without printing them stand at their operation: before a scalar atomic, after a TMA
descriptor's acquire fence. Anything else
that touches shared memory asynchronously or from another partition (warp specialization, an
unknown operation) raises ``Unsupported``: such a kernel is reported, not guessed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from planner.bridges._program import BufferShape, KernelShape, Unsupported

__all__ = ["TtgirRead", "read_ttgir"]

_VIEWS = frozenset(
    {
        "ttg.memdesc_index",
        "ttg.memdesc_subslice",
        "ttg.memdesc_subview",
        "ttg.memdesc_trans",
        "ttg.memdesc_reshape",
        "ttg.memdesc_reinterpret",
    }
)
_ACCESSES = frozenset(
    {
        "ttg.local_load",
        "ttg.local_store",
        "ttg.local_alloc",
        "tt.dot",
        "ttng.warp_group_dot_wait",
        # mbarriers: 8-byte objects in shared memory the threads initialize, arm, wait on and
        # invalidate; a TMA copy arrives on one asynchronously (below).
        "ttng.init_barrier",
        "ttng.barrier_expect",
        "ttng.wait_barrier",
        "ttng.arrive_barrier",
        "ttng.inval_barrier",
    }
)
# Operations that touch shared memory asynchronously, and the wait that retires all of them
# (a pattern matching its "nothing pending" form).
_ASYNC = {
    "ttg.async_copy_global_to_local": ("ttg.async_wait", re.compile(r"num\s*=\s*0\s*:")),
    "ttng.warp_group_dot": ("ttng.warp_group_dot_wait", re.compile(r"pendings\s*=\s*0\s*:")),
    # TMA: a store reads its buffer until a store wait with nothing pending; a load writes its
    # buffer and arrives on its mbarrier, both retired by the buffer's ttg.local_dealloc (below),
    # where Triton's own allocation ends the buffer.
    "ttng.async_tma_copy_local_to_global": (
        "ttng.async_tma_store_wait",
        re.compile(r"pendings\s*=\s*0\s*[:,}]"),
    ),
    "ttng.async_tma_copy_global_to_local": ("ttg.local_dealloc", re.compile(r"$^")),
}
# Each asynchronous operation's agent, the op it makes and its wait_group group (None: it
# completes on an mbarrier).
_AGENT: dict[str, tuple[str, str, str | None]] = {
    "ttg.async_copy_global_to_local": ("cp.async", "write", "cp.async"),
    "ttng.warp_group_dot": ("mma", "read", "wgmma"),
    "ttng.async_tma_copy_local_to_global": ("tma", "read", "bulk"),
    "ttng.async_tma_copy_global_to_local": ("tma", "write", None),
}
_PENDING = re.compile(r"(?:num|pendings)\s*=\s*(\d+)")
# Operations by the threads that only read shared memory.
_READS = frozenset({"ttg.local_load", "tt.dot", "ttng.warp_group_dot", "ttng.warp_group_dot_wait"})
_IGNORED = frozenset({"ttg.local_dealloc"})
_BARRIERS = frozenset({"ttg.barrier", "gpu.barrier"})
# Scalar atomics: Triton's lowering puts a block-wide barrier before each one (and, where the
# result goes to every thread, one between its scratch's write and read), so a barrier stands
# at the operation's point though none is printed.
_ATOMICS = frozenset({"tt.atomic_cas", "tt.atomic_rmw"})
# Operations whose lowering is followed by a block-wide barrier: the acquire fence of a TMA
# descriptor built in shared memory (one warp fences, the barrier holds the others).
_BARRIER_AFTER = frozenset({"ttng.tensormap_fenceproxy_acquire"})
_ELEMENT_BYTES = {
    "i1": 1,
    "i8": 1,
    "i16": 2,
    "i32": 4,
    "i64": 8,
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "tf32": 4,
}
_DEFAULT_ALIGNMENT = 16  # bytes: Triton aligns every shared buffer to at least this
_RESULTS = re.compile(r"^(%[\w]+(?::\d+)?(?:\s*,\s*%[\w]+(?::\d+)?)*)\s*=\s*(.*)$")
_NAME = re.compile(r'^"?([A-Za-z_][\w.]*)"?')
_VALUE = re.compile(r"%[\w]+(?:#\d+)?")
_MEMDESC = re.compile(r"!ttg\.memdesc<((?:\d+x)+)(\w+)((?:,\s*#[\w]+)*)")
_OFFSET = re.compile(r"allocation\.offset\s*=\s*(\d+)")
_SIZE = re.compile(r"allocation\.size\s*=\s*(\d+)")
_CONSTANT = re.compile(r"^arith\.constant\s+(-?\d+)\s*:\s*i\d+")
_TRUE = re.compile(r"^arith\.constant\s+true\b")
# mbarrier operations on one element of a split mbarrier array, and the sync each one is.
_MBARRIER_SYNCS = {
    "ttng.init_barrier": None,  # the mbarrier's start
    "ttng.barrier_expect": "expect_tx",
    "ttng.wait_barrier": "mbarrier_wait",
    "ttng.arrive_barrier": "mbarrier_arrive",
    "ttng.inval_barrier": "mbarrier_inval",
}
_TMA_LOAD = "ttng.async_tma_copy_global_to_local"


@dataclass
class _Op:
    line: int  # 1-based, in the printed module
    name: str
    results: list[str]
    text: str  # the operation's line and its closing line
    regions: list[list[_Op]] = field(default_factory=list)


@dataclass
class TtgirRead:
    """One Triton kernel as read: its shape, Triton's offsets and its figures."""

    name: str
    shape: KernelShape
    offsets: dict[str, int]  # buffer id -> Triton's allocation.offset, bytes
    shared_bytes: int  # the module's ttg.shared: what Triton gives the kernel
    barrier_ops: int  # barrier operations in the module
    lowered_barriers: int = 0  # barriers the lowering adds: one before each scalar atomic
    async_ops: int = 0
    exact_async: dict[str, int] = field(default_factory=dict)  # agent -> accesses modelled
    approximated: dict[str, int] = field(default_factory=dict)  # agent -> accesses taken as
    # threads' until the wait that drains them (or the buffer's dealloc)
    unsplit: list[str] = field(default_factory=list)  # mbarrier arrays kept whole, and why


@dataclass
class _Issue:
    """An asynchronous operation: its point, the buffers it touches, where it stands."""

    op: _Op
    at: int
    buffers: list[str]
    region: list[_Op]
    index: int
    mbarrier: str | None = None  # the mbarrier element a TMA load arrives on, when split


_TOKEN = re.compile(r"%[\w]+")
_DEFINED = re.compile(r"(%[\w]+)\s*=(?!=)")  # a block argument a region header names


class _Names:
    """Unique value names. The printer reuses a name in regions that cannot see each other
    (``%19`` in an ``scf.if``'s then region and another ``%19`` in its else region); a name
    defined again gets the line number as a suffix, and each use resolves to the definition
    in scope, innermost first."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, str]] = []
        self.seen: set[str] = set()

    def _fresh(self, token: str, line: int) -> str:
        fresh = token if token not in self.seen else f"{token}_{line}"
        self.seen.add(token)
        self.seen.add(fresh)
        return fresh

    def resolve(self, token: str) -> str:
        for scope in reversed(self.scopes):
            if token in scope:
                return scope[token]
        return token

    def rename(self, text: str, line: int, *, results_end: int = 0) -> tuple[str, dict[str, str]]:
        """The text with its names made unique, and the block arguments it defines for the
        region it opens (``scf.for %i = ... iter_args(%a = ...)``)."""
        inner = {m.group(1) for m in _DEFINED.finditer(text[results_end:])}
        opened: dict[str, str] = {}

        def one(m: re.Match[str]) -> str:
            token = m.group(0)
            if m.start() < results_end:
                fresh = self._fresh(token, line)
                self.scopes[-1][token] = fresh
                return fresh
            if token in inner and re.match(r"\s*=(?!=)", text[m.end() :]):
                fresh = self._fresh(token, line)
                opened[token] = fresh
                return fresh
            return self.resolve(token)

        return _TOKEN.sub(one, text), opened

    def define_all(self, text: str, line: int) -> None:
        """A block label's arguments (``^bb0(%a: f32, %b: f32):``), in the current region."""
        for token in _TOKEN.findall(text):
            self.scopes[-1][token] = self._fresh(token, line)


def _tree(text: str) -> tuple[list[_Op], dict[str, str], int, str]:
    """The kernel's operations as a tree; the attribute aliases; ttg.shared; its name."""
    aliases: dict[str, str] = {}
    shared = 0
    name = "kernel"
    root: list[_Op] = []
    stack: list[tuple[_Op | None, list[_Op]]] = []  # (operation, its open region)
    names = _Names()  # one scope per open region, beside ``stack``
    functions = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("#") and "=" in line and not stack:
            key, _, value = line.partition("=")
            aliases[key.strip()] = value.strip()
            continue
        if line.startswith("module"):
            found = re.search(r"ttg\.shared\s*=\s*(\d+)", line)
            shared = int(found.group(1)) if found else 0
            stack.append((None, []))
            names.scopes.append({})
            continue
        if line.startswith("tt.func"):
            functions += 1
            if functions > 1:
                raise Unsupported("the module holds more than one function (a call)")
            found = re.search(r"@([\w$.]+)", line)
            name = found.group(1) if found else name
            stack.append((None, root))
            names.scopes.append({})
            continue
        if line.startswith("^"):
            if names.scopes:
                names.define_all(line, number)
            continue  # a block label inside a combiner region
        if line.startswith("}"):
            _close(line, number, stack, names)
            continue
        if not stack:
            continue
        matched = _RESULTS.match(line)
        line, opened = names.rename(line, number, results_end=matched.end(1) if matched else 0)
        results, rest = _results(line)
        found_name = _NAME.match(rest)
        op = _Op(number, found_name.group(1) if found_name else rest.split()[0], results, line)
        stack[-1][1].append(op)
        if line.endswith("{"):
            op.regions.append([])
            stack.append((op, op.regions[-1]))
            names.scopes.append(opened)
    return root, aliases, shared, name


def _close(
    line: str, number: int, stack: list[tuple[_Op | None, list[_Op]]], names: _Names
) -> None:
    """A closing brace: the innermost region ends; ``} else {`` opens the operation's next."""
    op, _ = stack.pop()
    names.scopes.pop()
    line, _ = names.rename(line, number)
    if op is not None:
        op.text += " " + line
        if line.rstrip().endswith("{"):  # } else {
            op.regions.append([])
            stack.append((op, op.regions[-1]))
            names.scopes.append({})


def _results(line: str) -> tuple[list[str], str]:
    """The values an operation's line defines (``%x:2`` is ``%x#0``, ``%x#1``) and the rest of
    the line after ``=``."""
    results: list[str] = []
    rest = line
    matched = _RESULTS.match(line)
    if matched:
        rest = matched.group(2)
        for token in matched.group(1).split(","):
            token = token.strip()
            if ":" in token:
                base, count = token.split(":")
                results += [f"{base}#{k}" for k in range(int(count))]
            else:
                results.append(token)
    return results, rest


def _memdesc_bytes(text: str, aliases: dict[str, str]) -> tuple[int, int]:
    """Bytes of the memdesc a line produces, and the alignment its layout needs."""
    found = _MEMDESC.findall(text)
    if not found:
        raise Unsupported(f"no memdesc type in {text[:120]!r}")
    dims, element, attrs = found[-1]
    if element not in _ELEMENT_BYTES and not element.startswith("f8"):
        raise Unsupported(f"element type {element} of a shared buffer has no known width")
    width = _ELEMENT_BYTES.get(element, 1)
    size = math.prod(int(d) for d in dims.rstrip("x").split("x")) * width
    alignment = _DEFAULT_ALIGNMENT
    for attr in re.findall(r"#[\w]+", attrs):
        layout = aliases.get(attr, attr)
        if "padded_shared" in layout:
            raise Unsupported(f"padded shared layout {attr}: its size is not modelled")
        swizzle = re.search(r"swizzlingByteWidth\s*=\s*(\d+)", layout)
        if swizzle:  # a TMA/wgmma swizzle repeats every 8 rows of the swizzle width
            alignment = max(alignment, 8 * int(swizzle.group(1)))
    return size, alignment


class _Reader:
    def __init__(self, name: str, aliases: dict[str, str]) -> None:
        self.shape = KernelShape(name)
        self.aliases = aliases
        self.alias: dict[str, set[str]] = {}
        self.constants: dict[str, int] = {}
        self.offsets: dict[str, int] = {}
        self.barrier_ops = 0
        self.lowered_barriers = 0  # barriers Triton's lowering puts before scalar atomics
        # buffer -> (the wait that retires its accesses, their points)
        self.async_copies: dict[tuple[str, str], list[int]] = {}
        self.final_waits: dict[str, list[int]] = {}  # wait -> points where nothing is pending
        self.async_ops = 0
        self.deallocs: dict[str, list[int]] = {}  # buffer -> points of its ttg.local_dealloc
        self.issues: list[_Issue] = []  # asynchronous operations, in program order
        self.points_of: dict[int, int] = {}  # id(op) -> its point
        self.here: tuple[list[_Op], int] = ([], 0)  # the region being walked, the op's index
        self.threads: dict[str, list[tuple[int, str]]] = {}  # buffer -> (point, op) by threads
        self.listed: dict[str, list[dict[str, object]]] = {}  # buffer -> asynchronous accesses
        self.syncs: set[tuple[int, str, int, bool]] = set()  # covering waits
        self.fences: list[int] = []  # points of ttng.fence_async_shared
        self.exact = True
        self.exact_async: dict[str, int] = {}
        self.approximated: dict[str, int] = {}
        # Mbarrier arrays split into 8-byte mbarriers: array -> elements; a memdesc_index
        # result -> its element; the syncs their operations are; why an array is not split.
        self.split: dict[str, int] = {}
        self.element_of: dict[str, str] = {}
        self.mbarrier_syncs: list[dict[str, object]] = []
        self.unsplit: list[str] = []
        self.exact_tma = False  # a TMA load completed by its mbarrier_wait
        self.true: set[str] = set()  # values that are the constant true
        self.constants_all: dict[str, int] = {}  # every integer constant of the kernel
        self.used: dict[int, list[str]] = {}  # id(op) -> the values it uses

    def declare(self, ops: list[_Op]) -> None:
        """Mbarrier arrays to split, then aliases through views and scf values, to a
        fixpoint."""
        self._split_mbarriers(ops)
        changed = True
        while changed:
            changed = self._propagate(ops, None)

    def _split_mbarriers(self, ops: list[_Op]) -> None:
        """An array of mbarriers (``memdesc<Nx1xi64>`` that ``ttng.init_barrier`` initializes
        through ``ttg.memdesc_index``) is N 8-byte mbarriers when every use of it is a
        ``ttg.memdesc_index`` by a constant (or its ``ttg.local_dealloc``): each element is then
        a buffer of kind "mbarrier" of its own. Otherwise it stays one buffer, and a TMA load
        that arrives on it stays approximated (the reason goes to ``unsplit``)."""
        flat = _flat(ops)
        constants = self.constants_all
        for op in flat:
            rest = op.text.split("=", 1)[-1].strip()
            if op.name == "arith.constant" and op.results:
                found = _CONSTANT.match(rest)
                if found:
                    constants[op.results[0]] = int(found.group(1))
                elif _TRUE.match(rest):
                    self.true.add(op.results[0])
        arrays: dict[str, int] = {}
        for op in flat:
            if op.name != "ttg.local_alloc" or not op.results or self._uses(op):
                continue
            types = _MEMDESC.findall(op.text)
            if not types or types[-1][1] != "i64":
                continue
            dims = [int(d) for d in types[-1][0].rstrip("x").split("x")]
            if len(dims) == 2 and dims[1] == 1:
                arrays[op.results[0]] = dims[0]
        indexed: dict[str, list[tuple[str, int]]] = {a: [] for a in arrays}
        initialized: set[str] = set()
        views: dict[str, str] = {}
        for op in flat:
            uses = self._uses(op)
            if op.name == "ttng.init_barrier" and uses and uses[0] in views:
                initialized.add(views[uses[0]])
            for k, v in enumerate(uses):
                if v not in arrays:
                    continue
                if op.name == "ttg.local_dealloc":
                    continue
                index = constants.get(uses[1]) if len(uses) > 1 else None
                if op.name == "ttg.memdesc_index" and k == 0 and op.results:
                    views[op.results[0]] = v
                    if index is not None and 0 <= index < arrays[v]:
                        indexed[v].append((op.results[0], index))
                        continue
                if arrays[v]:
                    self.unsplit.append(
                        f"mbarrier array {v}: line {op.line}, {op.name} with an index that is "
                        "not a constant"
                        if op.name == "ttg.memdesc_index"
                        else f"mbarrier array {v}: line {op.line}, used by {op.name}"
                    )
                arrays[v] = 0
        for array, count in arrays.items():
            if not count or array not in initialized:
                continue
            self.split[array] = count
            for view, index in indexed[array]:
                self.element_of[view] = f"{array}[{index}]"
        self.unsplit = [u for u in self.unsplit if u.split()[2].rstrip(":") in initialized]

    def _add(self, name: str, ids: set[str]) -> bool:
        have = self.alias.setdefault(name, set())
        if ids <= have:
            return False
        have |= ids
        return True

    def _uses(self, op: _Op) -> list[str]:
        """The values the operation uses, in order (found once per operation; not to be
        changed by the caller)."""
        found = self.used.get(id(op))
        if found is None:
            head = op.text.split("{", 1)[0] if op.name == "scf.for" else op.text
            found = self.used[id(op)] = [v for v in _VALUE.findall(head) if v not in op.results]
        return found

    def _propagate(self, ops: list[_Op], parent: _Op | None) -> bool:
        changed = False
        for op in ops:
            if op.name == "ttg.local_alloc" and op.results and op.results[0] not in self.split:
                changed |= self._add(op.results[0], {f"{op.results[0]}"})
            uses = self._uses(op)
            if op.results and op.results[0] in self.element_of:
                changed |= self._add(op.results[0], {self.element_of[op.results[0]]})
            elif op.name in _VIEWS and uses and uses[0] in self.alias and op.results:
                changed |= self._add(op.results[0], self.alias[uses[0]])
            elif op.name == "scf.for":
                pairs = re.findall(r"(%[\w]+)\s*=\s*(%[\w]+(?:#\d+)?)", op.text.split("{", 1)[0])
                for k, (arg, init) in enumerate(pairs[1:]):  # the first is the induction var
                    if init in self.alias:
                        changed |= self._add(arg, self.alias[init])
                        if k < len(op.results):
                            changed |= self._add(op.results[k], self.alias[init])
            elif op.name == "scf.yield" and parent is not None:
                for k, v in enumerate(uses):
                    if v not in self.alias:
                        continue
                    if k < len(parent.results):
                        changed |= self._add(parent.results[k], self.alias[v])
                    if parent.name == "scf.for":
                        pairs = re.findall(
                            r"(%[\w]+)\s*=\s*(%[\w]+(?:#\d+)?)", parent.text.split("{", 1)[0]
                        )
                        if k + 1 < len(pairs):
                            changed |= self._add(pairs[k + 1][0], self.alias[v])
            for region in op.regions:
                changed |= self._propagate(region, op)
        return changed

    def walk(self, ops: list[_Op]) -> None:
        for k, op in enumerate(ops):
            self.here = (ops, k)
            self._visit(op)

    def _visit(self, op: _Op) -> None:
        p = self.shape.point()
        self.points_of[id(op)] = p
        self._note(op, p)
        self._allocate(op, p)
        self._synchronise(op, p)
        touched = self._touched(op, p)
        elements = {b for b in touched if self.shape.buffers[b].kind == "mbarrier"}
        if self._mbarrier_sync(op, p, elements):
            return  # it touches its mbarrier alone and holds no region
        mbarrier = self._arrival(op, p, elements)
        self._access(op, p, touched - elements, mbarrier)
        self._nest(op)

    def _note(self, op: _Op, p: int) -> None:
        """A fence at ``p``, or the value of an integer constant."""
        if op.name == "ttng.fence_async_shared":  # fence.proxy.async.shared::cta
            self.fences.append(p)
        constant = _CONSTANT.match(op.text.split("=", 1)[-1].strip())
        if op.name == "arith.constant" and constant and op.results:
            self.constants[op.results[0]] = int(constant.group(1))

    def _allocate(self, op: _Op, p: int) -> None:
        """The buffer a ``ttg.local_alloc`` declares (one per element of a split mbarrier
        array), or the scratch an op with an offset of its own writes at ``p``."""
        shape = self.shape
        if op.name == "ttg.local_alloc":
            size, alignment = _memdesc_bytes(op.text, self.aliases)
            offset = _OFFSET.search(op.text)
            if offset is None:
                raise Unsupported(f"line {op.line}: ttg.local_alloc has no allocation.offset")
            bid = op.results[0]
            if bid in self.split:
                for k in range(self.split[bid]):
                    element = f"{bid}[{k}]"
                    shape.allocate(BufferShape(element, 8, 8, shape.scope(), kind="mbarrier"))
                    self.offsets[element] = int(offset.group(1)) + 8 * k
            else:
                shape.allocate(BufferShape(bid, size, alignment, shape.scope()))
                self.offsets[bid] = int(offset.group(1))
        elif (scratch := _OFFSET.search(op.text)) is not None:
            size_found = _SIZE.search(op.text)
            if size_found is None:
                raise Unsupported(f"line {op.line}: {op.name} has an offset and no size")
            bid = f"{op.name}@{op.line}"
            shape.allocate(
                BufferShape(bid, int(size_found.group(1)), _DEFAULT_ALIGNMENT, shape.scope())
            )
            self.offsets[bid] = int(scratch.group(1))
            shape.access(bid, p)
            self.threads.setdefault(bid, []).append((p, "write"))

    def _synchronise(self, op: _Op, p: int) -> None:
        """A barrier at ``p`` (written, or lowered after the op), a wait that drains its
        async group; a warp-specialized region is refused."""
        if op.name in _BARRIERS and (op.name != "ttg.barrier" or "local" in op.text):
            self.shape.barrier(p)
            self.barrier_ops += 1
        elif op.name in _BARRIER_AFTER or (  # after: no shared access of its own, so exact
            op.name in _ATOMICS and "-> tensor<" not in op.text.split(" loc(")[0]
        ):
            self.shape.barrier(p)
            self.lowered_barriers += 1
        for wait, drained in _ASYNC.values():
            if op.name == wait and drained.search(op.text):
                self.final_waits.setdefault(wait, []).append(p)
        if op.name.startswith("ttg.warp_specialize"):
            raise Unsupported(
                f"line {op.line}: {op.name} (asynchronous or partitioned access "
                "to shared memory this bridge does not model)"
            )

    def _touched(self, op: _Op, p: int) -> set[str]:
        """The buffers the op's operands alias (and an allocation's own, when it writes an
        initial value); a ``ttg.local_dealloc`` frees them at ``p``."""
        touched: set[str] = set()
        for v in self._uses(op):
            touched |= self.alias.get(v, set())
        if op.name == "ttg.local_dealloc":
            for bid in touched:
                self.deallocs.setdefault(bid, []).append(p)
        if op.name == "ttg.local_alloc" and len(self._uses(op)) > 0:
            touched |= {op.results[0]}  # an initial value is written at the allocation
        return touched

    def _mbarrier_sync(self, op: _Op, p: int, elements: set[str]) -> bool:
        """Whether the op is an mbarrier operation on one mbarrier (``elements``: the
        mbarriers it touches): its access at ``p`` and the sync it makes are recorded."""
        if op.name not in _MBARRIER_SYNCS or len(elements) != 1:
            return False
        (element,) = elements
        self.shape.access(element, p)
        kind = _MBARRIER_SYNCS[op.name]
        if kind is not None:
            self.mbarrier_syncs.append({"kind": kind, "at": p, "mbarrier": element})
        return True

    def _arrival(self, op: _Op, p: int, elements: set[str]) -> str | None:
        """The mbarrier a TMA load arrives on at ``p`` (None: the op touches none); any other
        use of an mbarrier is refused."""
        if not elements:
            return None
        if op.name != _TMA_LOAD or len(elements) != 1:
            raise Unsupported(
                f"line {op.line}: {op.name} uses mbarrier {', '.join(sorted(elements))} "
                "in a way this bridge does not model"
            )
        (mbarrier,) = elements
        self.shape.access(mbarrier, p)
        return mbarrier

    def _access(self, op: _Op, p: int, touched: set[str], mbarrier: str | None) -> None:
        """The op's accesses at ``p`` to the shared buffers it ``touched``: issued (async,
        completed by a wait later) or by the threads, read or written."""
        if (
            not touched
            or op.name in _VIEWS
            or op.name in _IGNORED
            or op.name in ("scf.for", "scf.yield", "scf.if")
        ):
            return
        issued = op.name in _ASYNC and (op.name != "ttng.warp_group_dot" or "isAsync" in op.text)
        if issued:
            self.async_ops += 1
            region, index = self.here
            self.issues.append(_Issue(op, p, sorted(touched), region, index, mbarrier))
        elif op.name == "ttng.warp_group_dot":
            pass  # a synchronous wgmma: its reads are done when it returns
        elif op.name not in _ACCESSES:
            raise Unsupported(
                f"line {op.line}: {op.name} uses shared buffer "
                f"{', '.join(sorted(touched))} in a way this bridge does "
                "not model"
            )
        for bid in touched:
            self.shape.access(bid, p)
            if not issued:
                what = "read" if op.name in _READS else "write"
                self.threads.setdefault(bid, []).append((p, what))

    def _nest(self, op: _Op) -> None:
        """The op's regions, walked as a loop (``scf.for``, ``scf.while``) or a branch
        (``scf.if``); any other region is checked to hold nothing to place."""
        shape = self.shape
        if op.name == "scf.for":
            shape.open_loop(self._trips(op))
            for region in op.regions:
                self.walk(region)
            shape.close()
        elif op.name == "scf.if":
            shape.open_branch()
            for region in op.regions:
                shape.open_arm()
                self.walk(region)
                shape.close()
            if len(op.regions) == 1:  # no else: an arm of its own, without accesses
                shape.open_arm()
                shape.close()
        elif op.name == "scf.while":
            if any(v in self.alias for v in self._uses(op)):
                raise Unsupported(f"line {op.line}: scf.while carries a shared buffer")
            # Its condition region and its body repeat together: one loop of unknown trips.
            shape.open_loop(None)
            for region in op.regions:
                self.walk(region)
            shape.close()
        elif op.regions:
            self._opaque(op)

    def _trips(self, op: _Op) -> int | None:
        """An ``scf.for``'s trip count, where its bounds and step are known constants (None:
        unknown, or no trip)."""
        bounds = re.findall(r"=\s*(%[\w]+)\s+to\s+(%[\w]+)\s+step\s+(%[\w]+)", op.text)
        trips = None
        if bounds:
            lb, ub, step = (self.constants.get(v) for v in bounds[0])
            if lb is not None and ub is not None and step is not None and step > 0:
                trips = -(-(ub - lb) // step)
        return trips if trips and trips >= 1 else None

    def _opaque(self, op: _Op) -> None:
        inner = [o for region in op.regions for o in region]
        while inner:
            o = inner.pop()
            if o.name in _BARRIERS or any(v in self.alias for v in self._uses(o)):
                raise Unsupported(
                    f"line {op.line}: {op.name} holds {o.name}, which this "
                    "bridge cannot place in program order"
                )
            inner.extend(x for region in o.regions for x in region)

    def finish(self) -> None:
        """Each asynchronous operation ends at the wait that covers it where the request can
        say so exactly (below); else, as Triton's allocation assumes, by the first wait with
        nothing pending (``async_wait {num = 0}``, ...) after the last of them on its buffer,
        else by the end of the kernel; TMA loads whose mbarrier wait is not stated so, by the
        buffer's ``ttg.local_dealloc``."""
        covers = self._covers()
        last = self.shape.points - 1
        drained: dict[tuple[str, str], list[int]] = {}
        for issue in self.issues:
            agent, op, _ = _AGENT[issue.op.name]
            cover = covers.get(id(issue))
            done = self._tma_cover(issue) if issue.op.name == _TMA_LOAD else None
            if cover is not None:
                done = cover[0]
            for bid in issue.buffers:
                if done is None:
                    drained.setdefault((bid, _ASYNC[issue.op.name][0]), []).append(issue.at)
                    self.threads.setdefault(bid, []).append((issue.at, op))
                    continue
                access: dict[str, object] = {
                    "op": op,
                    "at": issue.at,
                    "bytes": 1,
                    "threads": "all",
                    "agent": agent,
                }
                if issue.mbarrier is not None:
                    access["mbarrier"] = issue.mbarrier
                self.listed.setdefault(bid, []).append(access)
                self.shape.access(bid, done)  # live until the covering wait
            key = "exact_async" if done is not None else "approximated"
            counts = getattr(self, key)
            counts[agent] = counts.get(agent, 0) + 1
            if cover is not None:
                self.syncs.add(cover)
            elif done is not None:
                self.exact_tma = True
        for (bid, wait), copies in drained.items():
            after = [w for w in self.final_waits.get(wait, []) if w > max(copies)]
            freed = [d for d in self.deallocs.get(bid, []) if d > max(copies)]
            if wait != "ttg.local_dealloc":  # only TMA loads end at the dealloc
                freed = []
            end = after[0] if after else freed[0] if freed else last
            self.shape.access(bid, end)
            self.threads.setdefault(bid, []).append((end, "write"))

    def _tma_cover(self, issue: _Issue) -> int | None:
        """The point of the ``ttng.wait_barrier`` that completes a TMA load, where the request
        states it exactly: the load arrives on one element of a split mbarrier array, unless
        predicated off (its predicate is the constant true); in its own region, the last of
        that element's ``barrier_expect`` (predicated true) and ``wait_barrier`` before the
        load is the expect, and a wait on the element follows it there, whose phase is the
        constant that counts the element's earlier waits (mod 2); no nested region in between
        touches the element, and every operation on the element stands in that region."""
        element = issue.mbarrier
        if not self.exact or element is None or self._uses(issue.op)[-1] not in self.true:
            return None
        on: list[tuple[int, _Op]] = []  # (index in the region, op) of the element's ops
        for k, op in enumerate(issue.region):
            touches = any(self.element_of.get(v) == element for v in self._uses(op))
            if op.regions:
                inner = [o for region in op.regions for o in _flat(region)]
                if any(self.element_of.get(v) == element for o in inner for v in self._uses(o)):
                    return None  # the element is used in a nested region
            elif touches and op.name != "ttg.memdesc_index":
                on.append((k, op))
        earlier = [op for k, op in on if k < issue.index and op.name != _TMA_LOAD]
        marks = [op for op in earlier if op.name in ("ttng.barrier_expect", "ttng.wait_barrier")]
        if not marks or marks[-1].name != "ttng.barrier_expect":
            return None
        if self._uses(marks[-1])[-1] not in self.true:
            return None
        waits_before = sum(op.name == "ttng.wait_barrier" for op in earlier)
        wait = next(
            (op for k, op in on if k > issue.index and op.name == "ttng.wait_barrier"), None
        )
        if wait is None:
            return None
        phase = self._uses(wait)[1:2]
        if not phase or self.constants_all.get(phase[0]) != waits_before % 2:
            return None
        return self.points_of[id(wait)]

    def _covers(self) -> dict[int, tuple[int, str, int, bool]]:
        """id(issue) -> (point, group, pending, read) of the wait that covers it, for those
        whose covering wait the request states exactly: a ``wait_group`` among the operations
        that follow it in its own region (the same loop iteration, the same arm), where the
        groups committed in between, as Triton counts them, are the issue points the request
        counts (one operation per group, no issue or commit in a nested region in between).
        TMA loads complete on an mbarrier phase of a stage's barrier array, which the request
        cannot name: they are left out (None)."""
        exact = {id(i): i for i in self.issues if self.exact and _AGENT[i.op.name][2] is not None}
        while True:
            covers: dict[int, tuple[int, str, int, bool]] = {}
            for key, issue in exact.items():
                found = self._cover(issue, exact)
                if found is not None:
                    covers[key] = found
            if len(covers) == len(exact):
                return covers
            exact = {k: i for k, i in exact.items() if k in covers}

    def _cover(self, issue: _Issue, exact: dict[int, _Issue]) -> tuple[int, str, int, bool] | None:
        _, _, group = _AGENT[issue.op.name]
        assert group is not None
        wait_name = _ASYNC[issue.op.name][0]
        exact_ops = {id(i.op) for i in exact.values()}
        # Groups committed after the issue's own: as Triton counts them (at least), and as the
        # request does (its exact issue points); ``unknown`` once a nested region commits some.
        open_copy = group == "cp.async"  # a copy not yet committed
        own_committed = group != "cp.async"
        triton_later = model_later = 0
        unknown = False
        for op in issue.region[issue.index + 1 :]:
            if op.regions:
                inner = [o for region in op.regions for o in _flat(region)]
                if any(_AGENT.get(o.name, ("", "", None))[2] == group for o in inner) or (
                    group == "cp.async" and any(o.name == "ttg.async_commit_group" for o in inner)
                ):
                    if open_copy:
                        return None
                    unknown = True
                continue
            if _AGENT.get(op.name, ("", "", None))[2] == group:
                if open_copy:
                    return None  # two copies in one commit group
                open_copy = group == "cp.async"
                model_later += id(op) in exact_ops
                triton_later += group != "cp.async"
            elif op.name == "ttg.async_commit_group" and group == "cp.async":
                triton_later += own_committed
                own_committed = True
                open_copy = False
            elif op.name == wait_name:
                found = _PENDING.search(op.text)
                if found is None or open_copy:
                    return None
                pending = int(found.group(1))
                if model_later >= pending:
                    read = group == "bulk" and "read_only" in op.text
                    return (self.points_of[id(op)], group, pending, read)
                if unknown or triton_later >= pending:
                    return None  # Triton's wait covers it, the request's would not
        return None

    def request_syncs(self) -> list[dict[str, object]]:
        """The covering waits and, where there are any, the proxy fences: what orders the
        threads' writes before an access through the async proxy."""
        out: list[dict[str, object]] = []
        if self.syncs or self.exact_tma:
            out += [{"kind": "fence_proxy_async", "at": p} for p in sorted(set(self.fences))]
        out += self.mbarrier_syncs
        for at, group, pending, read in sorted(self.syncs):
            sync: dict[str, object] = {"kind": "wait_group", "at": at, "group": group}
            if pending:
                sync["pending"] = pending
            if read:
                sync["read"] = True
            out.append(sync)
        return out


def _flat(ops: list[_Op]) -> list[_Op]:
    out: list[_Op] = []
    for op in ops:
        out.append(op)
        for region in op.regions:
            out += _flat(region)
    return out


def read_ttgir(text: str, *, exact: bool = True) -> TtgirRead:
    """The kernel of a TTGIR module printed after Triton's shared-memory allocation;
    ``exact``: asynchronous accesses with their agent and covering wait where the request can
    state them (else every one taken as the threads' until the wait that drains it)."""
    ops, aliases, shared, name = _tree(text)
    reader = _Reader(name, aliases)
    reader.exact = exact
    reader.declare(ops)
    reader.walk(ops)
    reader.finish()
    reader.shape.syncs = reader.request_syncs()
    for bid, listed in reader.listed.items():
        threads = [
            {"op": what, "at": at, "bytes": 1, "threads": "all"}
            for at, what in sorted(set(reader.threads.get(bid, [])))
        ]
        reader.shape.listed[bid] = sorted(
            [*threads, *listed], key=lambda a: (a["at"], str(a.get("agent", "")))
        )
    return TtgirRead(
        name=name,
        shape=reader.shape,
        offsets=reader.offsets,
        shared_bytes=shared,
        barrier_ops=reader.barrier_ops,
        lowered_barriers=reader.lowered_barriers,
        async_ops=reader.async_ops,
        exact_async=reader.exact_async,
        approximated=reader.approximated,
        unsplit=reader.unsplit,
    )
