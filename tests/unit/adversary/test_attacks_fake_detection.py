"""Genuine-vs-fake scoring of RPT releases (Bilge §2.2.1 fakes).

Deterministic (seeded) populations; tolerances cover the spread over population seeds 1–12
(PRIVREC_ATTACK_TEST_SEED) as noted at each assertion.
"""

from __future__ import annotations

import numpy as np
import pytest

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.fake_detection import popularity_odds
from privrec.adversary.attacks.rpt_bayes import count_only_prior
from privrec.adversary.attacks.rpt_matrix import disguised_matrix
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.seeding import rng_for
from privrec.sim.referee_attacks import score_attack


def _score(fitted, popularity: str, sigma_max: float = 1.0, beta_max: int = 10) -> dict[str, float]:  # type: ignore[no-untyped-def]
    out, d = fitted("rpt_fake_detection", sigma_max, beta_max, popularity=popularity)
    return score_attack("rpt_fake_detection", out, d.truth)


def test_values_alone_beat_chance(fitted) -> None:  # type: ignore[no-untyped-def]
    """Without any item knowledge the value model separates genuine from fake cells."""
    s = _score(fitted, "none")
    # Pooled AUC 0.82–0.84 and per-user 0.80–0.82 over seeds.
    assert s["auc"] > 0.75
    assert s["auc_per_user_mean"] > 0.7
    assert s["top_g_precision"] > s["top_g_precision_chance"] + 0.05


def test_popularity_prior_adds_to_the_values(fitted) -> None:  # type: ignore[no-untyped-def]
    """Auxiliary popularity, and the server's own debiased column counts, both raise the AUC."""
    none, aux, observed = (_score(fitted, p) for p in ("none", "auxiliary", "observed"))
    # Gains over seeds: aux +0.069–0.082, observed +0.066–0.079, aux per user +0.089–0.100.
    assert aux["auc"] > none["auc"] + 0.03
    assert observed["auc"] > none["auc"] + 0.03
    assert aux["auc_per_user_mean"] > none["auc_per_user_mean"] + 0.03


def test_detection_weakens_with_noise(fitted) -> None:  # type: ignore[no-untyped-def]
    """More noise hides the fakes better: AUC at σ_max = 0.25 > 1 > 2 (values only)."""
    a = [_score(fitted, "none", s)["auc"] for s in (0.25, 1.0, 2.0)]
    assert a[0] > a[1] > a[2] > 0.6  # 0.967–0.974, 0.822–0.840, 0.710–0.731 over seeds


def test_shuffled_values_are_at_chance(disguised) -> None:  # type: ignore[no-untyped-def]
    """Broken variant: values permuted within each user, no popularity → per-user AUC ≈ 0.5.

    Each user's scores are then exchangeable with respect to her labels. Over seeds the
    per-user mean AUC was 0.494–0.511 (≈ 400 users; its standard error ≈ 0.01), so ±0.04 is a
    4σ band. The pooled AUC may stay a little above 0.5 because a user's filled-cell count
    legitimately tells how many of her cells are genuine.
    """
    d = disguised(1.0, 10)
    rng = rng_for(0, "test", "shuffle")
    profiles = {
        u: SparsePayload(p.dim, p.indices, rng.permutation(p.values))
        for u, p in d.observations.profiles.items()
    }
    obs = Observations(d.observations.run_config, profiles)
    out = make_attack("rpt_fake_detection", popularity="none").fit(obs).output()
    s = score_attack("rpt_fake_detection", out, d.truth)
    assert abs(s["auc_per_user_mean"] - 0.5) < 0.04


def test_uniform_popularity_equals_count_prior(disguised) -> None:  # type: ignore[no-untyped-def]
    """Closed form: with uniform π the popularity odds reduce to g_u/F_u."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    rng = rng_for(0, "test", "odds")
    g = rng.uniform(20, 60, dm.n_users)
    f_fake = rng.uniform(5, 30, dm.n_users)
    pi = np.full(dm.n_items, 1.0 / dm.n_items)
    # λ_u comes from interpolating a tabulated Σ_j(1 − exp(−λπ_j)): accurate to ≈ 1e-4.
    np.testing.assert_allclose(
        popularity_odds(dm, g, f_fake, pi), count_only_prior(dm, g, f_fake), atol=1e-3
    )


def test_no_fakes_means_all_genuine(disguised) -> None:  # type: ignore[no-untyped-def]
    """β_max = 0: every filled cell is genuine and scored so."""
    d = disguised(1.0, 0)
    out = (
        make_attack("rpt_fake_detection", popularity="none", n_iter=2).fit(d.observations).output()
    )
    assert all(np.all(e.values > 100) for e in out.per_user.values())


def test_auxiliary_popularity_needs_auxiliary(disguised) -> None:  # type: ignore[no-untyped-def]
    """popularity='auxiliary' without an auxiliary set is an error naming it; 'auto' falls back."""
    d = disguised(1.0, 10)
    obs = Observations(d.observations.run_config, d.observations.profiles)
    with pytest.raises(ValidationError) as info:
        make_attack("rpt_fake_detection", popularity="auxiliary").fit(obs)
    assert info.value.field == "auxiliary"
    out = make_attack("rpt_fake_detection", n_iter=1).fit(obs).output()
    assert "observed column fill counts" in out.knowledge
    assert "auxiliary" not in out.knowledge
