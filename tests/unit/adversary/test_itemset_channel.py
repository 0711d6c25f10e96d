"""Balu's channel models of BLIP and JLT (adversary.attacks.itemset_channel, itemset_prior):
the ĉ estimators (3.9)/(3.6) and (3.11), the single decoders (3.27)–(3.29) and the JLT
likelihood ratio, and the priors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.stats

from privrec.adversary.attacks.itemset_channel import BlipChannel, JltChannel
from privrec.adversary.attacks.itemset_prior import (
    item_counts,
    popularity,
    smoothed_log_odds,
    tilted_log_odds,
)
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import BitPayload, DensePayload, Profile
from privrec.shared.mechanisms.blip import Blip
from privrec.shared.mechanisms.jlt import JohnsonLindenstrauss
from privrec.shared.seeding import rng_for


def _blip(eps: float, n_bits: int = 5000, k: int = 20, n_items: int = 300) -> BlipChannel:
    return BlipChannel(Blip(eps, n_bits, k), n_items)


# ------------------------------------------------------------------ ĉ
def test_blip_size_inverts_3_9_and_3_6() -> None:
    """A release of weight ω gives ĉ = ln(1 − π̂)/(K ln(1 − 1/L)), π̂ = (ω/L − p)/(1 − 2p);
    at the weight the model expects for c = 106 (ε = 8, L = 5000, K = 20) that is 106 ± the
    rounding of ω."""
    ch = _blip(8.0)
    p, big_l, k = ch.p, 5000, 20
    pi_c = 1 - (1 - 1 / big_l) ** (106 * k)
    omega = round(big_l * ((1 - p) * pi_c + p * (1 - pi_c)))
    release = np.zeros((1, big_l), dtype=bool)
    release[0, :omega] = True
    est = ch.size(release, 0.99, fallback=1.0)
    pi_hat = (omega / big_l - p) / (1 - 2 * p)
    assert est.c_raw[0] == pytest.approx(math.log(1 - pi_hat) / (k * math.log(1 - 1 / big_l)))
    assert abs(est.c_raw[0] - 106) < 0.5
    assert est.c_hat[0] == 106
    assert est.c_hat[0] < est.c_high[0] < 300


def test_blip_size_is_close_to_unbiased_on_real_releases() -> None:
    """200 profiles of 50 items released at ε = 17: mean ĉ within 4 standard errors of 50
    (false-failure rate ≈ 6·10⁻⁵ under a normal approximation)."""
    mech = Blip(17.0, 5000, 20)
    ch = BlipChannel(mech, 1682)
    rng = rng_for(3, "test", "blip-size")
    bits = []
    for _ in range(200):
        items = np.sort(rng.choice(1682, 50, replace=False))
        bits.append(mech.release(Profile(items, np.ones(50), 1682), rng).bits)
    raw = ch.size(np.stack(bits), 0.99, 1.0).c_raw
    assert abs(raw.mean() - 50) < 4 * raw.std(ddof=1) / np.sqrt(raw.size)


def test_blip_size_without_information_falls_back() -> None:
    """At ε = 0 (p = ½) the release says nothing about c: ĉ is the fallback, c_high is N."""
    ch = _blip(0.0)
    est = ch.size(np.ones((2, 5000), dtype=bool), 0.99, fallback=106.4)
    assert not ch.informative
    assert np.all(np.isnan(est.c_raw))
    assert est.c_hat.tolist() == [106, 106] and est.c_high.tolist() == [300, 300]


def test_blip_size_is_clamped_to_the_catalogue() -> None:
    """An empty-looking release gives ĉ = 1, a saturated one ĉ = N."""
    ch = _blip(17.0)
    est = ch.size(np.stack([np.zeros(5000, bool), np.ones(5000, bool)]), 0.99, 1.0)
    assert est.c_hat.tolist() == [1, 300]


def test_jlt_size_is_3_11_as_printed() -> None:
    """ĉ = L/(L − 1)·Σ ỹ² − Lσ² on a hand vector (L = 4, σ = 0.25): 4/3·(1 + 4 + 0 + 1) − ¼."""
    mech = JohnsonLindenstrauss(6.0, dim=4, sigma_rule="kkmm12", delta=math.exp(-2.25 / 16))
    ch = JltChannel(mech, 10)
    sigma = mech.sigma
    y = np.array([[1.0, -2.0, 0.0, 1.0]])
    est = ch.size(y, 0.99, 1.0)
    assert sigma == pytest.approx(0.25)
    assert est.c_raw[0] == pytest.approx(4 / 3 * 6.0 - 4 * sigma**2)


def test_jlt_size_expectation() -> None:
    """E[ĉ] = c·L/(L−1) + Lσ²/(L−1) (the printed L/(L−1) factor's bias): 400 releases of
    c = 30 items at σ = 0.1, L = 200; the mean is within 4 standard errors."""
    mech = JohnsonLindenstrauss(60.0, dim=200, sigma_rule="kkmm12", delta=math.exp(-2.25))
    ch = JltChannel(mech, 500)
    rng = rng_for(4, "test", "jlt-size")
    ys = [
        mech.release(Profile(np.sort(rng.choice(500, 30, replace=False)), np.ones(30), 500), rng)
        for _ in range(400)
    ]
    raw = ch.size(np.stack([y.values for y in ys]), 0.99, 1.0).c_raw
    expect = 30 * 200 / 199 + 200 * mech.sigma**2 / 199
    assert abs(raw.mean() - expect) < 4 * raw.std(ddof=1) / np.sqrt(raw.size)


# ------------------------------------------------------------------ single decoders
def test_blip_single_score_is_3_27() -> None:
    """s_j = n₁₁ ln((1 − p)/π̃) + n₀₁ ln(p/(1 − π̃)) over X_j's distinct positions, π̃ = ω/L."""
    mech = Blip(6.0, 64, 3, hash_key=7)
    ch = BlipChannel(mech, 20)
    release = rng_for(0, "test", "release").random(64) < 0.4
    scores = ch.single_scores(release[None, :], np.array([5]))[0]
    p, pi = mech.p_flip, release.mean()
    for j in range(20):
        x = mech.hashes.codeword(j)
        n11, n01 = int((x & release).sum()), int((x & ~release).sum())
        want = n11 * math.log((1 - p) / pi) + n01 * math.log(p / (1 - pi))
        assert scores[j] == pytest.approx(want, rel=1e-12)


def test_jlt_single_score_is_the_gaussian_likelihood_ratio() -> None:
    """s_j = Σ_i ln N(ỹ_i; X_j(i), v₁) − ln N(ỹ_i; 0, v₀), v₁ = σ² + (ĉ − 1)/L,
    v₀ = σ² + ĉ/L."""
    mech = JohnsonLindenstrauss(2.0, dim=50, sigma_rule="kkmm12", delta=1e-3)
    ch = JltChannel(mech, 30)
    y = rng_for(1, "test", "y").standard_normal(50)
    c_hat = 4
    scores = ch.single_scores(y[None, :], np.array([c_hat]))[0]
    s2 = mech.sigma**2
    v1, v0 = s2 + (c_hat - 1) / 50, s2 + c_hat / 50
    x = mech.codebook(30)
    for j in (0, 7, 29):
        want = (
            scipy.stats.norm.logpdf(y, x[j], math.sqrt(v1)).sum()
            - scipy.stats.norm.logpdf(y, 0.0, math.sqrt(v0)).sum()
        )
        assert scores[j] == pytest.approx(want, rel=1e-10)


def test_single_decoders_rank_true_items_first_without_noise() -> None:
    """BLIP at p ≈ e^{−100} and JLT at σ = 0: the profile's items outscore every other."""
    items = np.array([3, 17, 42, 99, 150, 201, 255, 290])
    profile = Profile(items, np.ones(items.size), 300)
    blip = Blip(400.0, 2000, 4)
    ch = BlipChannel(blip, 300)
    b = blip.release(profile, rng_for(0, "test", "b")).bits[None, :]
    s = ch.single_scores(b, ch.size(b, 0.99, 1.0).c_hat)[0]
    assert set(np.argsort(-s, kind="stable")[: items.size]) == set(items.tolist())
    jlt = JohnsonLindenstrauss(600.0, dim=1000, sigma_rule="balu2016", n_items=300)
    chj = JltChannel(jlt, 300)
    y = jlt.release(profile, rng_for(0, "test", "y")).values[None, :]
    s = chj.single_scores(y, chj.size(y, 0.99, 1.0).c_hat)[0]
    assert set(np.argsort(-s, kind="stable")[: items.size]) == set(items.tolist())


def test_stack_refuses_foreign_payloads() -> None:
    """A JLT vector among BLIP releases (or a wrong length) names the profile's position."""
    ch = _blip(8.0)
    with pytest.raises(ValidationError, match=r"profiles\[1\]"):
        ch.stack([BitPayload(np.zeros(5000, bool)), DensePayload(np.zeros(3))])


# ------------------------------------------------------------------ priors
def _aux(rows: list[list[int]], n_items: int) -> RatingData:
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    mat = sp.csr_matrix(
        (np.ones(int(indptr[-1])), np.concatenate(rows), indptr), shape=(len(rows), n_items)
    )
    return RatingData("aux", mat, np.arange(len(rows)), np.arange(n_items), (1.0, 5.0))


def test_popularity_counts_users_holding_each_item() -> None:
    """Three auxiliary users over five items: counts 3, 2, 0, 1, 0 and fractions of 3."""
    aux = _aux([[0, 1], [0, 3], [0, 1]], 5)
    assert item_counts(aux, 5).tolist() == [3, 2, 0, 1, 0]
    np.testing.assert_allclose(popularity(aux, 5), [1, 2 / 3, 0, 1 / 3, 0])
    np.testing.assert_allclose(smoothed_log_odds(aux, 5)[2], math.log(0.5 / 3.5))
    with pytest.raises(ValidationError, match=r"auxiliary\.ratings"):
        popularity(aux, 6)


def test_tilted_prior_has_the_requested_expected_size() -> None:
    """Σ sigmoid(β) = ĉ after the tilt, the order of the base is kept, and the flat prior is
    ĉ/n per item."""
    base = np.log(
        np.array([0.5, 0.2, 0.05, 0.01, 0.3]) / (1 - np.array([0.5, 0.2, 0.05, 0.01, 0.3]))
    )
    beta = tilted_log_odds(base, 2.0)
    assert scipy.special.expit(beta).sum() == pytest.approx(2.0, abs=1e-9)
    assert np.array_equal(np.argsort(beta), np.argsort(base))
    np.testing.assert_allclose(scipy.special.expit(tilted_log_odds(np.zeros(8), 2.0)), 0.25)
    # sizes outside (0, n) are clamped so that the shift exists
    assert scipy.special.expit(tilted_log_odds(base, 99.0)).sum() == pytest.approx(4.5)
