"""Synthetic requests: deterministic, the requested size, and the requested overlap."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import planner
from planner.core.csvio import with_overrides
from planner.core.errors import RequestError
from planner.core.models import PlanRequest
from planner.generate import (
    KERNEL_MIN_BUFFERS,
    MAX_BYTES,
    MIN_BYTES,
    MODEL_MAX_BYTES,
    MODEL_MIN_BYTES,
    model_request,
    random_kernel,
    random_request,
)


def _mean_overlap_fraction(request: PlanRequest) -> float:
    """Mean over buffers of the fraction of the other buffers whose lifetime intersects it."""
    start = np.array([b.start for b in request.buffers])
    end = np.array([b.end for b in request.buffers])
    n = start.size
    # j intersects i iff start_j < end_i and end_j > start_i; count by sorting, not all pairs.
    begun = np.searchsorted(np.sort(start), end, side="left")  # start_j < end_i
    ended = np.searchsorted(np.sort(end), start, side="right")  # end_j <= start_i
    others = begun - ended - 1  # minus i itself
    return float(others.mean() / (n - 1))


def test_deterministic() -> None:
    assert random_request(300, seed=7) == random_request(300, seed=7)
    assert random_request(300, seed=7) != random_request(300, seed=8)


def test_builds_n_buffers_with_unique_ids() -> None:
    request = random_request(1234)
    assert len(request.buffers) == 1234
    assert len({b.id for b in request.buffers}) == 1234


def test_sizes_log_uniform_multiples_of_16() -> None:
    sizes = np.array([b.size for b in random_request(5000, seed=1).buffers])
    assert sizes.min() >= MIN_BYTES
    assert sizes.max() <= MAX_BYTES
    assert not (sizes % 16).any()
    # Log-uniform: the median sits near the geometric mean of the range (1024 bytes).
    assert 512 <= float(np.median(sizes)) <= 2048


@pytest.mark.parametrize("overlap", [0.005, 0.01, 0.05])
def test_mean_overlap_within_a_factor_two(overlap: float) -> None:
    fraction = _mean_overlap_fraction(random_request(2000, overlap=overlap, seed=3))
    assert overlap / 2 <= fraction <= overlap * 2


def test_is_a_valid_request() -> None:
    request = random_request(500, alignment=32, capacity=1 << 20, sync="insert")
    assert PlanRequest.model_validate(request.model_dump()) == request
    assert request.alignment == 32
    assert request.capacity == 1 << 20
    assert request.options.sync == "insert"
    assert all(b.end > b.start >= 0 for b in request.buffers)


def test_plans_and_validates() -> None:
    request = random_request(300, seed=5)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert plan.status in ("optimal", "feasible")
    assert plan.arena_bytes >= plan.lower_bound


def test_builds_100k_buffers() -> None:
    request = random_request(100_000)
    assert len(request.buffers) == 100_000
    assert request.buffers[-1].id == "b99999"


def test_empty() -> None:
    assert random_request(0).buffers == []


@pytest.mark.parametrize(("n", "overlap"), [(-1, 0.01), (10, 0.0), (10, 1.5), (10, -0.1)])
def test_rejects_bad_arguments(n: int, overlap: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        random_request(n, overlap=overlap)


def test_rejects_bad_sync() -> None:
    with pytest.raises(RequestError) as info:
        random_request(10, sync="sometimes")
    assert info.value.errors[0]["loc"] == ["options", "sync"]


def test_kernel_is_deterministic_and_draws_its_alignments() -> None:
    kernels = [random_kernel(seed, alignments=(16, 128, 1024)) for seed in range(20)]
    assert kernels[3] == random_kernel(3, alignments=(16, 128, 1024))
    assert kernels[3] != kernels[4]
    counts = [len(k.buffers) for k in kernels]
    assert min(counts) >= KERNEL_MIN_BUFFERS
    assert max(counts) <= 64
    drawn = {b.alignment for k in kernels for b in k.buffers}
    assert drawn == {16, 128, 1024}
    assert all(k.options.sync == "none" for k in kernels)


def test_kernel_plans_and_validates() -> None:
    request = random_kernel(2)
    plan = planner.plan(request)
    assert planner.validate(request, plan).valid
    assert plan.arena_bytes >= plan.lower_bound


def test_kernel_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_buffers"):
        random_kernel(0, max_buffers=KERNEL_MIN_BUFFERS - 1)
    with pytest.raises(ValueError, match="alignments"):
        random_kernel(0, alignments=())
    with pytest.raises(RequestError) as info:
        random_kernel(0, alignments=(16, 48))  # 48 is checked even where it is not drawn
    assert info.value.errors[0]["loc"] == ["alignment"]


def test_model_request_is_deterministic_and_seeded() -> None:
    assert model_request(2000, seed=3) == model_request(2000, seed=3)
    assert model_request(2000, seed=3) != model_request(2000, seed=4)


def test_model_request_bytes_are_pinned() -> None:
    """Requests the benchmarks and sweeps quote stay byte for byte the same over sizes and
    seeds (the digest of their JSON, one after the other)."""
    digest = hashlib.sha256()
    for n in (0, 1, 17, 123, 300):
        for seed in (0, 1, 7):
            digest.update(model_request(n, seed=seed).model_dump_json().encode())
    assert digest.hexdigest() == (
        "bd66beb65c2496e532bf5926d152f51080d77897e741ed79e43c24fddf9a651b"
    )


def test_model_request_shape() -> None:
    request = model_request(5000, seed=1)
    bufs = request.buffers
    assert len(bufs) == 5000
    assert len({b.id for b in bufs}) == 5000
    assert request.capacity is None
    sizes = np.array([b.size for b in bufs])
    assert sizes.min() >= MODEL_MIN_BYTES
    assert sizes.max() <= MODEL_MAX_BYTES
    assert sizes.max() / sizes.min() >= 1e4  # five orders of magnitude, near enough
    horizon = max(b.end for b in bufs)
    weights = [b for b in bufs if b.id.startswith("w")]
    assert weights
    assert all(b.start == 0 and b.end == horizon for b in weights)
    # Saved activations nest around the turn from forward to backward.
    saved = sorted((b.start, b.end) for b in bufs if b.id.startswith("a"))
    turn = min(b.start for b in bufs if b.id.startswith("b"))
    assert all(s < turn < e for s, e in saved)
    assert [b.start for b in bufs] == sorted(b.start for b in bufs)
    # Plannable and valid: a short limit is enough (the default 10 s buys the same plan here).
    plan = planner.plan(with_overrides(request, time_limit=1.0))
    assert planner.validate(request, plan).valid


def test_model_request_rejects_a_negative_count() -> None:
    with pytest.raises(ValueError, match="n must be >= 0"):
        model_request(-1)
