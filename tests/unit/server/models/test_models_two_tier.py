"""TwoTierLowRank: the weighted M-step of Xin & Jaakkola Sec. 4, checked against a direct
eigendecomposition, and its failure modes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.errors import NotFittedError


def low_rank(n: int, m: int, rank: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 3.0 + rng.normal(size=(n, rank)) @ rng.normal(size=(rank, m)) * 0.5


def test_m_step_is_the_weighted_second_order_eigenfactor() -> None:
    """With complete public rows (completion = the ratings) and exact private vectors u = r − µ,
    V Vᵀ is the rank-k part of (Σ_pub c cᵀ + w Σ_priv u uᵀ)/(n_pub + w n_priv)."""
    full = low_rank(60, 12, 3, seed=0) + np.random.default_rng(1).normal(0, 0.1, (60, 12))
    public, private = full[:20], full[20:]
    model = TwoTierLowRank(k=3, ridge=1.0, em_iters=2, private_weight=0.5)
    model.fit_public(sp.csr_matrix(public))
    mu = public.mean(axis=0)
    np.testing.assert_allclose(model.mu_, mu)
    model.fit_private(private - mu)
    c, u = public - mu, private - mu
    S = (c.T @ c + 0.5 * u.T @ u) / (20 + 0.5 * 40)
    vals, vecs = np.linalg.eigh(S)
    top = vecs[:, -3:] * np.sqrt(vals[-3:])
    np.testing.assert_allclose(model.V_ @ model.V_.T, top @ top.T, atol=1e-10)
    assert model.n_public_ == 20 and model.n_private_ == 40
    # a wrong weight gives a different factor (the check above could fail)
    wrong = (c.T @ c + u.T @ u) / 60
    vals, vecs = np.linalg.eigh(wrong)
    top = vecs[:, -3:] * np.sqrt(vals[-3:])
    assert not np.allclose(model.V_ @ model.V_.T, top @ top.T, atol=1e-6)


def test_published_arrays_and_errors() -> None:
    model = TwoTierLowRank(k=2)
    with pytest.raises(NotFittedError):
        model.fit_private(np.zeros((3, 5)))
    with pytest.raises(NotFittedError):
        model.public_arrays()
    model.fit_public(sp.csr_matrix(low_rank(8, 5, 2, seed=3)))
    arrays = model.public_arrays()
    assert set(arrays) == {"mu", "V", "ridge", "n_public", "n_private"}
    assert arrays["V"].shape == (5, 2)
    with pytest.raises(ValueError, match="finite"):
        model.fit_private(np.full((2, 5), np.nan))
    for bad in (
        {"k": 0},
        {"ridge": 0.0},
        {"em_iters": -1},
        {"private_weight": -0.1},
        {"spectrum": "svd"},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TwoTierLowRank(**bad)
