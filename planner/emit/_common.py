"""What the emitters share: identifiers from buffer ids, and the plan in request order.

Buffer ids (and the request's name) are free-form text: compilers use ``A_s``, ``T3.smem``,
``buf[2]``, ``%alloc_4``. They reach emitted code in exactly two forms:

- an identifier (``identifiers``): ASCII letters, digits and single underscores, starting
  with a letter, never a reserved word of C++, C or CUDA (``_RESERVED``), unique in the
  output; derived deterministically from the id, so the same request gives the same text;
- a quoted label inside a ``//`` comment (``quoted``): the id as a JSON string with every
  non-ASCII or control character escaped, so it can end no line and open no code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from planner.core.dtypes import DTYPES, DType
from planner.core.models import Plan, PlanRequest

__all__ = [
    "Outline",
    "Placed",
    "SyncCall",
    "barrier_notes",
    "control_outline",
    "identifiers",
    "max_alignment",
    "outline_lines",
    "placed",
    "quoted",
    "status_warning",
    "sync_calls",
    "sync_notes",
]

# Words a buffer id must not become, in every form the compilers downstream read: C++23
# keywords with the alternative tokens (``and``, ``bitor``, ...) and the words special at the
# start of a line (``import``, ``module``); C keywords the host compilers take as extensions;
# CUDA's built-in variables and vector types; the standard types, functions and macros a
# kernel's code uses after the snippet; and the runtime names the snippet itself uses. A
# leading underscore and a double underscore (reserved to the implementation) never occur in
# a name made here, so no word of those forms (``__shared__``, ``_Bool``) needs listing.
_CPP = """alignas alignof and and_eq asm atomic_cancel atomic_commit atomic_noexcept auto
    bitand bitor bool break case catch char char8_t char16_t char32_t class co_await co_return
    co_yield compl concept const const_cast consteval constexpr constinit continue
    contract_assert decltype default delete do double dynamic_cast else enum explicit export
    extern false float for friend goto if import inline int long module mutable namespace new
    noexcept not not_eq nullptr operator or or_eq private protected public reflexpr register
    reinterpret_cast requires return short signed sizeof static static_assert static_cast
    struct switch synchronized template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    restrict typeof typeof_unqual"""
_CUDA = """threadIdx blockIdx blockDim gridDim warpSize dim3 half half2 nv_bfloat16 nv_bfloat162
    cudaFuncSetAttribute cudaFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttribute
    cudaError_t cudaSuccess cudaStream_t cudaMalloc cudaFree cudaMemcpy cudaMemset
    cudaDeviceSynchronize cudaGetLastError cudaGetErrorString cudaLaunchKernel"""
_SCALARS = "char uchar short ushort int uint long ulong longlong ulonglong float double"
_VECTORS = [f"{t}{k}" for t in _SCALARS.split() for k in range(1, 5)]  # int4, float2, ...
_STD = """std main size_t ptrdiff_t nullptr_t max_align_t int8_t int16_t int32_t int64_t
    uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t intmax_t uintmax_t NULL EOF errno
    assert offsetof stdin stdout stderr INFINITY NAN printf malloc free memcpy memset"""
_RESERVED = frozenset([*_CPP.split(), *_CUDA.split(), *_STD.split(), *_VECTORS])
_BYTE = DTYPES["u8"]


@dataclass(frozen=True)
class Placed:
    """One buffer with its placement, in request order."""

    id: str
    name: str  # a C identifier, unique in the plan
    offset: int  # bytes from the arena base (or the workspace base, when global)
    size: int  # bytes
    start: int  # program point
    end: int  # program point, half-open
    memory: str  # "shared" or "global"
    dtype: DType
    ranges: tuple[tuple[int, int], ...] = ()  # live ranges when several, else empty


def identifiers(ids: list[str], taken: set[str]) -> list[str]:
    """One C identifier per id: characters other than ASCII letters and digits become ``_``
    (a run of them one ``_``: a double underscore is reserved in C++), a leading digit or
    underscore gets a ``b`` in front (a leading underscore is reserved too), reserved words
    (``_RESERVED``) get a ``_`` after them; clashes with each other or with ``taken`` get a
    number. Unique, valid C++ and MLIR names whatever the ids hold, and the same names for the
    same ids."""
    used = set(taken)
    names: list[str] = []
    for ident in ids:
        name = re.sub(r"[^A-Za-z0-9]+", "_", ident, flags=re.ASCII) or "b"
        if name[0].isdigit() or name[0] == "_":
            name = "b" + name
        if name in _RESERVED:
            name += "_"  # no reserved word ends in "_", so this makes no "__"
        base, k = name.rstrip("_") + "_", 2  # "b_" numbers as "b_2", never "b__2"
        while name in used or name in _RESERVED:
            name = f"{base}{k}"
            k += 1
        used.add(name)
        names.append(name)
    return names


def quoted(text: str) -> str:
    """``text`` as a JSON string of printable ASCII: safe inside a ``//`` comment (no line
    break, no trailing backslash to splice the next line)."""
    return json.dumps(text, ensure_ascii=True)


def placed(request: PlanRequest, plan: Plan, taken: set[str]) -> list[Placed]:
    """Every buffer with its placement, in request order."""
    where = {p.id: p for p in plan.placements}
    names = identifiers([b.id for b in request.buffers], taken)
    return [
        Placed(
            id=b.id,
            name=name,
            offset=where[b.id].offset,
            size=b.size,
            start=b.start,
            end=b.end,
            memory=where[b.id].memory,
            dtype=DTYPES[b.dtype] if b.dtype is not None else _BYTE,
            ranges=tuple(b.lifetimes) if len(b.lifetimes) > 1 else (),
        )
        for b, name in zip(request.buffers, names, strict=True)
    ]


def barrier_notes(request: PlanRequest, plan: Plan) -> list[tuple[int, str]]:
    """The points that need a barrier, each with why: existing, inserted, or the caller's."""
    existing = set(plan.barriers.existing)
    inserted = set(plan.barriers.inserted)
    notes: list[tuple[int, str]] = []
    for p in sorted(set(plan.barriers.required) | inserted):
        if p in inserted:
            why = "inserted by the plan: add it"
        elif p in existing:
            why = "existing: the plan relies on it"
        else:
            why = "the caller must synchronize here (sync 'none')"
        notes.append((p, why))
    return notes


_CLUSTER = "barrier.cluster.arrive; barrier.cluster.wait"
# The wait_group a plan's wait is, by its kind: a bulk one waits for the stores' reads only.
_WAIT_PTX = {
    "cp.async": "cp.async.wait_group",
    "bulk": "cp.async.bulk.wait_group.read",
    "wgmma": "wgmma.wait_group.sync.aligned",
}
_WAIT_OP = {"cp.async": "wait_group", "bulk": "bulk_wait_group_read", "wgmma": "wgmma_wait_group"}


def sync_notes(request: PlanRequest, plan: Plan, buffers: list[Placed]) -> list[tuple[int, str]]:
    """(point, text) of the synchronisation besides block barriers, in point order: each
    mbarrier buffer's init, the request's syncs, and the waits, fences and invals the plan adds
    or requires; PTX spelling, buffers by their identifiers, other names JSON-quoted."""
    names = {b.id: b.name for b in buffers}

    def mbar(ident: str | None) -> str:
        return names.get(ident or "", quoted(ident or ""))

    notes: list[tuple[int, str]] = []
    for b in request.buffers:
        if b.kind == "mbarrier":
            notes.append((b.start, f"mbarrier.init {names.get(b.id, quoted(b.id))}"))
    for sync in request.syncs:
        if sync.kind == "wait_group":
            op = {
                "cp.async": "cp.async.wait_group",
                "bulk": "cp.async.bulk.wait_group.read"
                if sync.read
                else "cp.async.bulk.wait_group",
                "wgmma": "wgmma.wait_group.sync.aligned",
            }[sync.group or "cp.async"]
            text = f"{op} {sync.pending}"
        elif sync.kind == "named_barrier":
            text = f"bar.sync {sync.id}, <threads>"
        elif sync.kind == "fence_proxy_async":
            text = "fence.proxy.async.shared::cta"
        elif sync.kind == "cluster_barrier":
            text = _CLUSTER
        else:
            op = {
                "mbarrier_wait": "mbarrier.try_wait (until the phase completes)",
                "expect_tx": "mbarrier.arrive.expect_tx",
                "mbarrier_arrive": "mbarrier.arrive",
                "mbarrier_inval": "mbarrier.inval",
            }[sync.kind]
            text = f"{op} {mbar(sync.mbarrier)}"
        notes.append((sync.at, text))
    words = {"inserted": "inserted by the plan: add it", "required": "required: add it"}
    for wait in plan.waits:
        by = "" if wait.partition is None else f" (partition {quoted(wait.partition)})"
        notes.append((wait.at, f"{_WAIT_PTX[wait.kind]} 0  // {words[wait.origin]}{by}"))
    for fence in plan.fences:
        by = "" if fence.partition is None else f" (partition {quoted(fence.partition)})"
        notes.append((fence.at, f"fence.proxy.async.shared::cta  // {words[fence.origin]}{by}"))
    for nb in plan.named_barriers:
        who = ", ".join(quoted(p) for p in nb.partitions)
        notes.append((nb.at, f"bar.sync {nb.id}, {nb.threads}  // {words[nb.origin]} ({who})"))
    for inval in plan.invals:
        if inval.origin != "existing":
            by = "" if inval.partition is None else f" (partition {quoted(inval.partition)})"
            notes.append(
                (inval.at, f"mbarrier.inval {mbar(inval.mbarrier)}  // {words[inval.origin]}{by}")
            )
    listed = plan.cluster_barriers
    if listed is not None:
        text = _CLUSTER
        for p in listed.inserted:
            notes.append((p, f"{text}  // {words['inserted']}"))
        if request.options.sync == "none":
            for p in sorted(set(listed.required) - set(listed.existing)):
                notes.append((p, f"{text}  // {words['required']}"))
    return sorted(notes, key=lambda n: n[0])


# The synchronisation operations that ``sync_calls`` lists beyond the proxy fence and the
# cluster barrier: a plan with none of them emits no helper or call table for them.
OWN_OPS = frozenset(
    {
        "mbarrier_init",
        "mbarrier_inval",
        "mbarrier_arrive",
        "expect_tx",
        "mbarrier_wait",
        "named_barrier",
        "wait_group",
        "bulk_wait_group",
        "bulk_wait_group_read",
        "wgmma_wait_group",
    }
)


@dataclass(frozen=True)
class SyncCall:
    """One synchronisation operation the plan relies on, at its program point."""

    at: int
    op: str  # an OWN_OPS member, "fence_proxy_async" or "cluster_barrier"
    mbarrier: str = ""  # mbarrier ops: the buffer's identifier, else the name JSON-quoted
    own: bool = False  # the mbarrier is a buffer of the plan (a pointer in the snippet)
    count: int = 0  # mbarrier_init: the arrivals of one phase
    pending: int = 0  # wait_group kinds: the groups that may stay in flight
    barrier_id: int = 0  # named_barrier: the barrier id
    threads: int | None = None  # named_barrier: the threads taking part, None: the block's
    note: str = ""  # who runs it and why (partition, inserted or required), or empty


_WORDS = {"inserted": "inserted by the plan: add it", "required": "required: add it"}


def sync_calls(request: PlanRequest, plan: Plan, buffers: list[Placed]) -> list[SyncCall]:
    """Every synchronisation operation the plan relies on besides block barriers, in point
    order (stable): each mbarrier buffer's init at its start, the request's syncs, and the
    waits, fences, invals and cluster barriers the plan inserts or requires."""
    names = {b.id: b.name for b in buffers}
    calls = [*_init_calls(request, names), *_request_calls(request, names)]
    calls += _plan_calls(request, plan, names)
    return sorted(calls, key=lambda c: c.at)


def _init_calls(request: PlanRequest, names: dict[str, str]) -> list[SyncCall]:
    """Each mbarrier buffer's init at its start, for the arrivals at its first arrive point."""
    calls: list[SyncCall] = []
    for b in request.buffers:
        if b.kind == "mbarrier":
            arrivals = [
                s.at
                for s in request.syncs
                if s.mbarrier == b.id and s.kind in ("mbarrier_arrive", "expect_tx")
            ]
            first = min(arrivals, default=None)
            count = max(1, sum(1 for a in arrivals if a == first))
            calls.append(SyncCall(b.start, "mbarrier_init", names[b.id], True, count))
    return calls


def _request_calls(request: PlanRequest, names: dict[str, str]) -> list[SyncCall]:
    """The request's own syncs, in request order."""
    spans = {p.id: p.threads[1] - p.threads[0] for p in request.partitions}
    calls: list[SyncCall] = []
    for s in request.syncs:
        by = f"partition {quoted(s.partition)}" if s.partition is not None else ""
        if s.kind == "wait_group":
            group = s.group or "cp.async"
            op = {"cp.async": "wait_group", "bulk": "bulk_wait_group", "wgmma": "wgmma_wait_group"}
            kind = op[group] + ("_read" if group == "bulk" and s.read else "")
            calls.append(SyncCall(s.at, kind, pending=s.pending, note=by))
        elif s.kind == "named_barrier":
            taking = s.partitions or []
            threads = sum(spans.get(p, 0) for p in taking) if taking else None
            who = ", ".join(quoted(p) for p in taking)
            note = f"partitions {who}" if taking else ""
            calls.append(
                SyncCall(s.at, "named_barrier", barrier_id=s.id or 0, threads=threads, note=note)
            )
        elif s.kind in ("fence_proxy_async", "cluster_barrier"):
            calls.append(SyncCall(s.at, s.kind, note=by))
        else:
            ident = s.mbarrier or ""
            own = ident in names
            calls.append(SyncCall(s.at, s.kind, names.get(ident, quoted(ident)), own, note=by))
    return calls


def _plan_calls(request: PlanRequest, plan: Plan, names: dict[str, str]) -> list[SyncCall]:
    """The waits, fences, named barriers, invals and cluster barriers the plan inserts or
    requires, kind by kind."""
    calls: list[SyncCall] = []
    for wait in plan.waits:
        by = "" if wait.partition is None else f", partition {quoted(wait.partition)}"
        calls.append(SyncCall(wait.at, _WAIT_OP[wait.kind], note=_WORDS[wait.origin] + by))
    for fence in plan.fences:
        by = "" if fence.partition is None else f", partition {quoted(fence.partition)}"
        calls.append(SyncCall(fence.at, "fence_proxy_async", note=_WORDS[fence.origin] + by))
    for nb in plan.named_barriers:
        who = ", ".join(quoted(p) for p in nb.partitions)
        calls.append(
            SyncCall(
                nb.at,
                "named_barrier",
                barrier_id=nb.id,
                threads=nb.threads,
                note=f"partitions {who}, {_WORDS[nb.origin]}",
            )
        )
    for inval in plan.invals:
        if inval.origin != "existing":
            ident = inval.mbarrier
            own = ident in names
            mbar = names.get(ident, quoted(ident))
            by = "" if inval.partition is None else f", partition {quoted(inval.partition)}"
            note = _WORDS[inval.origin] + by
            calls.append(SyncCall(inval.at, "mbarrier_inval", mbar, own, note=note))
    listed = plan.cluster_barriers
    if listed is not None:
        for p in listed.inserted:
            calls.append(SyncCall(p, "cluster_barrier", note=_WORDS["inserted"]))
        if request.options.sync == "none":
            for p in sorted(set(listed.required) - set(listed.existing)):
                calls.append(SyncCall(p, "cluster_barrier", note=_WORDS["required"]))
    return calls


def status_warning(plan: Plan) -> str | None:
    """A warning line for a plan that does not fit, else None."""
    if plan.status in ("optimal", "feasible"):
        return None
    return (
        f"WARNING: status {plan.status}: this plan does not fit the capacity of "
        f"{plan.capacity} bytes"
    )


def max_alignment(request: PlanRequest, plan: Plan | None = None) -> int:
    """The arena base alignment (bytes): the plan's ``launch.base_alignment`` where it states
    one, else the largest alignment in the request."""
    if plan is not None and plan.launch.base_alignment is not None:
        return plan.launch.base_alignment
    return request.largest_alignment


@dataclass(frozen=True)
class Outline:
    """One line of a program's control-flow outline, in program order."""

    depth: int  # loops and arms around it
    kind: str  # "loop", "end-loop", "arm", "end-branch" or "barrier"
    point: int  # program point: where the region starts or ends, or the barrier's
    text: str  # what it is, in words
    last: bool = False  # an arm: the branch's last


def control_outline(request: PlanRequest, plan: Plan) -> list[Outline]:
    """The loops and branch arms of ``request`` with the barriers of ``barrier_notes`` inside
    them, in program order. A barrier inside a loop runs on every iteration; one with no access
    of the loop's body between it and the loop's start (or end) is at the back edge: it orders
    one iteration's last accesses before the next one's first."""
    # (point, phase, order, line): at one point, regions close (innermost first), the next
    # arm of a branch begins, regions open (outermost first), then the barrier runs.
    events: list[tuple[int, int, tuple[int, int], Outline]] = []
    for i, loop in enumerate(request.loops):
        text = f"loops.{i}: points [{loop.start}, {loop.end}) repeat, {loop.count_text} trips"
        events.append((loop.start, 2, (-loop.end, 0), Outline(0, "loop", loop.start, text)))
        closing = Outline(0, "end-loop", loop.end, f"end of loops.{i}")
        events.append((loop.end, 0, (-loop.start, 1), closing))
    for j, branch in enumerate(request.branches):
        start, end = branch.arms[0][0], branch.arms[-1][1]
        for k, (s, e) in enumerate(branch.arms):
            last = k == len(branch.arms) - 1
            line = Outline(0, "arm", s, f"branches.{j} arm {k}: points [{s}, {e})", last)
            events.append((s, 2 if k == 0 else 1, (-end, 1) if k == 0 else (0, 0), line))
        events.append((end, 0, (-start, 0), Outline(0, "end-branch", end, f"end of branches.{j}")))
    accessed = _access_points(request)
    for point, why in barrier_notes(request, plan):
        notes = [why]
        for i, loop in enumerate(request.loops):
            if loop.start <= point < loop.end:
                body = [a for a in accessed if loop.start <= a < loop.end]
                edge = not any(a < point for a in body) or not any(a >= point for a in body)
                edge = edge and loop.repeats
                notes.append(
                    f"runs every iteration of loops.{i}" + ("; at the back edge" if edge else "")
                )
        events.append((point, 3, (0, 0), Outline(0, "barrier", point, "; ".join(notes))))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    out: list[Outline] = []
    depth = 0
    for _, phase, _, line in events:
        if phase == 0:
            depth -= 1
        out.append(
            Outline(depth - 1 if phase == 1 else depth, line.kind, line.point, line.text, line.last)
        )
        if phase == 2:
            depth += 1
    return out


def _access_points(request: PlanRequest) -> list[int]:
    """Points with an access: the patterns', or each range's first and last point."""
    points: set[int] = set()
    for b in request.buffers:
        if b.accesses:
            points |= {a.at for a in b.accesses}
        else:
            for s, e in b.lifetimes:
                points |= {s, e - 1}
    return sorted(points)


def outline_lines(
    request: PlanRequest, plan: Plan, barrier: str, syntax: dict[str, str]
) -> list[str]:
    """The control-flow outline as ``//`` comment lines: ``barrier`` is the barrier statement,
    ``syntax`` the opening of a loop (``"loop"``), of a branch's first, middle and last arms
    (``"if"``, ``"elif"``, ``"else"``) and the closing brace (``"end"``)."""
    lines = [
        "// Control flow and barriers by program point (each barrier runs before the accesses "
        "at its point):"
    ]
    for line in control_outline(request, plan):
        pad = "//   " + "  " * line.depth
        if line.kind == "loop":
            lines.append(f"{pad}{syntax['loop']} {{  // {line.text}")
        elif line.kind == "arm":
            first = line.text.split(" arm ", 1)[1].startswith("0:")
            opening = "if" if first else "else" if line.last else "elif"
            lines.append(f"{pad}{syntax[opening]} {{  // {line.text}")
        elif line.kind in ("end-loop", "end-branch"):
            lines.append(f"{pad}{syntax['end']}  // {line.text}")
        else:
            lines.append(f"{pad}{barrier}  // point {line.point}: {line.text}")
    if plan.barriers.executions is not None:
        unknown = any(loop.most is None for loop in request.loops)
        lines.append(
            f"// Barriers: {plan.barriers.static} in the code, {plan.barriers.executions} "
            f"executions per block{' (unbounded trips count 1000)' if unknown else ''}."
        )
    return lines
