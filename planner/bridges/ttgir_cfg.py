"""Puts Triton's own allocation and barriers, made on the CFG form inside its compile, back on
the structured TTGIR it lowered (docs/bridges.md, Triton).

Triton's NVIDIA backend lowers ``scf`` to ``cf`` before it allocates shared memory and places
barriers, and the reader (``planner.bridges.ttgir``) reads the structured form. The CFG form
keeps every operation of the structured one, in the same order, and adds only what the
lowering makes of the ``scf`` operations:

- ``scf.for``: a ``cf.br`` ending the block before it, a condition block (``arith.cmpi``,
  ``cf.cond_br``), the body, and for its ``scf.yield`` the step (``arith.addi``) and a
  ``cf.br`` back;
- ``scf.if``: a ``cf.cond_br``, each region, and a ``cf.br`` for each region's end (none for a
  region that only yields: the branch goes straight on);
- ``scf.while``: a ``cf.br``, the condition region ending in ``cf.cond_br`` (its
  ``scf.condition``), the body region ending in ``cf.br`` (its ``scf.yield``; none for a body
  that only yields, which the condition branches back over);

and block labels. The structured operations are matched to the CFG ones in that order; the
``allocation.*`` attributes of a matched operation are copied onto it, and each operation the
barrier passes inserted (``ttg.barrier``, ``gpu.barrier``, ``ttng.fence_async_shared``) goes
before the structured operation it precedes: before an ``scf`` operation for one ending the
block before it, at the end of a region for one before that region's ``cf.br``. An inserted
operation in a loop's condition block, or anything else that does not match, raises
``Unaligned``: the caller then runs Triton's passes on the structured form itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Unaligned", "restructure"]

_INSERTED = frozenset({"ttg.barrier", "gpu.barrier", "ttng.fence_async_shared"})
_RESULTS = re.compile(r"(?:%[\w.$#-]+(?::\d+)?(?:\s*,\s*%[\w.$#-]+(?::\d+)?)*\s*=\s*)")
_NAME = re.compile(r'"([\w.$]+)"|([\w.$]+)')
_ALLOCATION = re.compile(r"allocation\.(?:offset|size)\s*=")
_ALLOCATION_ENTRY = re.compile(r"allocation\.(?:offset|size)\s*=\s*-?\d+\s*:\s*i\d+(?:,\s*)?")


class Unaligned(Exception):  # noqa: N818  (a reason, as Unsupported)
    """The CFG form does not match the structured form operation by operation."""


@dataclass(frozen=True)
class _Expected:
    """One operation the CFG form holds, in order: its name, the structured line before which
    an operation inserted just before it goes (None where no such line exists), and the
    structured line it is (None for what the lowering makes)."""

    name: str
    anchor: int | None
    line: int | None


def _name(line: str) -> str:
    if line.startswith("}"):
        return "}"
    found = _RESULTS.match(line)
    rest = line[found.end() :] if found else line
    name = _NAME.match(rest)
    if name is None:
        return rest.split(" ", 1)[0]
    return name.group(1) or name.group(2)


@dataclass
class _Region:
    """An open region of the structured form: its operation's name, whether its
    ``scf.yield`` was seen, and how many operations it holds so far."""

    owner: str
    yielded: bool = False
    ops: int = 0


def _expected(lines: list[str]) -> list[_Expected]:
    """What the CFG form holds for the structured ``lines``, in order."""
    out: list[_Expected] = []
    stack: list[_Region] = []

    def region_end(owner: str, anchor: int) -> None:
        if owner == "scf.for":
            out.append(_Expected("arith.addi", anchor, None))
        out.append(_Expected("cf.br", anchor, None))

    for number, raw in enumerate(lines):
        line = raw.strip()
        if not line or line.startswith("^") or line.startswith("//"):
            continue
        if line.startswith("}"):
            region = stack[-1]
            if region.owner in ("scf.for", "scf.if") and not region.yielded:
                region_end(region.owner, number)  # the printer leaves an empty yield out
            if line.endswith("{"):  # } else {   } do {
                stack[-1] = _Region(region.owner)
                continue
            stack.pop()
            if not region.owner.startswith("scf."):
                out.append(_Expected("}", number, number))
            continue
        name = _name(line)
        opens = line.endswith("{")
        if stack:
            stack[-1].ops += 1
        if name == "scf.for" and opens:
            out += [
                _Expected("cf.br", number, None),
                _Expected("arith.cmpi", None, None),
                _Expected("cf.cond_br", None, None),
            ]
        elif name == "scf.if" and opens:
            out.append(_Expected("cf.cond_br", number, None))
        elif name == "scf.while" and opens:
            out.append(_Expected("cf.br", number, None))
        elif name == "scf.yield" and stack:
            region = stack[-1]
            region.yielded = True
            if region.owner == "scf.for" or region.ops > 1:
                region_end(region.owner, number)
        elif name == "scf.condition":
            out.append(_Expected("cf.cond_br", number, None))
        elif name.startswith("scf."):
            raise Unaligned(f"line {number + 1}: {name}")
        else:
            out.append(_Expected(name, number, number))
        if opens:
            stack.append(_Region(name))
    return out


def _depth0(text: str, target: str, start: int) -> int:
    """The first index of ``target`` at bracket depth 0 from ``start``, or -1."""
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if depth == 0 and text.startswith(target, i):
            return i
        if ch in "([{<":
            depth += 1
        elif ch in ")]}" or (ch == ">" and text[i - 1] != "-"):
            depth -= 1
    return -1


def _dict_with_allocation(text: str) -> str:
    """The brace group of ``text`` that holds ``allocation.*`` attributes at its top."""
    for start in (m.start() for m in re.finditer(r"\{", text)):
        depth = 0
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    group = text[start : i + 1]
                    if _ALLOCATION.search(group[1:-1]) and "{" not in group[1:-1]:
                        return group
                    break
    raise Unaligned(f"no attributes holding the allocation in: {text}")


def _with_allocation(structured: str, lowered: str) -> str:
    """The structured line with the attribute dictionary of the lowered one."""
    attrs = _dict_with_allocation(lowered)
    rest = _ALLOCATION_ENTRY.sub("", attrs[1:-1]).strip().rstrip(",").strip()
    if rest:
        old = "{" + rest + "}"
        if old not in structured:
            raise Unaligned(f"no attributes {old} in: {structured}")
        return structured.replace(old, attrs, 1)
    body = len(structured) - len(structured.lstrip())
    start = body + len(structured[body:]) - len(structured[body:].lstrip("})"))
    at = _depth0(structured, " : ", start)
    if at < 0:
        raise Unaligned(f"no type after the operands in: {structured}")
    return structured[:at] + " " + attrs + structured[at:]


def restructure(structured: str, *lowered: str) -> list[str]:
    """``structured`` with the ``allocation.*`` attributes, the module's attributes and the
    inserted barriers and fences of each of ``lowered`` (the same module lowered to ``cf``,
    then through Triton's passes), one text per lowered form."""
    lines = structured.splitlines()
    expected = _expected(lines)
    end = "\n" if structured.endswith("\n") else ""
    return [_onto(list(lines), expected, one) + end for one in lowered]


def _onto(lines: list[str], expected: list[_Expected], lowered: str) -> str:
    """``lines`` (the structured form, changed in place) with what ``lowered`` adds."""
    inserted: dict[int, list[str]] = {}
    j = 0
    for raw in lowered.splitlines():
        line = raw.strip()
        if not line or line.startswith("^") or line.startswith("//"):
            continue
        name = _name(line)
        if j < len(expected) and expected[j].name == name:
            at = expected[j].line
            j += 1
            if at is None:
                continue
            if name == "module":
                lines[at] = raw
            elif _ALLOCATION.search(line):
                lines[at] = _with_allocation(lines[at], line)
            continue
        anchor = expected[j].anchor if j < len(expected) else None
        if name not in _INSERTED or anchor is None:
            where = f" before {expected[j].name}" if j < len(expected) else ""
            raise Unaligned(f"{name}{where} has no place in the structured form")
        inserted.setdefault(anchor, []).append(line)
    if j != len(expected):
        raise Unaligned(f"the lowered form ends before {expected[j].name}")
    out: list[str] = []
    for number, raw in enumerate(lines):
        if number in inserted:
            indent = raw[: len(raw) - len(raw.lstrip())]
            if raw.lstrip().startswith("}"):
                indent += "  "
            out += [indent + op for op in inserted[number]]
        out.append(raw)
    return "\n".join(out)
