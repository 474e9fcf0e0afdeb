"""Requests with parameters: a family of kernels in one request (docs/design.md, Parameters).

A request may declare integer parameters (``"params": {"BLOCK_M": {"values": [64, 128]},
"STAGES": {"min": 2, "max": 5}}``) and give sizes, alignments, loop trips, the capacity and ring
depths as expressions over them (``"size": "BLOCK_M * BLOCK_K * 2"``, ``planner.core.expr``).
Such a request is a *template*: binding every parameter to one value (a *configuration*) makes
it an ordinary request, read and checked as any other.

Every expression is checked once, over the declared values, by interval arithmetic: one that
could be zero, negative or too large for its field anywhere in the declared box is refused
with the field's ``loc``, before any configuration is bound.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from planner.core.errors import FieldError, RequestError
from planner.core.expr import NAME_PATTERN, Expr, ExprError, Interval, parse_expr
from planner.core.models import MAX_SIZE, PlanRequest
from planner.core.models._base import Errors, Loc

__all__ = [
    "MAX_CONFIGS",
    "MAX_PARAMS",
    "MAX_VALUES",
    "Param",
    "Template",
    "columns",
    "corners",
    "has_params",
    "parse_template",
]

MAX_PARAMS = 32
MAX_VALUES = 4096  # listed values of one parameter
MAX_PARAM_VALUE = 1 << 40
MAX_CONFIGS = 100_000  # configurations one sweep enumerates
MAX_COPIES = 64  # slots of one ring

# Fields that may hold an expression, and the values each accepts (inclusive).
_RANGES: dict[str, Interval] = {
    "size": (1, MAX_SIZE),
    "alignment": (1, 1 << 30),
    "capacity": (1, MAX_SIZE),
    "trips": (1, 1 << 30),
    "min_trips": (0, 1 << 30),
    "max_trips": (1, 1 << 30),
    "min": (1, MAX_COPIES),
    "max": (1, MAX_COPIES),
    "priority": (0, 1 << 20),
}


class Param(BaseModel):
    """One integer parameter: a list of values, or a range ``min..max`` (inclusive) with a
    step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    values: list[int] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_VALUES,
        description="The values the parameter may take, e.g. [64, 128, 256]. Give values, or "
        "min and max.",
    )
    min: int | None = Field(
        default=None,
        ge=-MAX_PARAM_VALUE,
        le=MAX_PARAM_VALUE,
        description="Least value of a range (inclusive), with max.",
    )
    max: int | None = Field(
        default=None,
        ge=-MAX_PARAM_VALUE,
        le=MAX_PARAM_VALUE,
        description="Greatest value of a range (inclusive), with min.",
    )
    step: int = Field(
        default=1,
        ge=1,
        le=MAX_PARAM_VALUE,
        description="Values of a range are min, min + step, ... up to max. Default 1.",
    )
    default: int | None = Field(
        default=None,
        description="The value a plan of the request alone binds. Default: the first value, or "
        "min.",
    )

    @model_validator(mode="after")
    def _domain(self) -> Param:
        errors = Errors("Param")
        ranged = self.min is not None or self.max is not None
        if self.values is None and not ranged:
            errors.add((), "missing_values", "give values, or min and max", None)
        elif self.values is not None and ranged:
            given = "min" if self.min is not None else "max"
            errors.add((given,), "values_and_range", "give values, or min and max, not both", None)
        elif self.values is not None:
            for k, v in enumerate(self.values):
                if abs(v) > MAX_PARAM_VALUE:
                    errors.add(
                        ("values", k), "value_too_large", f"value {v} exceeds 2**40 in size", v
                    )
        elif self.min is None or self.max is None:
            absent = "max" if self.min is not None else "min"
            errors.add(
                (absent,), "missing_bound", f"a range needs both min and max ({absent})", None
            )
        elif self.max < self.min:
            errors.add(
                ("max",),
                "range_reversed",
                f"max ({self.max}) is less than min ({self.min})",
                self.max,
            )
        errors.raise_if_any()
        if self.default is not None and not self.allows(self.default):
            errors.add(
                ("default",),
                "default_outside_domain",
                f"default {self.default} is not one of the parameter's values",
                self.default,
            )
        errors.raise_if_any()
        return self

    def allows(self, value: int) -> bool:
        """Whether ``value`` is one of the declared values."""
        if self.values is not None:
            return value in self.values
        assert self.min is not None
        assert self.max is not None
        return self.min <= value <= self.max and (value - self.min) % self.step == 0

    @property
    def bounds(self) -> Interval:
        """Least and greatest declared value."""
        if self.values is not None:
            return min(self.values), max(self.values)
        assert self.min is not None
        assert self.max is not None
        return self.min, self.min + (self.max - self.min) // self.step * self.step

    @property
    def count(self) -> int:
        """How many values the parameter may take."""
        if self.values is not None:
            return len(set(self.values))
        lo, hi = self.bounds
        return (hi - lo) // self.step + 1

    def enumerate(self) -> list[int]:
        """Every declared value, in order (a range: ascending); at most ``MAX_CONFIGS``."""
        if self.values is not None:
            return list(dict.fromkeys(self.values))
        lo, hi = self.bounds
        return list(range(lo, min(hi, lo + (MAX_CONFIGS - 1) * self.step) + 1, self.step))

    @property
    def chosen(self) -> int:
        """The value a plan of the request alone binds."""
        if self.default is not None:
            return self.default
        return self.values[0] if self.values is not None else self.bounds[0]


@dataclass(frozen=True)
class ExprField:
    """One field of the request given as an expression."""

    loc: Loc
    text: str
    expr: Expr
    range: Interval  # over the declared box


@dataclass
class Template:
    """A request with parameters: ``raw`` is the request without ``params``, its expression
    fields still text; ``fields`` are those fields, parsed and checked."""

    params: dict[str, Param]
    raw: dict[str, Any]
    fields: list[ExprField]

    @property
    def names(self) -> list[str]:
        return list(self.params)

    @property
    def name(self) -> str:
        name = self.raw.get("name", "kernel")
        return name if isinstance(name, str) else "kernel"

    def bounds(self) -> dict[str, Interval]:
        return {n: p.bounds for n, p in self.params.items()}

    def default_config(self) -> dict[str, int]:
        return {n: p.chosen for n, p in self.params.items()}

    def check_config(self, config: Mapping[str, Any], loc: Loc = ("config",)) -> dict[str, int]:
        """``config`` completed with the defaults; raises RequestError for an unknown name or
        a value the parameter does not declare."""
        errors: list[FieldError] = []
        for name, value in config.items():
            param = self.params.get(name)
            if param is None:
                known = ", ".join(self.params) or "none"
                errors.append(
                    _error(
                        (*loc, name),
                        f"unknown parameter {name!r}; declared: {known}",
                        "unknown_parameter",
                        name,
                    )
                )
            elif type(value) is not int:
                errors.append(
                    _error((*loc, name), f"{name} = {value!r} is not an integer", "int_type", value)
                )
            elif not param.allows(value):
                errors.append(
                    _error(
                        (*loc, name),
                        f"{name} = {value} is not one of its declared values "
                        f"({_domain_text(param)})",
                        "value_outside_domain",
                        value,
                    )
                )
        if errors:
            raise RequestError(errors)
        return {n: int(config.get(n, p.chosen)) for n, p in self.params.items()}

    def bind(self, config: Mapping[str, Any], *, checked: bool = False) -> PlanRequest:
        """The ordinary request of one configuration (missing parameters take their
        defaults); raises RequestError naming the field, the value and the configuration."""
        from planner.core.io import parse_request

        env = config if checked else self.check_config(config)
        data = self.substituted(env)
        try:
            return parse_request(data)
        except RequestError as exc:
            at = ", ".join(f"{k}={v}" for k, v in env.items())
            found = [{**e, "msg": f"{e.get('msg', 'invalid')} (with {at})"} for e in exc.errors]
            raise RequestError(found) from None

    def substituted(self, env: Mapping[str, int]) -> dict[str, Any]:
        """``raw`` with every expression field replaced by its value at ``env``."""
        data = dict(self.raw)
        copied: set[int] = {id(data)}
        for f in self.fields:
            _assign(data, f.loc, f.expr.value(env), copied)
        return data

    def values(self, loc: Loc, columns: Mapping[str, Any], count: int) -> Any:
        """The field at ``loc`` over ``count`` configurations (numpy arrays per parameter):
        an int64 array for an expression, else the field's constant."""
        for f in self.fields:
            if f.loc == loc:
                return f.expr.values(columns, count)
        return None

    def configurations(
        self, product: Mapping[str, Sequence[int]] | None = None
    ) -> Iterator[dict[str, int]]:
        """Every configuration of ``product`` (default: every declared value of every
        parameter), in lexicographic order of the declared parameters."""
        axes = []
        for name, p in self.params.items():
            if product is not None and name in product:
                axes.append(list(product[name]))
            else:
                axes.append(p.enumerate())
        names = list(self.params)
        for combo in itertools.product(*axes):
            yield dict(zip(names, combo, strict=True))

    def product_size(self, product: Mapping[str, Sequence[int]] | None = None) -> int:
        size = 1
        for name, p in self.params.items():
            size *= len(product[name]) if product is not None and name in product else p.count
        return size


def _domain_text(param: Param) -> str:
    if param.values is not None:
        shown = param.values[:8]
        more = ", ..." if len(param.values) > 8 else ""
        return ", ".join(map(str, shown)) + more
    return f"{param.min}..{param.max}" + (f" step {param.step}" if param.step != 1 else "")


def _error(loc: Loc, msg: str, type_: str, value: Any) -> FieldError:
    return {"loc": list(loc), "msg": msg, "type": type_, "input": value}


def _assign(root: dict[str, Any], loc: Loc, value: int, copied: set[int]) -> None:
    """Set ``root[loc]``, copying each container on the way the first time (the template's
    own containers are shared, never written)."""
    node: Any = root
    for key in loc[:-1]:
        child = node[key]
        if id(child) not in copied:
            child = dict(child) if isinstance(child, dict) else list(child)
            copied.add(id(child))
            node[key] = child
        node = child
    node[loc[-1]] = value


def has_params(data: Any) -> bool:
    """Whether a request (dict) declares parameters."""
    return isinstance(data, dict) and "params" in data


def _expression_sites(data: dict[str, Any]) -> Iterator[tuple[Loc, Any]]:
    """Every field that may hold an expression, with its value."""
    for key in ("alignment", "capacity"):
        if key in data:
            yield (key,), data[key]
    buffers = data.get("buffers")
    if isinstance(buffers, list):
        for i, b in enumerate(buffers):
            if not isinstance(b, dict):
                continue
            for key in ("size", "alignment"):
                if key in b:
                    yield ("buffers", i, key), b[key]
            copies = b.get("copies")
            if isinstance(copies, dict):
                for key in ("min", "max", "priority"):
                    if key in copies:
                        yield ("buffers", i, "copies", key), copies[key]
    loops = data.get("loops")
    if isinstance(loops, list):
        for k, loop in enumerate(loops):
            if isinstance(loop, dict):
                for key in ("trips", "min_trips", "max_trips"):
                    if key in loop:
                        yield ("loops", k, key), loop[key]


def _range_text(params: Mapping[str, Param]) -> str:
    return ", ".join(f"{n} in {_domain_text(p)}" for n, p in params.items())


def parse_template(data: dict[str, Any] | str | bytes) -> Template:
    """A checked template from a request with ``params``; raises RequestError naming each
    bad field (the parameters, an expression that does not read, uses an undeclared name, or
    may leave its field's range), then any error of the request bound at its defaults."""
    request = _request_object(data)
    params = _params(request.get("params"))
    raw = {k: v for k, v in request.items() if k != "params"}
    template = Template(params=params, raw=raw, fields=_fields(raw, params))
    template.bind(template.default_config(), checked=True)
    return template


def _request_object(data: dict[str, Any] | str | bytes) -> dict[str, Any]:
    """The request as a JSON object (parsed from text)."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise RequestError.field((), f"malformed JSON: {exc}", "json_invalid", None) from None
    if not isinstance(data, dict):
        raise RequestError.field((), "a request is a JSON object", "model_type", None)
    return data


def _params(declared: object) -> dict[str, Param]:
    """The declared parameters by name; RequestError names every bad one."""
    if not isinstance(declared, dict):
        raise RequestError.field(
            ("params",),
            "params is an object of parameters: {name: {values: [...]} or {min, max}}",
            "dict_type",
            declared,
        )
    errors: list[FieldError] = []
    if len(declared) > MAX_PARAMS:
        raise RequestError.field(
            ("params",),
            f"{len(declared)} parameters; at most {MAX_PARAMS}",
            "too_many_params",
            len(declared),
        )
    params: dict[str, Param] = {}
    for name, spec in declared.items():
        if (
            not re.fullmatch(NAME_PATTERN, name)
            or name in ("min", "max")
            or re.fullmatch(r"offset_\d+", name)
            or len(name) > 64
        ):
            errors.append(
                _error(
                    ("params", name),
                    f"parameter name {name!r} is not an identifier (or is min, max or offset_<k>)",
                    "bad_param_name",
                    name,
                )
            )
            continue
        try:
            params[name] = Param.model_validate(spec, strict=True)
        except Exception as exc:  # pydantic's ValidationError
            from pydantic import ValidationError

            if not isinstance(exc, ValidationError):
                raise
            errors.extend(RequestError.from_validation(exc, ("params", name)).errors)
    if errors:
        raise RequestError(errors)
    return params


def _fields(raw: dict[str, Any], params: dict[str, Param]) -> list[ExprField]:
    """The request's fields given as expressions, each read and its range checked over the
    parameters' bounds; RequestError names every bad one."""
    bounds = {n: p.bounds for n, p in params.items()}
    errors: list[FieldError] = []
    fields: list[ExprField] = []
    for loc, value in _expression_sites(raw):
        if isinstance(value, str):
            found = _field(loc, value, params, bounds)
            if isinstance(found, ExprField):
                fields.append(found)
            else:
                errors.append(found)
    if errors:
        raise RequestError(errors)
    return fields


def _field(
    loc: Loc,
    value: str,
    params: dict[str, Param],
    bounds: dict[str, Interval],
) -> ExprField | FieldError:
    """The expression ``value`` at ``loc`` with its range, or the error that names why it
    does not read, uses an undeclared name or may leave its field's range."""
    key = str(loc[-1])
    try:
        expr = parse_expr(value)
        unknown = sorted(expr.variables() - set(params))
        if unknown:
            known = ", ".join(params) or "none"
            raise ExprError(f"unknown parameter {unknown[0]!r}; declared: {known}")
        lo, hi = expr.interval(bounds)
    except ExprError as exc:
        return _error(loc, f"{key} {value!r}: {exc}", "bad_expression", value)
    least, most = _RANGES[key]
    if lo < least or hi > most:
        bad = lo if lo < least else hi
        kind = (
            "negative"
            if bad < 0
            else "zero"
            if bad == 0
            else "too large"
            if bad > most
            else "too small"
        )
        return _error(
            loc,
            f"{key} {value!r} can be {bad} ({kind}; it must lie in {least}..{most}) "
            f"for {_range_text({n: params[n] for n in sorted(expr.variables())})}",
            "expression_out_of_range",
            value,
        )
    return ExprField(loc, value, expr, (lo, hi))


def corners(template: Template) -> list[dict[str, int]]:
    """Every corner of the declared box (each parameter at its least or greatest value),
    at most 2**10 of them (then the two extreme corners)."""
    names = template.names
    if len(names) > 10:
        return [
            {n: template.params[n].bounds[0] for n in names},
            {n: template.params[n].bounds[1] for n in names},
        ]
    axes = [sorted(set(template.params[n].bounds)) for n in names]
    return [dict(zip(names, c, strict=True)) for c in itertools.product(*axes)]


def columns(
    configs: Sequence[Mapping[str, int]], names: Sequence[str]
) -> dict[str, np.ndarray[Any, np.dtype[np.int64]]]:
    """Configurations as one int64 array per parameter."""
    return {
        n: np.fromiter((c[n] for c in configs), dtype=np.int64, count=len(configs)) for n in names
    }
