"""PMD, PMC (Xin & Jaakkola Sec. 4) and the Laplace / exact-second-order baselines (Sec. 5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privrec.shared.accounting import event_epsilon
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms import (
    ExactSecondOrder,
    LaplaceSecondOrder,
    PrivateContinuous,
    PrivateDiscrete,
    fit_public_model,
)
from privrec.shared.mechanisms.base import DensePayload, Profile
from privrec.shared.mechanisms.pmd_swaps import greedy_swaps
from privrec.shared.mechanisms.second_order import pmd_objective

from ._helpers import ALPHA, binomial_pvalue, ks_pvalue, public_matrix, random_profiles, rngs

M = 20
_MU, _V = fit_public_model(public_matrix(1, 40, M), 3)


def _profile(seed: int = 3, n_rated: int = 12) -> Profile:
    return random_profiles(seed, 1, M, low=n_rated, high=n_rated)[0]


# --------------------------------------------------------------------------- PMD
def test_pmd_candidates_are_coordinatewise_permutations_of_s() -> None:
    """For every coordinate the K candidates' values are a permutation of S (exact, always)."""
    mech = PrivateDiscrete().bind(_MU, _V)
    for r in rngs(1, 20):
        cands = mech.candidates(_profile(), r)
        assert cands.shape == (5, M)
        np.testing.assert_array_equal(
            np.sort(cands, axis=0), np.repeat(mech.rating_values[:, None], M, axis=1)
        )


def _pmd_counts(mech: PrivateDiscrete, n: int, best_fraction: float = 0.0) -> np.ndarray:
    """Counts of each value of S at each coordinate over n releases of one profile.

    With best_fraction > 0 it is a broken variant that, that often, sends the candidate closest
    to r in the Eq. (8) sense instead of a uniform one.
    """
    p = _profile()
    b = mech.centred(p)
    counts = np.zeros((M, mech.n_candidates))
    for r in rngs(2, n):
        payload, cands, _ = mech.release_with_candidates(p, r)
        x = payload.values
        if best_fraction and r.random() < best_fraction:
            a = cands - _MU
            x = cands[int(np.argmin(np.einsum("ji,ji->j", a, a) ** 2 - 2 * (a @ b) ** 2))]
        counts[np.arange(M), np.searchsorted(mech.rating_values, x)] += 1
    return counts


def test_pmd_coordinates_are_uniform_on_s_and_reject_a_biased_pick() -> None:
    """Pooled χ² over 20 coordinates × 5 values (80 dof), 1000 releases: uniform at α = 1e-3.

    The broken variant sends the best candidate 30 % of the time; it is rejected (p ≈ 1e-9 at
    this seed: the best candidate is pushed to the extremes of S where r − µ is large).
    """
    mech = PrivateDiscrete().bind(_MU, _V)

    def pvalue(c: np.ndarray) -> float:
        expected = c.sum(1, keepdims=True) / c.shape[1]
        chi2 = float(((c - expected) ** 2 / expected).sum())
        return float(stats.chi2.sf(chi2, c.shape[0] * (c.shape[1] - 1)))

    assert pvalue(_pmd_counts(mech, 1000)) > ALPHA
    assert pvalue(_pmd_counts(mech, 1000, best_fraction=0.3)) < ALPHA


def test_pmd_swap_test_matches_brute_force_greedy() -> None:
    """The O(1) swap test (numba) takes exactly the decisions of a brute-force greedy that
    recomputes Eq. (8) in full for every tried swap."""
    rng = np.random.default_rng(0)
    values = np.arange(1.0, 6.0)
    mu, b = rng.normal(3, 0.3, M), rng.normal(0, 1.2, M)
    perm = np.ascontiguousarray(rng.permuted(np.tile(np.arange(5), (M, 1)), axis=1).T)
    p = rng.integers(0, 5, size=(2, M, 3))
    q = rng.integers(0, 4, size=(2, M, 3))
    q += q >= p
    pairs = np.stack([p, q], axis=-1).astype(np.int64)

    brute = perm.copy()
    decisions = 0
    for t in range(2):
        for i in range(M):
            for r in range(3):
                pp, qq = pairs[t, i, r]
                trial = brute.copy()
                trial[[pp, qq], i] = trial[[qq, pp], i]
                if pmd_objective(values[trial], mu, mu + b) < pmd_objective(
                    values[brute], mu, mu + b
                ):
                    brute = trial
                    decisions += 1
    fast = perm.copy()
    assert greedy_swaps(fast, values, mu, b, pairs) == decisions > 0
    np.testing.assert_array_equal(fast, brute)


def test_pmd_optimisation_reduces_the_objective() -> None:
    """Greedy swaps lower Eq. (8) well below random candidates (same draws, 0 vs 3 tries)."""
    p = _profile()
    r = PrivateDiscrete().bind(_MU, _V).complete(p)
    tuned = [
        pmd_objective(
            PrivateDiscrete(swaps_per_item=3, n_passes=2).bind(_MU, _V).candidates(p, g), _MU, r
        )
        for g in rngs(3, 20)
    ]
    raw = [
        pmd_objective(PrivateDiscrete(swaps_per_item=0).bind(_MU, _V).candidates(p, g), _MU, r)
        for g in rngs(3, 20)
    ]
    assert np.mean(tuned) < 0.8 * np.mean(raw)


def test_pmd_validate_rejects_values_outside_s() -> None:
    """A value not in the rating set is rejected with its item."""
    mech = PrivateDiscrete()
    with pytest.raises(ValidationError, match="item 3 is not in the rating set") as info:
        mech.validate(DensePayload(np.array([1.0, 2.0, 3.0, 3.5] + [1.0] * (M - 4))), M)
    assert info.value.field == "pmd.values"


# --------------------------------------------------------------------------- PMC
def test_pmc_theorem_4_2_example() -> None:
    """r′ = (1, −2, 0.5) gives h = 3.5/3 and z = (1, −1, 1) (extraction §A7 example)."""
    c = np.array([1.0, -2.0, 0.5])
    mech = PrivateContinuous()
    assert mech.scale(c) == pytest.approx(3.5 / 3)
    np.testing.assert_array_equal(mech.signs(c), [1, -1, 1])
    np.testing.assert_array_equal(mech.signs(np.array([0.0, -0.0, -1e-300])), [1, 1, -1])
    zero_signs = np.array([-1.0, -1.0, 1.0])
    np.testing.assert_array_equal(mech.signs(np.array([0.0, 2.0, 0.0]), zero_signs), [-1, 1, 1])


def test_pmc_release_is_plus_minus_sign_times_h() -> None:
    """u = a·sign(r − µ)·h, |u_i| = h for every i; an exact zero of r − µ gets its own sign."""
    mu = np.round(_MU)
    mech = PrivateContinuous().bind(mu, _V)
    p = Profile(np.array([0, 5]), np.array([mu[0], mu[5] + 1.0]), M)
    c = mech.centred(p)
    assert c[0] == 0.0 and np.all(c[1:] != 0.0)
    for r in rngs(4, 10):
        u = mech.release(p, r).values
        a = np.sign(u[5])  # c[5] = +1 > 0: this coordinate carries the global coin
        np.testing.assert_allclose(u[1:], a * np.abs(c).mean() * np.sign(c[1:]))
        assert abs(u[0]) == pytest.approx(np.abs(c).mean())
        mech.validate(DensePayload(u), M)


def test_pmc_zero_coordinate_sign_is_independent_of_the_coin() -> None:
    """Where r − µ = 0, u's sign must not follow the global coin (with sign(0) := +1 it would
    equal it every time, which gives the coin away): over 2000 releases, agreement between
    u_0 (c_0 = 0) and the coin is binomial(2000, 1/2) at α = 1e-3; the old rule (agreement
    2000/2000) is rejected."""
    mu = np.round(_MU)
    mech = PrivateContinuous().bind(mu, _V)
    p = Profile(np.array([0, 5]), np.array([mu[0], mu[5] + 1.0]), M)
    agree = sum(
        int(np.sign(u[0]) == np.sign(u[5]))
        for u in (mech.release(p, r).values for r in rngs(6, 2000))
    )
    assert binomial_pvalue(agree, 2000, 0.5) > ALPHA
    assert binomial_pvalue(2000, 2000, 0.5) < ALPHA


def test_pmc_global_sign_is_a_fair_coin_and_rejects_biased() -> None:
    """The sign a is +1 with probability 1/2: exact binomial test over 2000 releases, α = 1e-3;
    a coin with P(+) off by ±30 % (0.35 or 0.65) is rejected (> 13 standard errors)."""
    mech = PrivateContinuous().bind(_MU, _V)
    p = _profile()
    z = mech.signs(mech.centred(p))
    plus = sum(int(mech.release(p, r).values[0] * z[0] > 0) for r in rngs(5, 2000))
    assert binomial_pvalue(plus, 2000, 0.5) > ALPHA
    for bias in (0.35, 0.65):
        biased = sum(int(r.random() < bias) for r in rngs(5, 2000))
        assert binomial_pvalue(biased, 2000, 0.5) < ALPHA


def test_pmc_shared_h() -> None:
    """With h_mode='shared' every |u_i| is the bound public h, and validate checks it."""
    mech = PrivateContinuous("shared").bind(_MU, _V, shared_h=0.8)
    u = mech.release(_profile(), rngs(6, 1)[0]).values
    np.testing.assert_allclose(np.abs(u), 0.8)
    with pytest.raises(ValidationError, match=r"h = 0\.8"):
        mech.validate(DensePayload(u * 1.1), M)
    with pytest.raises(ValueError, match="shared_h"):
        PrivateContinuous("shared").bind(_MU, _V)
    with pytest.raises(ValueError, match="shared_h"):
        PrivateContinuous().bind(_MU, _V, shared_h=0.8)
    assert "h-reveals-mean-absolute-deviation" not in mech.privacy().flags
    assert "h-reveals-mean-absolute-deviation" in PrivateContinuous().privacy().flags


def test_pmc_validate_rejects_unequal_magnitudes() -> None:
    """Coordinates of different magnitude are not a PMC release."""
    with pytest.raises(ValidationError, match="every \\|value\\| must equal h") as info:
        PrivateContinuous().validate(DensePayload(np.r_[np.ones(M - 1), 2.0]), M)
    assert info.value.field == "pmc.values"


# --------------------------------------------------------------------------- baselines
@pytest.mark.parametrize(
    ("eps", "lo", "hi", "scale"), [(1.0, 0.5, 5.0, 4.5), (5.0, 0.5, 5.0, 0.9), (1.0, 1.0, 5.0, 4.0)]
)
def test_laplace_scale_is_range_over_epsilon(
    eps: float, lo: float, hi: float, scale: float
) -> None:
    """Lap(0, 4.5/ε) on the paper's 0.5–5 scale (4.5 at ε = 1, 0.9 at ε = 5); event ε = ε."""
    mech = LaplaceSecondOrder(eps, lo, hi)
    assert mech.scale == pytest.approx(scale)
    assert event_epsilon(mech.event(), 0.0) == pytest.approx(eps)


class _ScaledLaplace(LaplaceSecondOrder):
    def __init__(self, factor: float) -> None:
        super().__init__(1.0)
        self._factor = factor

    @property
    def scale(self) -> float:
        return super().scale * self._factor


def test_laplace_noise_law_and_rejects_mis_scaled() -> None:
    """release − clip(r) ~ Lap(0, 4/ε) (KS, α = 1e-3, 500 users × 20 items = 10,000 values);
    scale ×0.7 / ×1.3 is rejected (sup-CDF gap ≥ 0.048 vs critical 0.0195)."""
    ps = random_profiles(7, 500, M, low=3, high=15)

    def residual(mech: LaplaceSecondOrder) -> np.ndarray:
        mech.bind(_MU, _V)
        clipped = np.stack([np.clip(mech.complete(p), 1.0, 5.0) for p in ps])
        return np.stack([o.values for o in mech.release_many(ps, rngs(7, 500))]) - clipped

    good = LaplaceSecondOrder(1.0)
    assert ks_pvalue(residual(good), stats.laplace(scale=4.0).cdf) > ALPHA
    for factor in (0.7, 1.3):
        assert ks_pvalue(residual(_ScaledLaplace(factor)), stats.laplace(scale=4.0).cdf) < ALPHA


def test_laplace_clips_the_completion_to_the_range() -> None:
    """With negligible noise the release is the completion clipped to [r_min, r_max]."""
    mech = LaplaceSecondOrder(1e9).bind(_MU * 3.0, _V * 5.0)
    p = _profile()
    out = mech.release(p, rngs(8, 1)[0]).values
    np.testing.assert_allclose(out, np.clip(mech.complete(p), 1.0, 5.0), atol=1e-6)
    assert mech.privacy().flags == ("element-level-epsilon",)


def test_exact_second_order_is_signed_centred_vector() -> None:
    """a·(r − µ) with a fair sign; the statement says it is not private."""
    mech = ExactSecondOrder().bind(_MU, _V)
    p = _profile()
    c = mech.centred(p)
    signs = [mech.release(p, r).values[0] / c[0] for r in rngs(9, 400)]
    assert set(np.round(signs, 12)) == {-1.0, 1.0}
    assert binomial_pvalue(sum(s > 0 for s in signs), 400, 0.5) > ALPHA
    assert mech.privacy().kind == "none" and "not-private" in mech.privacy().flags


def test_bound_model_must_match_the_catalogue() -> None:
    """A model for another catalogue, or of the wrong shape, is an error."""
    with pytest.raises(ValueError, match="shape"):
        PrivateDiscrete().bind(_MU, _V[:-1])
    with pytest.raises(ValueError, match="n_items"):
        PrivateDiscrete().bind(_MU, _V).release(random_profiles(1, 1, M + 1)[0], rngs(1, 1)[0])
