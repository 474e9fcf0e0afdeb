"""A symbolic plan as code: CUDA integer expressions over the kernel's parameters, and an MLIR
function of ``arith`` ops over ``index`` values (docs/design.md, Symbolic plans).

Parameters keep their names (they are identifiers by the request's rules); buffers are named
as in the other emitters (``planner.emit._common.identifiers``), their ids only in JSON-quoted
comments. Floor division is ``planner_fdiv`` in CUDA (C's ``/`` truncates) and
``arith.floordivsi`` in MLIR.
"""

from __future__ import annotations

from collections.abc import Callable

from planner.core.expr import Expr, read_plan_expr
from planner.core.models.symbolic import SymbolicPlan
from planner.emit._common import identifiers, quoted

__all__ = ["emit_symbolic_cuda", "emit_symbolic_mlir"]

_C_HELPERS = [
    "static __host__ __device__ __forceinline__ long long planner_max(long long a, long long b)"
    " { return a > b ? a : b; }",
    "static __host__ __device__ __forceinline__ long long planner_min(long long a, long long b)"
    " { return a < b ? a : b; }",
    "static __host__ __device__ __forceinline__ long long planner_fdiv(long long a, long long b)"
    " { long long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }",
]


def _names(plan: SymbolicPlan) -> tuple[dict[str, str], list[str]]:
    """Offset names (offset_<k>) to C identifiers, and the buffers' identifiers."""
    taken = {p.name for p in plan.params} | {"planner_max", "planner_min", "planner_fdiv"}
    buffers = identifiers([o.id for o in plan.offsets], taken)
    return {o.name: f"off_{b}" for o, b in zip(plan.offsets, buffers, strict=True)}, buffers


def _c(expr: Expr, var: Callable[[str], str]) -> str:
    op = expr.op
    if op == "int":
        return f"{expr.number}LL"
    if op == "var":
        return var(expr.name)
    args = [_c(a, var) for a in expr.args]
    if op == "neg":
        return f"(-{args[0]})"
    if op in ("min", "max"):
        text = args[0]
        for a in args[1:]:
            text = f"planner_{op}({text}, {a})"
        return text
    if op == "//":
        return f"planner_fdiv({args[0]}, {args[1]})"
    return f"({args[0]} {op} {args[1]})"


def emit_symbolic_cuda(plan: SymbolicPlan) -> str:
    """A host and device function computing every offset and the arena from the parameters."""
    offsets, buffers = _names(plan)
    index = {o.id: k for k, o in enumerate(plan.offsets)}

    def var(name: str) -> str:
        return offsets.get(name, name)

    fn = identifiers([plan.name], set())[0]
    params = ", ".join(f"long long {p.name}" for p in plan.params)
    ranges = ", ".join(f"{p.name} in [{p.min}, {p.max}]" for p in plan.params)
    lines = [
        f"// Shared-memory offsets of {quoted(plan.name)}, valid for every {ranges}.",
        "// Of two buffers that may not share bytes, one sits below the other at every point.",
        *_C_HELPERS,
        "",
        f"struct {fn}_smem {{",
        *(
            f"  long long {b};  // {quoted(o.id)}, bytes"
            for o, b in zip(plan.offsets, buffers, strict=True)
        ),
        "  long long arena_bytes;",
        "};",
        "",
        f"static __host__ __device__ inline {fn}_smem {fn}_offsets({params}) {{",
    ]
    for ident in plan.order:
        o = plan.offsets[index[ident]]
        lines.append(f"  const long long {offsets[o.name]} = {_c(read_plan_expr(o.offset), var)};")
    lines.append(f"  {fn}_smem s;")
    for o, b in zip(plan.offsets, buffers, strict=True):
        lines.append(f"  s.{b} = {offsets[o.name]};")
    lines.append(f"  s.arena_bytes = {_c(read_plan_expr(plan.arena), var)};")
    lines += ["  return s;", "}", ""]
    return "\n".join(lines)


class _Ssa:
    """MLIR ``arith`` ops over ``index`` values, one SSA value per node, constants shared."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.lines: list[str] = []
        self.constants: dict[int, str] = {}
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"%v{self.count}"

    def const(self, n: int) -> str:
        if n not in self.constants:
            name = f"%c{n}" if n >= 0 else f"%cm{-n}"
            self.lines.append(f"    {name} = arith.constant {n} : index")
            self.constants[n] = name
        return self.constants[n]

    def value(self, expr: Expr) -> str:
        op = expr.op
        if op == "int":
            return self.const(expr.number)
        if op == "var":
            return self.env[expr.name]
        args = [self.value(a) for a in expr.args]
        if op == "neg":
            args = [self.const(0), args[0]]
        if op in ("min", "max"):
            out = args[0]
            for a in args[1:]:
                name = self.fresh()
                self.lines.append(f"    {name} = arith.{op}si {out}, {a} : index")
                out = name
            return out
        kind = {"+": "addi", "-": "subi", "neg": "subi", "*": "muli", "//": "floordivsi"}[op]
        name = self.fresh()
        self.lines.append(f"    {name} = arith.{kind} {args[0]}, {args[1]} : index")
        return name


def emit_symbolic_mlir(plan: SymbolicPlan) -> str:
    """A ``func.func`` from the parameters (``index``) to every offset and the arena."""
    _, buffers = _names(plan)
    env = {p.name: f"%{p.name}" for p in plan.params}
    ssa = _Ssa(env)
    index = {o.id: k for k, o in enumerate(plan.offsets)}
    for ident in plan.order:
        o = plan.offsets[index[ident]]
        env[o.name] = ssa.value(read_plan_expr(o.offset))
    arena = ssa.value(read_plan_expr(plan.arena))
    results = [env[o.name] for o in plan.offsets] + [arena]
    fn = identifiers([plan.name], set())[0]
    params = ", ".join(f"%{p.name}: index" for p in plan.params)
    types = ", ".join(["index"] * len(results))
    ranges = ", ".join(f"{p.name} in [{p.min}, {p.max}]" for p in plan.params)
    labels = ", ".join(f"{b} = {quoted(o.id)}" for o, b in zip(plan.offsets, buffers, strict=True))
    return "\n".join(
        [
            f"// Shared-memory offsets of {quoted(plan.name)}, valid for every {ranges}.",
            f"// Results: the offsets of {labels}, then the arena bytes.",
            "module {",
            f"  func.func @{fn}_offsets({params}) -> ({types}) {{",
            *ssa.lines,
            f"    return {', '.join(results)} : {types}",
            "  }",
            "}",
            "",
        ]
    )
