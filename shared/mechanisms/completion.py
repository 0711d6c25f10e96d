"""Local completion of a private user's ratings from the server's public model (µ, V).

Xin & Jaakkola (2014), Sec. 2 Eq. (4) and Sec. 4: the server publishes (µ, V), µ the item mean
vector and V a low-rank factor of Σ = V Vᵀ; a private user completes her rating vector locally,
without releasing anything, by

    r̂_{φᶜ} = µ_{φᶜ} + Σ_{φᶜ,φ} (λ′ I + Σ_{φ,φ})⁻¹ (y − µ_φ)              (Eq. (4), mean-centred)
           = µ_{φᶜ} + V_{φᶜ} u,   u = (λ′ I_k + V_φᵀ V_φ)⁻¹ V_φᵀ (y − µ_φ)   (push-through form)

and r̂_φ = y on her rated items φ. The mean-centred form is implied, not written, by the paper
(extraction §A2); the push-through form costs one k×k solve (ridge regression of her centred
ratings on the item factors). λ′ ("ridge") is public.

`fit_public_model` is the public-tier estimator: µ = item means of the public users' observed
ratings (the global mean for items no public user rated), then a few rounds of the paper's EM
loop (complete each public user with Eq. (4), re-estimate Σ from the completed, mean-centred
rows c_i). `spectral_factor` turns the second-moment sum M = Σ_i c_i c_iᵀ (eigenpairs (c_k, q_k))
into V = Q diag(√s_k) in one of two ways:

* "covariance" (default): s_k = c_k/n, so V Vᵀ is the rank-k part of the sample covariance and
  Eq. (4) is the posterior mean of a probabilistic-PCA user factor u ~ N(0, I_k) with rating
  noise variance λ′; λ′ = 1 (about the rating noise variance on a 1–5 scale) fits it.
* "trace-norm": s_k = max(0, √(c_k/√(nm)) − λ′), the minimiser of the paper's Eq. (3) for
  complete vectors (extraction §A2 [D]: a soft-thresholded square root, low rank by itself; the
  paper's Sec. 4 Σ = (Σ_i c_i c_iᵀ)^{1/2}/√(nm) is its λ′ → 0 limit), capped at k factors. Its
  λ′ lives on the scale of √(c_k/√(nm)), not of the rating noise, so it needs its own value.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import Payload, SparsePayload
from privrec.shared.types import FloatArray, IntArray, as_csr


def complete_vector(
    items: IntArray, ratings: FloatArray, mu: FloatArray, V: FloatArray, ridge: float
) -> FloatArray:
    """The completed rating vector r of one user, Xin & Jaakkola Eq. (4) (module docstring).

    Args:
        items: int array of shape (g,), the rated items φ.
        ratings: float array of shape (g,), her ratings y.
        mu: float array of shape (m,), item means.
        V: float array of shape (m, k), Σ = V Vᵀ.
        ridge: λ′ > 0.

    Returns:
        float array of shape (m,): y on φ, µ + V u elsewhere.
    """
    k = V.shape[1]
    vp = V[items]
    u = np.linalg.solve(ridge * np.eye(k) + vp.T @ vp, vp.T @ (ratings - mu[items]))
    r = mu + V @ u
    r[items] = ratings
    return r


def _check_public(public_ratings: sp.spmatrix | sp.sparray, rank: int) -> sp.csr_matrix:
    if not sp.issparse(public_ratings):
        raise ValueError(
            "`public_ratings` must be a scipy.sparse matrix of shape (n_public_users, n_items)"
        )
    csr = as_csr(public_ratings)
    n, m = csr.shape
    if n < 1 or m < 1:
        raise ValueError(f"`public_ratings` must be non-empty, got shape {csr.shape}")
    if not np.all(np.isfinite(csr.data)):
        raise ValueError("`public_ratings` must hold finite ratings")
    if not 1 <= rank <= min(n, m):
        raise ValueError(
            f"`rank` must be in [1, min(n_public_users, n_items)] = [1, {min(n, m)}], got {rank!r}"
        )
    return csr


def public_ratings_matrix(
    public: Mapping[str, Payload], n_items: int | None = None
) -> sp.csr_matrix:
    """Stack the public users' openly shared ratings into the matrix `fit_public_model` takes.

    Args:
        public: user id → her `SparsePayload` (``Observations.public``); rows follow the
            mapping's order (user-id order there, the order the server stacks them in).
        n_items: m; None takes the payloads' common `dim`.

    Returns:
        CSR of shape (len(public), m), float64, one stored entry per shared rating.

    Raises:
        ValidationError: ``public[<id>]`` for a payload that is not a well-formed sparse rating
            vector of dimension m; ``public`` when the mapping is empty and m is not given.
    """
    if n_items is None:
        dims = {p.dim for p in public.values() if isinstance(p, SparsePayload)}
        if len(dims) > 1:
            raise ValidationError("public", f"payload dims disagree: {sorted(dims)}")
        if not dims:
            raise ValidationError("public", "no public ratings to take n_items from")
        n_items = dims.pop()
    idx, val, counts = [], [], [0]
    for uid, payload in public.items():
        field = f"public[{uid!r}]"
        if not isinstance(payload, SparsePayload):
            raise ValidationError(field, f"expected a SparsePayload, got {type(payload).__name__}")
        i = np.asarray(payload.indices, dtype=np.int64)
        v = np.asarray(payload.values, dtype=np.float64)
        if payload.dim != n_items or i.ndim != 1 or i.shape != v.shape:
            raise ValidationError(
                field,
                f"shape mismatch (dim {payload.dim}, {i.shape} indices, "
                f"{v.shape} values, n_items {n_items})",
            )
        if i.size and (i[0] < 0 or i[-1] >= n_items or np.any(np.diff(i) <= 0)):
            raise ValidationError(
                f"{field}.indices", f"must be strictly increasing in [0, {n_items})"
            )
        if not np.all(np.isfinite(v)):
            raise ValidationError(f"{field}.values", "must be finite")
        idx.append(i)
        val.append(v)
        counts.append(i.size)
    indptr = np.cumsum(counts).astype(np.int64)
    return sp.csr_matrix(
        (
            np.concatenate(val) if val else np.zeros(0),
            np.concatenate(idx) if idx else np.zeros(0, np.int64),
            indptr,
        ),
        shape=(len(counts) - 1, n_items),
    )


def _item_means(csr: sp.csr_matrix) -> FloatArray:
    counts = np.diff(csr.tocsc().indptr)
    sums = np.asarray(csr.sum(axis=0)).ravel()
    global_mean = float(csr.data.mean()) if csr.nnz else 0.0
    mu: FloatArray = np.where(counts > 0, sums / np.maximum(counts, 1), global_mean)
    return mu


def public_item_means(public_ratings: sp.spmatrix | sp.sparray) -> FloatArray:
    """µ of `fit_public_model`: item means of the observed public ratings (global mean for items
    no public user rated). The same numbers, bit for bit, without fitting V.

    Raises:
        ValueError: `public_ratings` is not a non-empty, finite sparse matrix.
    """
    return _item_means(_check_public(public_ratings, 1))


def _rows(csr: sp.csr_matrix) -> list[tuple[IntArray, FloatArray]]:
    return [
        (csr.indices[a:b].astype(np.int64), csr.data[a:b])
        for a, b in zip(csr.indptr[:-1], csr.indptr[1:], strict=True)
    ]


SPECTRA = ("covariance", "trace-norm")


def spectral_factor(
    eigvals: FloatArray,
    eigvecs: FloatArray,
    n: float,
    *,
    spectrum: str = "covariance",
    ridge: float = 1.0,
) -> FloatArray:
    """V from the leading eigenpairs of a second-moment sum M = Σ_i w_i c_i c_iᵀ (module
    docstring), over n = Σ_i w_i users.

    Args:
        eigvals: the k leading eigenvalues c_k of M (any order; negatives from rounding count
            as 0).
        eigvecs: float array of shape (m, k), the matching unit eigenvectors q_k as columns.
        n: the (weighted) number of users behind M.
        spectrum: "covariance" (s_k = c_k/n) or "trace-norm" (s_k = max(0, √(c_k/√(nm)) − λ′),
            Xin & Jaakkola Eq. (3)).
        ridge: λ′ (used by "trace-norm" only).

    Returns:
        V = Q diag(√s_k), shape (m, k), columns in decreasing s_k order.
    """
    if spectrum not in SPECTRA:
        raise ValueError(f"`spectrum` must be one of {SPECTRA}, got {spectrum!r}")
    c = np.clip(np.asarray(eigvals, dtype=np.float64), 0.0, None)
    if spectrum == "covariance":
        s = c / n
    else:
        s = np.clip(np.sqrt(c / np.sqrt(n * eigvecs.shape[0])) - ridge, 0.0, None)
    order = np.argsort(-s, kind="stable")
    factor: FloatArray = eigvecs[:, order] * np.sqrt(s[order])
    return factor


def _factor(centred: FloatArray, rank: int, spectrum: str, ridge: float) -> FloatArray:
    """`spectral_factor` of M = CᵀC from the SVD of the rows C (cheap when n < m)."""
    _, s, wt = np.linalg.svd(centred, full_matrices=False)
    return spectral_factor(
        s[:rank] ** 2, wt[:rank].T, centred.shape[0], spectrum=spectrum, ridge=ridge
    )


def fit_public_model(
    public_ratings: sp.spmatrix | sp.sparray,
    rank: int,
    *,
    ridge: float = 1.0,
    n_iter: int = 5,
    spectrum: str = "covariance",
) -> tuple[FloatArray, FloatArray]:
    """(µ, V) from the public users' ratings (see the module docstring).

    Args:
        public_ratings: sparse (n_public, m) matrix; stored entries are observed ratings.
        rank: k, the number of factors.
        ridge: λ′ used to complete the public users in the EM rounds.
        n_iter: EM rounds (0 = one SVD of the zero-filled centred matrix).
        spectrum: "covariance" or "trace-norm" (`spectral_factor`).

    Returns:
        mu: float array of shape (m,); V: float array of shape (m, k).

    Raises:
        ValueError: naming the offending argument.
    """
    csr = _check_public(public_ratings, rank)
    if not ridge > 0:
        raise ValueError(f"`ridge` must be > 0, got {ridge!r}")
    if n_iter < 0:
        raise ValueError(f"`n_iter` must be >= 0, got {n_iter!r}")
    n, m = csr.shape
    mu = _item_means(csr)
    rows = _rows(csr)
    centred = np.zeros((n, m))
    for i, (items, ratings) in enumerate(rows):
        centred[i, items] = ratings - mu[items]
    V = _factor(centred, rank, spectrum, ridge)
    for _ in range(n_iter):
        for i, (items, ratings) in enumerate(rows):
            centred[i] = complete_vector(items, ratings, mu, V, ridge) - mu
        V = _factor(centred, rank, spectrum, ridge)
    return mu, V


def estimate_shared_h(
    public_ratings: sp.spmatrix | sp.sparray, mu: FloatArray, V: FloatArray, ridge: float = 1.0
) -> float:
    """Shared PMC scale h = mean over public users of mean_j |r_j − µ_j| (Xin & Jaakkola Sec. 4).

    "To remove this information altogether, we could use the same h for all users and estimate
    it based on public users": each public user's vector is completed with Eq. (4) and her
    Theorem 4.2 scale h_i = ‖r_i − µ‖₁/m is averaged.
    """
    csr = _check_public(public_ratings, 1)
    hs = [
        np.abs(complete_vector(items, ratings, mu, V, ridge) - mu).mean()
        for items, ratings in _rows(csr)
    ]
    return float(np.mean(hs))


__all__ = [
    "SPECTRA",
    "complete_vector",
    "estimate_shared_h",
    "fit_public_model",
    "public_item_means",
    "public_ratings_matrix",
    "spectral_factor",
]
