"""Local completion (Xin & Jaakkola Eq. 4) and the interim public-tier estimator."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.shared.mechanisms import complete_vector, estimate_shared_h, fit_public_model
from privrec.shared.mechanisms.completion import spectral_factor
from privrec.shared.seeding import rng_for

from ._helpers import public_matrix


def test_completion_equals_eq4_in_sigma_form() -> None:
    """Push-through form = µ_φᶜ + Σ_φᶜφ (λ′I + Σ_φφ)⁻¹ (y − µ_φ) with Σ = V Vᵀ; y kept on φ."""
    rng = rng_for(0, "test", "eq4")
    m, k, lam = 30, 4, 0.7
    mu, V = rng.normal(3, 0.5, m), rng.normal(size=(m, k))
    items = np.array([1, 4, 5, 17, 28])
    y = rng.normal(3, 1, items.size)
    r = complete_vector(items, y, mu, V, lam)
    sigma = V @ V.T
    rest = np.setdiff1d(np.arange(m), items)
    direct = mu[rest] + sigma[np.ix_(rest, items)] @ np.linalg.solve(
        lam * np.eye(items.size) + sigma[np.ix_(items, items)], y - mu[items]
    )
    np.testing.assert_allclose(r[rest], direct, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(r[items], y)


def test_completion_without_ratings_is_the_mean() -> None:
    """A user with no ratings completes to µ."""
    mu, V = np.arange(5.0), np.ones((5, 2))
    np.testing.assert_array_equal(
        complete_vector(np.array([], dtype=np.int64), np.array([]), mu, V, 1.0), mu
    )


def test_fit_public_model_means_and_shapes() -> None:
    """µ = observed item means (global mean for unrated items); V has shape (m, k)."""
    dense = np.array([[5.0, 0.0, 1.0, 0.0], [3.0, 0.0, 0.0, 2.0], [4.0, 0.0, 3.0, 0.0]])
    mu, V = fit_public_model(sp.csr_matrix(dense), 2)
    np.testing.assert_allclose(mu, [4.0, 18.0 / 6.0, 2.0, 2.0])
    assert V.shape == (4, 2)


def test_fit_public_model_recovers_a_low_rank_subspace() -> None:
    """On rank-3 synthetic data the fitted V spans the true item subspace (small angles)."""
    rng = rng_for(1, "test", "lowrank")
    n, m, k = 200, 60, 3
    v_true = rng.normal(size=(m, k))
    full = 3.0 + rng.normal(size=(n, k)) @ v_true.T * 0.5 + 0.1 * rng.normal(size=(n, m))
    mask = rng.random((n, m)) < 0.6
    mu, V = fit_public_model(sp.csr_matrix(np.where(mask, full, 0.0)), k, ridge=0.05)
    q_true, _ = np.linalg.qr(v_true)
    q_fit, _ = np.linalg.qr(V)
    cosines = np.linalg.svd(q_true.T @ q_fit, compute_uv=False)
    assert cosines.min() > 0.95
    np.testing.assert_allclose(mu, full.mean(0), atol=0.3)


def test_fit_public_model_is_deterministic_and_validates() -> None:
    """Same input, same model; bad rank / input are errors naming the argument."""
    pub = public_matrix(2, 20, 15)
    a, b = fit_public_model(pub, 2), fit_public_model(pub, 2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="`rank`"):
        fit_public_model(pub, 0)
    with pytest.raises(ValueError, match="`rank`"):
        fit_public_model(pub, 21)
    with pytest.raises(ValueError, match="`public_ratings`"):
        fit_public_model(np.ones((3, 3)), 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`ridge`"):
        fit_public_model(pub, 2, ridge=0.0)


def test_estimate_shared_h_is_mean_public_h() -> None:
    """Shared h = mean over public users of ‖r_i − µ‖₁/m (completed with Eq. 4)."""
    pub = public_matrix(3, 10, 12)
    mu, V = fit_public_model(pub, 2)
    hs = []
    for i in range(10):
        row = pub.getrow(i)
        r = complete_vector(row.indices.astype(np.int64), row.data, mu, V, 1.0)
        hs.append(np.abs(r - mu).mean())
    assert estimate_shared_h(pub, mu, V) == pytest.approx(np.mean(hs))


def test_public_ratings_matrix_round_trip_and_errors() -> None:
    """Payloads stack in mapping order; a malformed one is a ValidationError naming the user."""
    from privrec.shared.errors import ValidationError
    from privrec.shared.mechanisms.base import DensePayload, SparsePayload
    from privrec.shared.mechanisms.completion import public_item_means, public_ratings_matrix

    mat = public_matrix(3, 12, 9)
    rows = {
        f"u{i:02d}": SparsePayload(
            9,
            mat.indices[mat.indptr[i] : mat.indptr[i + 1]],
            mat.data[mat.indptr[i] : mat.indptr[i + 1]],
        )
        for i in range(mat.shape[0])
    }
    stacked = public_ratings_matrix(rows)
    assert (stacked != mat).nnz == 0 and stacked.shape == mat.shape
    np.testing.assert_array_equal(public_item_means(stacked), fit_public_model(mat, 2)[0])
    for bad, field in (
        (DensePayload(np.ones(9)), "public['u03']"),
        (SparsePayload(8, np.array([1]), np.array([3.0])), "public['u03']"),
        (SparsePayload(9, np.array([4, 2]), np.ones(2)), "public['u03'].indices"),
        (SparsePayload(9, np.array([2]), np.array([np.nan])), "public['u03'].values"),
    ):
        with pytest.raises(ValidationError) as info:
            public_ratings_matrix(rows | {"u03": bad}, 9)
        assert info.value.field == field


def test_trace_norm_spectrum_minimises_eq3_for_complete_vectors() -> None:
    """spectral_factor(..., "trace-norm") gives Σ = V Vᵀ minimising Xin & Jaakkola Eq. (3),
    Σ_i y_iᵀ(λ′I + Σ)⁻¹y_i + √(nm)·tr Σ over PSD Σ, for complete vectors y_i: every random PSD
    perturbation raises the objective, and the covariance spectrum (a wrong variant) does not
    attain it."""
    rng = np.random.default_rng(5)
    n, m, lam = 40, 6, 0.3
    y = rng.normal(size=(n, 2)) @ rng.normal(size=(2, m)) + 0.2 * rng.normal(size=(n, m))
    vals, vecs = np.linalg.eigh(y.T @ y)

    def objective(sigma: np.ndarray) -> float:
        inv = np.linalg.inv(lam * np.eye(m) + sigma)
        return float(np.einsum("ij,jk,ik->", y, inv, y) + np.sqrt(n * m) * np.trace(sigma))

    V = spectral_factor(vals, vecs, n, spectrum="trace-norm", ridge=lam)
    best = objective(V @ V.T)
    assert np.linalg.matrix_rank(V @ V.T, tol=1e-9) < m  # soft thresholding drops directions
    for _ in range(50):
        a = rng.normal(size=(m, m)) * 0.05
        assert objective(V @ V.T + a @ a.T) > best
        b = V @ V.T - a @ a.T
        w, q = np.linalg.eigh(b)
        assert objective(q @ np.diag(np.clip(w, 0, None)) @ q.T) >= best - 1e-9
    cov = spectral_factor(vals, vecs, n, spectrum="covariance")
    assert objective(cov @ cov.T) > best + 1e-3
    with pytest.raises(ValueError, match="spectrum"):
        spectral_factor(vals, vecs, n, spectrum="svd")
