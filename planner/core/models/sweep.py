"""A sweep: one request with parameters, answered for many configurations and targets
(docs/sweeps.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from planner.core.models.plan import Plan

__all__ = [
    "MAX_SWEEP_TARGETS",
    "ConfigAnswer",
    "SweepRequest",
    "SweepResult",
    "TargetFit",
    "Verdict",
    "answer_of",
]

MAX_SWEEP_TARGETS = 16
Verdict = Literal["fits", "plan_too_big", "cannot_fit"]


class SweepRequest(BaseModel):
    """A request with parameters and the configurations and targets to answer for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request: dict[str, Any] = Field(
        description="The request, with params and expressions (docs/design.md, Parameters)."
    )
    configs: list[dict[str, int]] | None = Field(
        default=None,
        max_length=100_000,
        description="The configurations, each {parameter: value}; a parameter left out takes "
        "its default. Default: the product of product, else of every declared value.",
    )
    product: dict[str, list[int]] | None = Field(
        default=None,
        description="Values per parameter whose product is swept (a parameter left out: every "
        "declared value). Ignored when configs is given.",
    )
    targets: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SWEEP_TARGETS,
        description='Device profiles to answer for, e.g. ["sm_80", "sm_90"]. Default: the '
        "request's target, else its capacity alone.",
    )
    plans: Literal["none", "fitting", "all"] = Field(
        default="none",
        description='Which answers carry their full plan: "none", "fitting" (fits on some '
        'target) or "all". Default "none".',
    )
    refine: Literal["none", "gap", "all"] = Field(
        default="gap",
        description='When the shared greedy pass is replanned by the full planner: "gap" (a '
        'configuration whose lower bound fits a target its plan does not), "all", or '
        '"none". Default "gap".',
    )


class TargetFit(BaseModel):
    """One configuration on one target."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target: str | None = Field(description="The device profile; null: the request's capacity.")
    capacity: int | None = Field(description="Bytes available; null: unbounded.")
    fits: bool = Field(description="Whether the plan's arena is within capacity.")
    verdict: Verdict = Field(
        description='"fits"; "plan_too_big" (the lower bound fits, the plan does not); '
        '"cannot_fit" (the lower bound exceeds capacity: no plan fits).'
    )
    blocks_per_sm: int | None = Field(
        description="Resident blocks per multiprocessor as shared memory allows; null without "
        "a target."
    )
    copies: dict[str, int] | None = Field(
        default=None,
        description="With rings: the slots chosen per ring for this target's capacity (the "
        "depths, and so the arena, differ by target); null without rings.",
    )
    arena_bytes: int | None = Field(
        default=None,
        description="With rings: the arena of the depths chosen for this target; null without "
        "rings (the configuration's arena_bytes holds).",
    )


class ConfigAnswer(BaseModel):
    """The answer for one configuration."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: dict[str, int] = Field(description="Every parameter's value.")
    arena_bytes: int | None = Field(
        description="Bytes of the plan; null when the configuration is invalid."
    )
    lower_bound: int | None = Field(
        description="Bytes no plan can do with (the peak of occupied bytes)."
    )
    naive_bytes: int | None = Field(description="Sum of the sizes: every buffer laid end to end.")
    proved_optimal: bool = Field(description="Whether the arena equals the lower bound.")
    copies: dict[str, int] | None = Field(
        default=None, description="Slots chosen per ring (buffers with copies); null: none."
    )
    targets: list[TargetFit] = Field(description="Fits or not, per target.")
    plan: Plan | None = Field(default=None, description="The full plan, when asked for.")
    error: str | None = Field(
        default=None, description="Why the configuration is not a valid request; null: valid."
    )


class SweepResult(BaseModel):
    """Answers for every configuration, in the order given (or enumerated)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The request's name.")
    params: list[str] = Field(description="The declared parameters, in order.")
    targets: list[str | None] = Field(description="The targets answered for, in order.")
    shared_graph: bool = Field(
        description="Whether the configurations shared one conflict graph and one batched "
        "placement (else each was planned alone)."
    )
    refined: int = Field(description="Configurations replanned by the full planner.")
    fitting: list[int] = Field(description="Configurations that fit, per target in order.")
    answers: list[ConfigAnswer] = Field(description="One per configuration.")


_ANSWER_FIELDS = frozenset(ConfigAnswer.model_fields)


def answer_of(values: dict[str, object]) -> ConfigAnswer:
    """A ConfigAnswer from checked values (every field given), built as ``model_construct``
    builds it without its per-call work: a sweep makes ten thousand of them."""
    answer = ConfigAnswer.__new__(ConfigAnswer)
    put = object.__setattr__
    put(answer, "__dict__", values)
    put(answer, "__pydantic_fields_set__", set(_ANSWER_FIELDS))
    put(answer, "__pydantic_extra__", None)
    put(answer, "__pydantic_private__", None)
    return answer
