"""JLT (Balu §3.2): the ε ↔ σ preset, KKMM12 conditions, the codebook and the noise law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privrec.shared.accounting import event_epsilon
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms import JohnsonLindenstrauss
from privrec.shared.mechanisms.base import DensePayload
from privrec.shared.mechanisms.hashing import gaussian_codebook
from privrec.shared.mechanisms.jlt import BALU2016_DELTA, BALU2016_SIGMA, kkmm12_sigma

from ._helpers import ALPHA, ks_pvalue, random_profiles, rngs

# Balu §3.5.1, L = 1000, as printed.
THESIS_TABLE = {600: 0, 6: 1, 3: 2, 2: 3, 1: 6, 0.75: 8, 0.5: 12, 0.25: 24, 0.1: 61}


def test_balu2016_preset_is_the_thesis_table() -> None:
    """The named preset is the printed ε ↔ σ table, and it fits σ = 6/ε (δ = e^-2.25)."""
    assert {float(k): float(v) for k, v in THESIS_TABLE.items()} == BALU2016_SIGMA
    for eps, sigma in BALU2016_SIGMA.items():
        mech = JohnsonLindenstrauss(eps, sigma_rule="balu2016", n_items=1682)
        assert mech.sigma == sigma
        assert mech.delta == pytest.approx(0.1054, abs=1e-4)
        if 0 < sigma < 61:
            assert kkmm12_sigma(eps, BALU2016_DELTA) == pytest.approx(sigma, rel=1e-9)
    # The one printed outlier: 6/0.1 = 60, the thesis prints 61 (extraction §8.3).
    assert kkmm12_sigma(0.1, BALU2016_DELTA) == pytest.approx(60.0)


@pytest.mark.parametrize("eps", [600.0, 6.0, 3.0])
def test_preset_points_violating_kkmm12_are_flagged(eps: float) -> None:
    """ε ≥ ln(1/δ) = 2.25 for ε ∈ {600, 6, 3}: flagged (ε = 600, σ = 0: no guarantee at all)."""
    st = JohnsonLindenstrauss(eps, sigma_rule="balu2016", n_items=1682).privacy()
    assert "kkmm12-conditions-violated" in st.flags
    if eps == 600.0:
        assert st.kind == "none" and "no-noise" in st.flags
    else:
        assert st.kind == "approximate"
        assert "kkmm12-epsilon-not-below-log-inv-delta" in st.flags
        assert "claim-not-certified" not in st.flags  # the exact analysis still backs it


@pytest.mark.parametrize("eps", [2.0, 1.0, 0.75, 0.5, 0.25, 0.1])
def test_preset_points_satisfying_kkmm12_are_clean(eps: float) -> None:
    """L = 1000 ≥ 2(ln 1682 + ln(2/δ)) ≈ 20.8, σ ≥ 4√ln(1/δ)/ε and ε < 2.25: no flags."""
    st = JohnsonLindenstrauss(eps, sigma_rule="balu2016", n_items=1682).privacy()
    assert st.flags == ()
    assert (st.kind, st.epsilon, st.delta) == ("approximate", eps, BALU2016_DELTA)


def test_kkmm12_rule_and_dimension_condition() -> None:
    """σ = (4/ε)√ln(1/δ); a sketch shorter than 2(ln N + ln(2/δ)) is flagged."""
    mech = JohnsonLindenstrauss(1.0, 1e-5, n_items=1682)
    assert mech.sigma == pytest.approx(4 * math.sqrt(math.log(1e5)))
    assert mech.privacy().flags == ()
    short = JohnsonLindenstrauss(1.0, 1e-5, dim=30, n_items=1682).privacy()
    assert "kkmm12-dim-too-small" in short.flags


def test_event_is_gaussian_with_codebook_sensitivity() -> None:
    """GaussianDpEvent(σ/Δ) with Δ = max_j ||X_j||; its ε matches tight_epsilon and ≤ the claim."""
    mech = JohnsonLindenstrauss(1.0, 1e-5, n_items=1682)
    delta_l2 = np.linalg.norm(mech.codebook(1682), axis=1).max()
    assert 1.0 < delta_l2 < 1.2
    ev = mech.event()
    assert ev.noise_multiplier == pytest.approx(mech.sigma / delta_l2)
    assert event_epsilon(ev, 1e-5) == pytest.approx(mech.tight_epsilon(), rel=1e-9)
    assert mech.tight_epsilon() < 1.0


def test_uncertified_claim_is_raised_to_the_tight_epsilon() -> None:
    """If σ were too small for the claim, the statement reports the exact ε instead."""
    mech = JohnsonLindenstrauss(1.0, 1e-5, n_items=100, dim=100)
    mech.sigma = 0.3  # a deliberately broken variant
    st = mech.privacy()
    assert "claim-not-certified" in st.flags
    assert st.epsilon == pytest.approx(mech.tight_epsilon()) and st.epsilon > 1.0


def test_codebook_entries_are_n_0_1_over_l_and_reject_mis_scaled() -> None:
    """KS of √L·X against N(0, 1) at α = 1e-3; a ±30 % (or N(0, 1)) codebook is rejected.

    Power: 300 × 200 = 60,000 entries, KS critical value ≈ 1.95/√n = 0.008, while the sup-CDF
    gap of a 30 % mis-scaled normal is ≥ 0.06.
    """
    x = gaussian_codebook(0, 300, 200)
    z = x * math.sqrt(200)
    assert ks_pvalue(z, stats.norm.cdf) > ALPHA
    for factor in (0.7, 1.3, math.sqrt(200)):
        assert ks_pvalue(z * factor, stats.norm.cdf) < ALPHA


def test_codebook_is_public_reproducible_and_prefix_stable() -> None:
    """The same seed gives the same codebook; row j does not depend on N; seeds differ."""
    a = gaussian_codebook(5, 50, 64)
    np.testing.assert_array_equal(a, gaussian_codebook(5, 50, 64))
    np.testing.assert_array_equal(a[:20], gaussian_codebook(5, 20, 64))
    assert not np.array_equal(a, gaussian_codebook(6, 50, 64))
    mech = JohnsonLindenstrauss(dim=64, codebook_seed=5)
    np.testing.assert_array_equal(mech.codebook(20), a[:20])
    np.testing.assert_array_equal(mech.codebook(50), a)


class _Scaled(JohnsonLindenstrauss):
    """A mis-implemented JLT whose noise σ is off by a factor (for power checks)."""

    def __init__(self, factor: float, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.sigma *= factor


@pytest.mark.parametrize("eps", [2.0, 0.25])
def test_noise_is_n_0_sigma2_and_rejects_mis_scaled(eps: float) -> None:
    """Release − Σ_{j∈P} X_j is N(0, σ²) (KS, α = 1e-3); σ off by ±30 % is rejected.

    Power: 20 users × 1000 coordinates; KS critical value ≈ 0.014 vs a sup-CDF gap ≥ 0.06.
    """
    mech = JohnsonLindenstrauss(eps, sigma_rule="balu2016", n_items=1682)
    ps = random_profiles(2, 20, 1682, low=10, high=300)
    sketch = np.stack([mech.sketch(p) for p in ps])

    def residual(m: JohnsonLindenstrauss) -> np.ndarray:
        return np.stack([o.values for o in m.release_many(ps, rngs(2, 20))]) - sketch

    assert ks_pvalue(residual(mech) / mech.sigma, stats.norm.cdf) > ALPHA
    for factor in (0.7, 1.3):
        bad = _Scaled(factor, epsilon=eps, sigma_rule="balu2016", n_items=1682)
        assert ks_pvalue(residual(bad) / mech.sigma, stats.norm.cdf) < ALPHA


def test_release_is_sum_of_codewords_plus_noise() -> None:
    """Y_P = Σ_{j∈P} X_j exactly (Balu §3.2), and the profile's n_items must match."""
    mech = JohnsonLindenstrauss(dim=16, n_items=30)
    p = random_profiles(3, 1, 30)[0]
    np.testing.assert_allclose(mech.sketch(p), mech.codebook(30)[p.items].sum(0))
    wrong = random_profiles(3, 1, 31)[0]
    with pytest.raises(ValueError, match="n_items"):
        mech.release(wrong, rngs(0, 1)[0])


def test_validate_rejects_wrong_length_and_non_finite() -> None:
    """DenseVector length must be L, values finite."""
    mech = JohnsonLindenstrauss(dim=8)
    mech.validate(DensePayload(np.zeros(8)), 1682)
    with pytest.raises(ValidationError, match="L = 8"):
        mech.validate(DensePayload(np.zeros(1682)), 1682)
    with pytest.raises(ValidationError, match="finite"):
        mech.validate(DensePayload(np.array([0.0] * 7 + [np.nan])), 1682)
