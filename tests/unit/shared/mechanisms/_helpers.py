"""Shared test helpers for the mechanism tests: profiles, generators, statistics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy import stats

from privrec.shared.mechanisms.base import BitPayload, DensePayload, Payload, Profile, SparsePayload
from privrec.shared.seeding import rng_for

# False-failure rate of each statistical acceptance test, were its seed drawn at random: a correct
# implementation fails a given test with probability ALPHA. The seeds are fixed, so each test is
# deterministic; the power checks below show every test rejects a ±30 % mis-scaled variant.
ALPHA = 1e-3


def rngs(seed: int, n: int, purpose: str = "release") -> list[np.random.Generator]:
    """`n` independent generators, one per simulated user."""
    return [rng_for(seed, "test", purpose, i) for i in range(n)]


def random_profile(
    rng: np.random.Generator,
    n_items: int,
    n_rated: int,
    values: Sequence[float] = (1.0, 2.0, 3.0, 4.0, 5.0),
) -> Profile:
    items = np.sort(rng.choice(n_items, size=n_rated, replace=False)).astype(np.int64)
    ratings = rng.choice(np.asarray(values, dtype=np.float64), size=n_rated)
    return Profile(items, ratings, n_items)


def random_profiles(
    seed: int, n_users: int, n_items: int, *, low: int = 1, high: int | None = None
) -> list[Profile]:
    rng = rng_for(seed, "test", "profiles")
    high = n_items if high is None else high
    return [random_profile(rng, n_items, int(rng.integers(low, high + 1))) for _ in range(n_users)]


def public_matrix(
    seed: int, n_users: int, n_items: int, rank: int = 3, density: float = 0.5
) -> sp.csr_matrix:
    """A low-rank 1–5 rating matrix with a random observation pattern."""
    rng = rng_for(seed, "test", "public")
    u = rng.normal(size=(n_users, rank))
    v = rng.normal(size=(n_items, rank))
    full = np.clip(
        np.rint(3.0 + 0.7 * u @ v.T / np.sqrt(rank) + 0.3 * rng.normal(size=(n_users, n_items))),
        1,
        5,
    )
    mask = rng.random((n_users, n_items)) < density
    mask[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    return sp.csr_matrix(np.where(mask, full, 0.0))


def payload_arrays(payload: Payload) -> tuple[np.ndarray, ...]:
    if isinstance(payload, SparsePayload):
        return (np.array([payload.dim]), payload.indices, payload.values)
    if isinstance(payload, DensePayload):
        return (payload.values,)
    assert isinstance(payload, BitPayload)
    return (payload.bits,)


def assert_payload_equal(a: Payload, b: Payload) -> None:
    assert type(a) is type(b)
    for x, y in zip(payload_arrays(a), payload_arrays(b), strict=True):
        np.testing.assert_array_equal(x, y)


def binomial_pvalue(successes: int, trials: int, p: float) -> float:
    """Two-sided exact binomial test of H0: success probability = p."""
    return float(stats.binomtest(int(successes), int(trials), p).pvalue)


def ks_pvalue(sample: np.ndarray, cdf: object) -> float:
    """One-sample Kolmogorov–Smirnov test of H0: sample ~ cdf."""
    return float(stats.kstest(np.asarray(sample).ravel(), cdf).pvalue)
