"""A symbolic plan: offsets as expressions over a request's parameters, valid for every value
in their declared ranges (docs/design.md, Symbolic plans)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Corner", "ParamRange", "SymbolicOffset", "SymbolicPlan"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamRange(_Model):
    """The values one parameter may take."""

    name: str = Field(description="The parameter's name.")
    min: int = Field(description="Least value (inclusive).")
    max: int = Field(description="Greatest value (inclusive).")


class SymbolicOffset(_Model):
    """One buffer: its offset and size as expressions."""

    id: str = Field(description="The buffer's id.")
    name: str = Field(description="The offset's name in other offsets' expressions, offset_<k>.")
    offset: str = Field(
        description="Bytes from the arena base: 0, or the max over the buffers below of their "
        "offset + size rounded up to this buffer's alignment (parameters and earlier offsets)."
    )
    size: str = Field(description="Bytes, over the parameters.")
    alignment: int = Field(description="Bytes, a power of two.")
    below: list[str] = Field(description="The conflicting buffers placed below this one.")


class Corner(_Model):
    """The figures at one corner of the parameters' box."""

    config: dict[str, int] = Field(description="Every parameter at its min or max.")
    arena_bytes: int = Field(description="The symbolic arena's value there.")
    lower_bound: int = Field(description="The peak of occupied bytes there: no plan does better.")


class SymbolicPlan(_Model):
    """Offsets valid over the whole box of parameters, by construction: of two conflicting
    buffers one sits below the other at every point."""

    name: str = Field(description="The request's name.")
    params: list[ParamRange] = Field(description="The box the plan is valid over.")
    offsets: list[SymbolicOffset] = Field(
        description="One per buffer in request order; each offset refers only to parameters "
        "and earlier offsets of the order below."
    )
    order: list[str] = Field(description="The buffers' ids in an order that computes them.")
    arena: str = Field(description="Arena bytes: the max over the buffers of offset + size.")
    barriers: list[int] = Field(description="The barriers the plan relies on (the request's).")
    corners: list[Corner] = Field(description="The arena and the lower bound at every corner.")
