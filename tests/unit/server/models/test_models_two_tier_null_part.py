"""The server's treatment of the user-independent ("null") part of the second-order releases
(Xin & Jaakkola Sec. 4; docs/decisions/two_tier.md, "Null part") and the Full EM model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models.full_em import TwoTierFullEM
from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.mechanisms.base import DensePayload, Profile
from privrec.shared.mechanisms.completion import fit_public_model
from privrec.shared.mechanisms.second_order import (
    ExactSecondOrder,
    LaplaceSecondOrder,
    PrivateDiscrete,
)


def _low_rank(n: int, m: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 3.0 + rng.normal(size=(n, 2)) @ rng.normal(size=(2, m)) * 0.6


def _top(S: np.ndarray, k: int) -> np.ndarray:
    vals, vecs = np.linalg.eigh(S)
    top = vecs[:, -k:] * np.sqrt(np.clip(vals[-k:], 0, None))
    return top @ top.T


def test_uninformative_diagonal_is_filled_from_the_public_users() -> None:
    """diagonal=None: the private users' u uᵀ contributes off the diagonal only, and its
    diagonal is the public users' average c_i² (each covariance entry from the users who
    inform it): V Vᵀ is the rank-k part of
    (CᵀC + w(UᵀU − diag UᵀU) + w n_priv diag(CᵀC)/n_pub)/(n_pub + w n_priv)."""
    public = _low_rank(50, 10, 0)[:20]
    model = TwoTierLowRank(k=2, em_iters=1, private_weight=0.5).fit_public(sp.csr_matrix(public))
    assert model.mu_ is not None
    c = public - model.mu_
    u = np.random.default_rng(1).normal(size=(30, 10))
    model.add_private(u, diagonal=None)
    off = u.T @ u - np.diag(np.diag(u.T @ u))
    S = (c.T @ c + 0.5 * off + np.diag(0.5 * 30 * np.diag(c.T @ c) / 20)) / (20 + 0.5 * 30)
    np.testing.assert_allclose(model.V_ @ model.V_.T, _top(S, 2), atol=1e-10)
    # the default ("outer") keeps u² on the diagonal: a different factor
    outer = TwoTierLowRank(k=2, em_iters=1, private_weight=0.5).fit_public(sp.csr_matrix(public))
    outer.add_private(u)
    assert not np.allclose(outer.V_ @ outer.V_.T, model.V_ @ model.V_.T, atol=1e-6)


def test_given_diagonal_replaces_u_squared_and_persists() -> None:
    """An explicit per-user diagonal replaces u² in the sum; save/restore keeps the count of
    users without one."""
    full = _low_rank(40, 8, 2)
    model = TwoTierLowRank(k=2, em_iters=1).fit_public(sp.csr_matrix(full[:15]))
    u = np.random.default_rng(3).normal(size=(10, 8))
    model.add_private(u, diagonal=np.ones_like(u))
    moment = model._private_moment
    assert moment is not None
    np.testing.assert_allclose(np.diag(moment), 0.5 * 10 * np.ones(8))
    model.add_private(u[:4], diagonal=None)
    state = model.state_arrays()
    assert int(state["private_no_diagonal"]) == 4
    twin = TwoTierLowRank(k=2, em_iters=1).restore(state)
    assert twin._private_no_diagonal == 4
    with pytest.raises(ValueError, match="diagonal"):
        model.add_private(u, diagonal=np.ones((3, 8)))


def _pmd_releases(centring: str, n: int = 150, m: int = 24) -> np.ndarray:
    """n PMD releases of users around a low-rank model whose µ varies from 2.5 to 4.5."""
    rng = np.random.default_rng(11)
    mu = np.linspace(2.5, 4.5, m)
    V = rng.normal(size=(m, 2)) * 0.5
    mech = PrivateDiscrete().bind(mu, V)
    out = []
    for i in range(n):
        items = np.sort(rng.choice(m, size=12, replace=False))
        ratings = np.clip(np.round(mu[items] + V[items] @ rng.normal(size=2)), 1, 5)
        payload = mech.release(Profile(items, ratings, m), np.random.default_rng(i))
        u = mech.estimate(payload, m) if centring == "estimate" else payload.values - mu
        out.append(u)
    return np.array(out)


def test_regression_pmd_null_part_no_longer_dominates_the_moment() -> None:
    """Regression (issue 10): centred by µ, PMD's releases share E[x] − µ = s̄ − µ, which
    became the top eigenvector of Σ u uᵀ (cosine ≈ 0.99 on ML-100K); centred by s̄ =
    mean(S) (`PrivateDiscrete.estimate`) that direction is gone."""
    m = 24
    null = 3.0 - np.linspace(2.5, 4.5, m)
    null /= np.linalg.norm(null)

    def top_cosine(u: np.ndarray) -> float:
        M = u.T @ u
        np.fill_diagonal(M, 0.0)
        return float(abs(np.linalg.eigh(M)[1][:, -1] @ null))

    assert top_cosine(_pmd_releases("mu")) > 0.9
    assert top_cosine(_pmd_releases("estimate")) < 0.5


def test_pmd_estimate_and_diagonal() -> None:
    """PMD: u = x − mean(S) and no diagonal information (None)."""
    mech = PrivateDiscrete().bind(np.full(3, 3.5), np.ones((3, 1)))
    u = mech.estimate(DensePayload(np.array([1.0, 5.0, 3.0])), 3)
    np.testing.assert_array_equal(u, [-2.0, 2.0, 0.0])
    assert mech.moment_diagonal(u[None]) is None
    exact = ExactSecondOrder()
    np.testing.assert_array_equal(exact.moment_diagonal(u[None]), (u * u)[None])


def test_laplace_diagonal_is_unbiased_for_the_clipped_deviation() -> None:
    """u² − 2b² estimates (clip(r) − µ)² without bias: over n = 20000 releases of one user the
    mean lies within 4 sd/√n of the truth (false-failure rate < 1e-4); the raw u² (the broken
    variant without the correction) misses by 2b² = 2·(4/ε)² and fails the same check."""
    m, n, eps = 4, 20_000, 2.0
    mu = np.array([3.0, 3.5, 4.0, 2.5])
    V = np.eye(m)[:, :1]
    mech = LaplaceSecondOrder(epsilon=eps).bind(mu, V)
    profile = Profile(np.arange(m), np.array([5.0, 1.0, 4.0, 3.0]), m)
    rng = np.random.default_rng(0)
    u = np.array([mech.estimate(mech.release(profile, rng), m) for _ in range(n)])
    truth = (np.clip(mech.complete(profile), 1, 5) - mu) ** 2
    for est, ok in ((mech.moment_diagonal(u), True), (u * u, False)):
        err = est.mean(axis=0) - truth
        sd = est.std(axis=0) / math.sqrt(n)
        assert bool(np.all(np.abs(err) < 4 * sd)) is ok
    assert mech.scale == pytest.approx(2.0)


def test_full_em_with_every_user_is_the_all_public_fit() -> None:
    """Full EM after the public fit and every private user equals the public-tier estimator
    fitted on all rows (µ exactly; V Vᵀ up to rounding, rows being in another order)."""
    full = _low_rank(40, 12, 5)
    rng = np.random.default_rng(6)
    observed = sp.csr_matrix(np.where(rng.random(full.shape) < 0.6, full, 0.0))
    model = TwoTierFullEM(k=2, em_iters=3).fit_public(observed[:10])
    model.add_private(observed[10:25]).add_private(observed[25:])
    mu, V = fit_public_model(observed, 2, n_iter=3)
    np.testing.assert_allclose(model.mu_, mu)
    np.testing.assert_allclose(model.V_ @ model.V_.T, V @ V.T, atol=1e-8)
    assert model.n_public_ == 10 and model.n_private_ == 30


def test_lanczos_m_step_agrees_with_the_full_eigendecomposition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The M-step's Lanczos path (large m) gives the same V Vᵀ as `eigh` (to 1e-10)."""
    from privrec.server.models import two_tier

    rng = np.random.default_rng(0)
    m = 120
    full = 3 + rng.normal(size=(90, 3)) @ rng.normal(size=(3, m))
    public = sp.csr_matrix(np.where(rng.random((40, m)) < 0.4, full[:40], 0.0))
    runs = []
    for threshold in (10, 10**9):
        monkeypatch.setattr(two_tier, "LANCZOS_MIN_ITEMS", threshold)
        model = TwoTierLowRank(k=4, em_iters=2).fit_public(public)
        assert model.mu_ is not None
        model.add_private(full[40:] - model.mu_, diagonal=None)
        runs.append(model.V_ @ model.V_.T)
    np.testing.assert_allclose(runs[0], runs[1], atol=1e-10)
