"""``planner triton``: Triton's own shared-memory plan, checked and compared (docs/bridges.md,
Triton).

Triton's plan comes one of two ways. From inside Triton's compile (``compile_and_check``, or
``capturing()`` around ``triton.compile`` and then ``check_captured``): the module its NVIDIA
backend has after its allocation and after its barrier passes, on the CFG form it runs them
on, put back on the structured form (``planner.bridges.ttgir_cfg``); no pass runs twice. From
a kernel Triton compiled or its TTGIR and a target (``check_compiled``, ``check_ttgir``): the
bridge runs Triton's own passes again as the backend does before lowering
(``allocate_shared_memory_nv``, then its barrier analysis, ``membar``) but on the structured
form (without ``scf_to_cf``), and checks that the offsets and the total it gets there are the
ones Triton's real pipeline gets on its CFG form. Either way it then reads the kernel
(``planner.bridges.ttgir``) twice:

- after ``membar``: Triton's plan (its ``allocation.offset``s, its barriers) against the
  request, judged by the static validator and the emulator;
- before ``membar``: the same request with only the barriers Triton's passes did not add,
  planned by this planner (sync "insert"), for the bytes and barriers beside Triton's.

A kernel the reader cannot model exactly is reported with the reason, never guessed.
Needs the ``triton`` extra.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from planner.bridges._plans import Verdict, foreign_plan, judge, need
from planner.bridges._program import Unsupported
from planner.bridges.triton_capture import Captured, capturing
from planner.bridges.ttgir import TtgirRead, read_ttgir
from planner.bridges.ttgir_cfg import Unaligned, restructure
from planner.core.errors import RequestError
from planner.core.models import Plan, PlanRequest
from planner.core.targets import TARGETS
from planner.pipeline import plan as plan_request

__all__ = [
    "Allocated",
    "Captured",
    "TritonReport",
    "allocate",
    "allocated_ttgir",
    "capturing",
    "check_captured",
    "check_compiled",
    "check_ttgir",
    "compile_and_check",
]

_FEATURE = "planner triton"


@dataclass
class TritonReport:
    """One kernel: Triton's plan judged, and this planner's plan of the same request."""

    name: str
    target: str
    modeled: bool
    reason: str | None = None  # why the kernel is not modelled
    buffers: int = 0  # local_alloc buffers and scratch
    triton_bytes: int = 0  # ttg.shared
    triton_barriers: int = 0  # barrier operations after membar
    triton_verdict: Verdict | None = None
    ours_bytes: int | None = None  # our plan of the same request, Triton's barriers kept
    ours_inserted: int | None = None  # barriers it adds to Triton's
    lower_bound: int | None = None
    alone_bytes: int | None = None  # our plan without Triton's barrier pass at all
    alone_barriers: int | None = None  # barriers that plan needs for its reuse
    seconds: float = 0.0  # the bridge's own time: passes, reading, planning, checking
    request: PlanRequest | None = None  # the kernel with Triton's barriers (sync "existing")
    triton_plan: Plan | None = None  # Triton's offsets as a plan of ``request``
    plan: Plan | None = None  # ours, of ``request`` under sync "insert"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "modeled": self.modeled,
            "reason": self.reason,
            "buffers": self.buffers,
            "triton_bytes": self.triton_bytes,
            "triton_barriers": self.triton_barriers,
            "triton_verdict": None
            if self.triton_verdict is None
            else self.triton_verdict.as_dict(),
            "ours_bytes": self.ours_bytes,
            "ours_inserted": self.ours_inserted,
            "lower_bound": self.lower_bound,
            "alone_bytes": self.alone_bytes,
            "alone_barriers": self.alone_barriers,
            "notes": self.notes,
        }


def _capability(target: str) -> int:
    found = re.fullmatch(r"(?:sm_|cuda:)?(\d+)a?", target.strip())
    if found is None:
        raise RequestError.field(
            ("target",),
            f"target {target!r} is not a CUDA capability such as sm_80",
            "bad_target",
            target,
        )
    return int(found.group(1))


def _ptx_version(capability: int) -> int:
    from triton.backends.nvidia.compiler import get_ptxas, ptx_get_version

    return int(ptx_get_version(get_ptxas(capability).version))


_OFFSETS = re.compile(r"allocation\.offset\s*=\s*(\d+)")


@dataclass(frozen=True)
class Allocated:
    """A TTGIR module through Triton's own passes, parsed once: the structured form after
    allocation (``before``) and after the barrier passes (``after``), and the offsets Triton's
    allocation gives on its CFG form (``cfg_offsets``, for the comparison)."""

    before: str
    after: str
    cfg_offsets: list[str]


def _parse(ttgir: str, ctx: Any) -> Any:
    from triton._C.libtriton import ir

    with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
        f.write(ttgir)
        path = f.name
    try:
        module = ir.parse_mlir_module(path, ctx)
    except Exception as exc:
        raise RequestError.field(
            ("ttgir",), f"not a valid TTGIR module: {exc}", "bad_ttgir", None
        ) from None
    finally:
        os.unlink(path)
    module.context = ctx
    return module


def _run(pm: Any, module: Any) -> None:
    """Triton's passes on ``module``; a module they refuse (no ``ttg.num-warps``, say) is a
    request error naming the first error line they print, not a crash. Their messages go to
    the process's standard error, so it is held in a file while they run."""
    with tempfile.TemporaryFile("w+b") as held:
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        try:
            pm.run(module, "planner")
        except RuntimeError:
            failed = True
        else:
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        if not failed:
            return
        held.seek(0)
        lines = held.read().decode(errors="replace").splitlines()
    first = next((ln for ln in lines if "error:" in ln), "the pass pipeline failed")
    why = first.split("error:", 1)[-1].strip()
    raise RequestError.field(
        ("ttgir",), f"Triton's passes refused the module: {why}", "bad_ttgir", None
    )


def _allocation(pm: Any, capability: int, ptx: int, *, cfg: bool) -> None:
    from triton._C.libtriton import nvidia, passes

    passes.ttgpuir.add_combine_tensor_select_and_if(pm)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)
    if cfg:
        passes.convert.add_scf_to_cf(pm)
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability, ptx)
    nvidia.passes.ttnvgpuir.add_allocate_tensor_memory(pm)


def _barrier_passes(pm: Any, capability: int, ptx: int) -> None:
    from triton._C.libtriton import nvidia

    nvidia.passes.ttnvgpuir.add_proxy_fence_insertion(pm, capability)
    nvidia.passes.ttnvgpuir.add_tmem_barrier_insertion(pm)
    nvidia.passes.ttgpuir.add_membar(pm, capability, ptx)


_CONTEXT_USES = 64  # modules one MLIR context parses before a fresh one (it keeps their types)
_CONTEXTS = threading.local()


def _context() -> Any:
    """An MLIR context with Triton's dialects, one per thread, renewed every
    ``_CONTEXT_USES`` calls."""
    from triton._C.libtriton import ir, nvidia

    held = getattr(_CONTEXTS, "held", None)
    if held is None or held[1] >= _CONTEXT_USES:
        ctx = ir.context()
        ir.load_dialects(ctx)
        nvidia.load_dialects(ctx)
        held = _CONTEXTS.held = [ctx, 0]
    held[1] += 1
    return held[0]


def allocate(ttgir: str, capability: int) -> Allocated:
    """Triton's allocation and barrier passes, as its NVIDIA backend runs them before lowering
    to LLVM, each once: on the structured form (printed before and after the barrier passes),
    and the allocation alone on the CFG form (``scf_to_cf`` first, as the backend does)."""
    need("triton", _FEATURE)
    from triton._C.libtriton import ir

    ptx = _ptx_version(capability)
    ctx = _context()
    module = _parse(ttgir, ctx)
    pm = ir.pass_manager(ctx)
    _allocation(pm, capability, ptx, cfg=False)
    _run(pm, module)
    before = str(module.str_nodebug())
    if _OFFSETS.search(before) is None and "tmem" not in before:
        # No shared (or tensor) memory allocated: the barrier passes order accesses to it
        # and find none.
        return Allocated(before, before, [])
    pm = ir.pass_manager(ctx)
    _barrier_passes(pm, capability, ptx)
    _run(pm, module)
    after = str(module.str_nodebug())
    if "scf." not in before:  # no structured control flow: scf_to_cf changes nothing
        return Allocated(before, after, _OFFSETS.findall(before))
    module = _parse(ttgir, ctx)
    pm = ir.pass_manager(ctx)
    _allocation(pm, capability, ptx, cfg=True)
    _run(pm, module)
    return Allocated(before, after, _OFFSETS.findall(str(module.str_nodebug())))


def allocated_ttgir(ttgir: str, capability: int, *, membar: bool, cfg: bool = False) -> str:
    """The TTGIR after Triton's own allocation (and its barrier passes when ``membar``), as
    Triton's NVIDIA backend runs them; ``cfg``: with ``scf_to_cf`` first, as the backend
    does, for comparison."""
    need("triton", _FEATURE)
    from triton._C.libtriton import ir

    ptx = _ptx_version(capability)
    ctx = _context()
    module = _parse(ttgir, ctx)
    pm = ir.pass_manager(ctx)
    _allocation(pm, capability, ptx, cfg=cfg)
    if membar:
        _barrier_passes(pm, capability, ptx)
    _run(pm, module)
    return str(module.str_nodebug())


def check_compiled(
    compiled: Any, *, time_limit: float = 5.0, emulation: bool = True
) -> TritonReport:
    """Check the shared-memory plan of a kernel ``triton.compile`` returned."""
    need("triton", _FEATURE)
    arch = compiled.metadata.target.arch
    report = check_ttgir(
        compiled.asm["ttgir"], f"sm_{arch}", time_limit=time_limit, emulation=emulation
    )
    if report.modeled and report.triton_bytes != compiled.metadata.shared:
        report.notes.append(
            f"the compiled kernel has {compiled.metadata.shared} bytes of shared memory, the "
            f"passes here give {report.triton_bytes}"
        )
    return report


def check_ttgir(
    ttgir: str, target: str, *, time_limit: float = 5.0, emulation: bool = True
) -> TritonReport:
    """Check the shared-memory plan Triton makes for a TTGIR module (as Triton prints it
    before lowering to LLVM) on a CUDA target such as ``sm_80``: Triton's allocation and
    barrier passes run here on it."""
    began = time.perf_counter()
    capability = _capability(target)
    report = _check(allocate(ttgir, capability), target, time_limit, emulation)
    report.seconds = time.perf_counter() - began
    return report


def check_captured(
    captured: Captured, *, time_limit: float = 5.0, emulation: bool = True
) -> TritonReport:
    """Check the shared-memory plan Triton made inside its own compile (``capturing()``):
    its allocation and barriers, made on the CFG form, put back on the structured form it
    lowered. Where they cannot be put back, Triton's passes run here on the structured form
    as ``check_ttgir`` runs them, and the notes say why."""
    began = time.perf_counter()
    target = f"sm_{captured.capability}"
    try:
        after, before = restructure(captured.structured, captured.synchronized, captured.allocated)
    except Unaligned as exc:
        report = _check(
            allocate(captured.structured, captured.capability), target, time_limit, emulation
        )
        report.notes.append(f"Triton's passes run again on the structured form: {exc}")
    else:
        passes = Allocated(before, after, _OFFSETS.findall(after))
        report = _check(passes, target, time_limit, emulation)
    report.seconds = captured.seconds + time.perf_counter() - began
    return report


def compile_and_check(
    src: Any,
    target: str = "sm_80",
    options: dict[str, Any] | None = None,
    *,
    time_limit: float = 5.0,
    emulation: bool = True,
) -> tuple[Any, TritonReport]:
    """``triton.compile(src, target=GPUTarget("cuda", <capability>, 32), options=options)``
    and the check of the shared-memory plan it made, taken from inside that compile
    (``check_captured``). A kernel Triton's cache already holds is not compiled again, so
    its passes run here instead (``check_compiled``), and the notes say so."""
    need("triton", _FEATURE)
    import triton
    from triton.backends.compiler import GPUTarget

    capability = _capability(target)
    with capturing() as captured:
        compiled = triton.compile(src, target=GPUTarget("cuda", capability, 32), options=options)
    if not captured:
        report = check_compiled(compiled, time_limit=time_limit, emulation=emulation)
        report.notes.append(
            "Triton's cache held the compiled kernel (nothing to capture): its passes run here"
        )
        return compiled, report
    report = check_captured(captured[-1], time_limit=time_limit, emulation=emulation)
    if report.modeled and report.triton_bytes != compiled.metadata.shared:
        report.notes.append(
            f"the compiled kernel has {compiled.metadata.shared} bytes of shared memory, the "
            f"captured module {report.triton_bytes}"
        )
    return compiled, report


def _check(passes: Allocated, target: str, time_limit: float, emulation: bool) -> TritonReport:
    """Triton's plan of the allocated module, judged, and ours of the same request."""
    capability = _capability(target)
    profile = f"sm_{capability}" if f"sm_{capability}" in TARGETS else None
    name = re.search(r"tt\.func\s+(?:public\s+|private\s+)?@([\w$.]+)", passes.after)
    report = TritonReport(name=name.group(1) if name else "kernel", target=target, modeled=False)
    try:
        if passes.cfg_offsets != _OFFSETS.findall(passes.after):
            raise Unsupported(
                "Triton's allocation differs between its CFG form and the structured form read here"
            )
        after = read_ttgir(passes.after)
        # This planner adds barriers but no proxy fence where none stands before a barrier of
        # the request: without Triton's barriers, its fences would order nothing, so the
        # asynchronous accesses are taken as Triton's allocation takes them.
        before = read_ttgir(passes.before, exact=not after.exact_async)
    except Unsupported as exc:
        report.reason = str(exc)
        return report
    report.modeled = True
    report.buffers = len(after.shape.buffers)
    report.triton_bytes = after.shared_bytes
    report.triton_barriers = after.barrier_ops
    report.notes += _read_notes(after)
    asked = _request(after, profile, time_limit)
    request = PlanRequest.model_validate(
        {**asked, "options": {"sync": "existing", "time_limit": time_limit}}
    )
    report.request = request
    triton_plan = foreign_plan(request, after.offsets, "triton")
    report.triton_plan = triton_plan
    if triton_plan.arena_bytes > after.shared_bytes:
        report.notes.append(
            f"Triton's offsets reach {triton_plan.arena_bytes} bytes, past "
            f"ttg.shared {after.shared_bytes}"
        )
    report.triton_verdict = judge(request, triton_plan, emulation=emulation)
    ours = plan_request(asked)
    report.plan = ours
    report.ours_bytes = ours.arena_bytes
    report.ours_inserted = len(ours.barriers.inserted)
    report.lower_bound = ours.lower_bound
    if after.exact_async:
        report.notes.append(
            "without Triton's barriers the asynchronous accesses are taken as the threads' "
            "until the wait that drains them"
        )
    alone = plan_request(_request(before, profile, time_limit))
    report.alone_bytes = alone.arena_bytes
    report.alone_barriers = before.barrier_ops + len(alone.barriers.inserted)
    return report


def _read_notes(after: TtgirRead) -> list[str]:
    """What the reading of the allocated module adds or approximates: Triton's lowered
    barriers, the asynchronous accesses modeled exactly, the mbarriers kept as one buffer and
    the operations taken as the threads'."""
    notes: list[str] = []
    if after.lowered_barriers:
        notes.append(
            f"{after.lowered_barriers} barriers Triton's lowering adds (before each scalar "
            "atomic, after each TMA descriptor's acquire fence)"
        )
    if after.exact_async:
        notes.append(
            "asynchronous accesses with the wait that covers them: "
            + ", ".join(f"{n} {agent}" for agent, n in sorted(after.exact_async.items()))
        )
    for reason in after.unsplit:
        notes.append(
            f"{reason}: its mbarriers are one buffer, and the TMA loads that arrive on it are "
            "approximated (which mbarrier each one arrives on is not known statically)"
        )
    if after.approximated:
        notes.append(
            "asynchronous operations taken as the threads' until the wait that drains them "
            "(TMA loads: until the buffer's ttg.local_dealloc), as Triton's allocation "
            "assumes, since the request cannot state their completion (a wait in a later "
            "iteration or outside their region; an mbarrier phase): "
            + ", ".join(f"{n} {agent}" for agent, n in sorted(after.approximated.items()))
        )
    return notes


def _request(read: TtgirRead, target: str | None, time_limit: float) -> dict[str, Any]:
    """The kernel's request as the reader states it (sync "insert")."""
    return read.shape.request(target=target, time_limit=time_limit)
