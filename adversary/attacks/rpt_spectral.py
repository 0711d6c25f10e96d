"""Spectral filtering of RPT releases (Kargupta, Datta, Wang, Sivakumar, ICDM 2003).

``rpt_spectral``: the eigenvalues of the covariance of pure noise are bounded by the
Marchenko–Pastur edge λ₊ = s²(1 + √(m/n))²; eigenvectors of the disguised covariance above it
span the signal, and each user's vector is projected onto that subspace. The observation model
and the empty-cell conventions are in `rpt_matrix`; the Bayes estimate (`rpt_bayes`) starts from
the same basis (`spectral_basis`, `random_effects`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from threadpoolctl import threadpool_limits

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, per_user_from_flat
from privrec.adversary.attacks.rpt_matrix import (
    DisguisedMatrix,
    Kernels,
    cell_dots,
    check_kernels,
    disguised_matrix,
    feasible_genuine,
    posterior_from_sums,
    precision_part,
    quad_form,
    side_update,
    sparse_dot,
)
from privrec.adversary.observations import Observations
from privrec.shared.types import FloatArray


@dataclasses.dataclass(frozen=True)
class SpectralBasis:
    """The signal subspace found by spectral filtering.

    Attributes:
        vectors: float array of shape (m, k), the kept eigenvectors (largest first) mapped back
            to item space, D^(-1/2)v: a basis of the signal's item loadings.
        eigenvalues: float array of shape (k,), their eigenvalues.
        edge: the Marchenko–Pastur upper edge λ₊ used as the noise bound.
        noise_var: s², the assumed noise variance per matrix entry.
        n_above_edge: how many of the top max_rank + 1 eigenvalues exceeded λ₊ (so a value of
            max_rank + 1 means "more than max_rank"); k = min(this, max_rank), at least 1.
    """

    vectors: FloatArray
    eigenvalues: FloatArray
    edge: float
    noise_var: float
    n_above_edge: int


def spectral_basis(
    dm: DisguisedMatrix, max_rank: int, *, mask_noise: bool = True, method: Kernels = "fast"
) -> SpectralBasis:
    """Eigenvectors of the disguised covariance above the random-matrix noise bound.

    C = Ỹᵀ Ỹ / n with Ỹ = U′ D^(-1/2), empty = 0, D = diag(ρ_j) the column fill densities;
    uncentred (z-scores are centred per user and the noise has zero mean, so the item-mean
    direction is signal). The column scaling makes the noise variance per entry the same in every
    column, E[σ²]·ρ_j/ρ_j = E[σ²] = σ_max²/3, and keeps popular items from dominating the basis.
    For an n × m matrix of i.i.d. noise of variance s², the eigenvalues of its covariance lie
    below the Marchenko–Pastur edge λ₊ = s²(1 + √(m/n))² (Kargupta et al. 2003: λ_max =
    σ²(1 + 1/√Q)², Q = n/m). Eigenvectors above λ₊ are kept, at most `max_rank`.

    With `mask_noise` (the default), s² also counts the sparsity mask: a matrix whose rows hold
    the z-scores of only the rated items is not low rank, and the part of each genuine z-score
    that the low-rank structure does not explain scatters like noise. Its variance is at most
    the z-scores' own, 1 (Procedure 1 standardises them), on the genuine share φ of the filled
    cells, so s² = σ_max²/3 + (1 − ρ)·φ. Kargupta's bound alone (`mask_noise=False`, for
    complete data) keeps hundreds of mask-noise directions on sparse rating data.

    Args:
        dm: the disguised matrix.
        max_rank: cap on the number of kept components.
        mask_noise: add the mask term to the noise variance (see above).
        method: "reference" runs Lanczos on x ↦ ỸᵀỸx/n (a dense eigh when m is small);
            "fast" also takes the dense eigh of C, built once by BLAS (`dense_gram`), whenever
            `gram_is_cheaper` says so. The eigenpairs agree to rounding (both converge to
            machine precision); the outputs built on them are tested equal to 1e-8.
    """
    check_kernels(method)
    y = dm.matrix
    n, m = y.shape
    density = np.bincount(y.indices, minlength=m) / n
    scale = 1.0 / np.sqrt(np.maximum(density, 1.0 / n))
    noise_var = dm.sigma_max**2 / 3.0
    if mask_noise:
        g_lo, g_hi = feasible_genuine(dm)
        share = float(np.sum(g_lo + g_hi) / (2.0 * y.nnz))
        noise_var += (1.0 - y.nnz / (n * m)) * share
    edge = noise_var * (1.0 + math.sqrt(m / n)) ** 2
    # Only the top max_rank + 1 eigenpairs are needed.
    top = min(max_rank + 1, m)
    if method == "fast" and gram_is_cheaper(n, m, y.nnz):
        # BLAS on one thread: its sums, and so the basis, must not depend on the thread count
        # (the live adversary node and a replay in another process agree bit for bit)
        with threadpool_limits(limits=1, user_api="blas"):
            gram = dense_gram(y, scale) / n
            w, v = scipy.linalg.eigh(gram, subset_by_index=(m - top, m - 1))
    else:
        w, v = _top_eigenpairs((y @ sp.diags(scale)).tocsr(), top)  # CSR already: itself
    order = np.argsort(w)[::-1]
    w, v = w[order], v[:, order]
    above = int(np.sum(w > edge))
    k = max(1, min(above, max_rank))
    # If z-scores have second moments W Wᵀ, the scaled covariance is ≈ D^(1/2) W Wᵀ D^(1/2) off
    # the diagonal, so its eigenvectors span D^(1/2) W: map them back with D^(-1/2).
    loadings = v[:, :k] * scale[:, None]
    return SpectralBasis(np.ascontiguousarray(loadings), w[:k].copy(), edge, noise_var, above)


def _top_eigenpairs(ys: sp.csr_matrix, top: int) -> tuple[FloatArray, FloatArray]:
    """The `top` largest eigenpairs of ỸᵀỸ/n, the reference path: Lanczos on x ↦ ỸᵀỸx/n
    (never forming the m × m matrix) unless m is small. A fixed start vector keeps it
    deterministic."""
    n, m = ys.shape
    if m <= 4 * top:
        return scipy.linalg.eigh((ys.T @ ys).toarray() / n, subset_by_index=(m - top, m - 1))
    # Ỹᵀ as a CSR of its own, made once: the same sums in the same order as the CSC view
    # `ys.T` (each item's users ascending), without a transpose object per product
    yt = ys.T.tocsr()
    op = sla.LinearOperator((m, m), matvec=lambda x: yt @ (ys @ x) / n, dtype=np.float64)
    return sla.eigsh(op, k=top, which="LA", v0=np.ones(m))


#: Bytes of one dense row block in `dense_gram` (16 MiB: 2,097 rows of 1,000 items).
GRAM_BLOCK_BYTES = 1 << 24


def gram_is_cheaper(n: int, m: int, nnz: int) -> bool:
    """Whether the dense Gram matrix and its eigh cost less than Lanczos on the n × m matrix.

    Work in multiply-adds of a sparse mat-vec (measured on a 2-core machine, BLAS on one
    thread; docs/decisions/compute.md, "rpt_spectral's fast path"): ARPACK takes ≈ 200 products
    with ỸᵀỸ (2·nnz each) for the top 21 eigenpairs; `dense_gram`'s n·m² BLAS-3 multiply-adds
    cost ≈ 1/40 of one each, and the m × m eigh ≈ m³/15. So the Gram matrix wins when users
    outnumber items (synthetic 10,000 × 1,000: 0.36 s against 0.85 s) and loses on ML-100K's
    943 × 1,682 and ML-1M's 6,040 × 3,706, where the fast path stays on Lanczos.
    """
    return n * m * m / 40 + m**3 / 15 < 400 * nnz


def dense_gram(y: sp.csr_matrix, scale: FloatArray) -> FloatArray:
    """ỸᵀỸ for Ỹ = Y·diag(scale), Y sparse, summed over dense blocks of rows
    (`GRAM_BLOCK_BYTES` each).

    Each block is made dense and its columns scaled (the same products y_uj·scale_j as the
    sparse Ỹ's entries); numpy computes its BᵀB with BLAS's symmetric rank-k update (half of
    the n·m² multiply-adds, the result exactly symmetric). The blocks bound the memory
    whatever n.
    """
    n, m = y.shape
    rows = max(1, GRAM_BLOCK_BYTES // (8 * m))
    gram = np.zeros((m, m))
    for start in range(0, n, rows):
        block = y[start : start + rows].toarray()
        block *= scale
        gram += block.T @ block
    return gram


def ridge_fit(
    dm: DisguisedMatrix,
    basis: FloatArray,
    weights: FloatArray,
    prior_var: FloatArray,
    *,
    leverage: bool = False,
    method: Kernels = "fast",
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per-user weighted ridge regression of the filled values on a fixed item basis.

    Solves, for every user at once, â_u = P_u⁻¹ Σ_j w_uj v_j y′_uj with
    P_u = Σ_j w_uj v_j v_jᵀ + diag(1/prior_var): the posterior mean of a_u under
    y′_uj = v_jᵀ a_u + e_uj, e_uj ~ N(0, 1/w_uj), a_u ~ N(0, diag(prior_var)).

    Args:
        dm: the disguised matrix (n × m).
        basis: float array (m, k), rows v_j.
        weights: float array (nnz,), w_uj ≥ 0 in CSR order (inverse noise variances).
        prior_var: float array (k,), prior variances of the coefficients.
        leverage: also return h_uj = w_uj v_jᵀ P_u⁻¹ v_j for leave-one-out predictions.
        method: "fast" (compiled kernels) or "reference" (numpy), equal to rounding.

    Returns:
        (coefficients (n, k), posterior covariances P_u⁻¹ (n, k, k), leverages (nnz,) or empty).
    """
    y = dm.matrix
    wmat = sp.csr_matrix((weights, y.indices, y.indptr), shape=y.shape)
    wy = sp.csr_matrix((weights * y.data, y.indices, y.indptr), shape=y.shape)
    coef, cov = side_update(wmat, wy, basis, None, prior_var, method=method)
    lev = (
        weights * quad_form(basis, y.indices, cov, dm.rows, method=method)
        if leverage
        else np.empty(0)
    )
    return coef, cov, lev


def random_effects(
    dm: DisguisedMatrix,
    basis: FloatArray,
    weights: FloatArray,
    n_iter: int = 6,
    *,
    method: Kernels = "fast",
) -> tuple[FloatArray, FloatArray]:
    """Coefficients and their prior variances Λ by EM: Λ_i ← mean_u E[a_ui² | data].

    The basis and the weights are fixed, so the fast path sums each user's precision
    Σ_j w_uj v_j v_jᵀ once and only re-adds diag(1/Λ) per iteration (the reference path
    recomputes the same sums in every `ridge_fit`).
    """
    check_kernels(method)
    prior_var = np.full(basis.shape[1], float(basis.shape[0]))
    coef = np.zeros((dm.n_users, basis.shape[1]))
    solve: Callable[[FloatArray], tuple[FloatArray, FloatArray]]
    if method == "fast":
        y = dm.matrix
        wmat = sp.csr_matrix((weights, y.indices, y.indptr), shape=y.shape)
        wy = sp.csr_matrix((weights * y.data, y.indices, y.indptr), shape=y.shape)
        sums = precision_part(wmat, basis, None, method=method)
        rhs = sparse_dot(wy, basis)
        solve = functools.partial(posterior_from_sums, sums, rhs, method=method)
    else:
        solve = functools.partial(_ridge_posterior, dm, basis, weights)
    for _ in range(n_iter):
        coef, cov = solve(prior_var)
        prior_var = np.maximum(np.mean(coef**2 + np.diagonal(cov, axis1=1, axis2=2), axis=0), 1e-8)
    return coef, prior_var


def _ridge_posterior(
    dm: DisguisedMatrix, basis: FloatArray, weights: FloatArray, prior_var: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """`ridge_fit` on the reference path, without leverages."""
    coef, cov, _ = ridge_fit(dm, basis, weights, prior_var, method="reference")
    return coef, cov


def _predict(
    dm: DisguisedMatrix, basis: FloatArray, coef: FloatArray, method: Kernels = "fast"
) -> FloatArray:
    """v_jᵀ a_u at every filled cell, in CSR order."""
    return cell_dots(basis, dm.matrix.indices, coef, dm.rows, method=method)


class SpectralFiltering(Attack):
    """Spectral filtering of the disguised matrix (Kargupta et al. 2003), for sparse RPT data.

    1. Eigen-decompose the column-scaled covariance of U′ (empty = 0) and keep the
       eigenvectors whose eigenvalues exceed the Marchenko–Pastur edge for the noise variance
       σ_max²/3, plus the sparsity-mask term (see `spectral_basis`); map them back to item
       loadings V_k.
    2. Project each user's FILLED coordinates onto span(V_k): a per-user least-squares fit with
       noise variance σ_max²/3 per cell and a Wiener ridge 1/Λ_i per component, the prior
       variances Λ estimated by EM over all users (`random_effects`). With complete data and
       no ridge this is Kargupta's X̂ = U′VVᵀ.
    3. ẑ_uj = v_jᵀ â_u at every filled cell.

    It treats fakes as genuine cells (they pull the fit towards 0) and uses a single noise level
    for all users; `BayesReconstruction` models both.

    Args:
        max_rank: cap on the number of kept components.
        method: "fast" (compiled kernels, the default) or "reference" (the numpy path the fast
            one is checked and benchmarked against; same output to rounding).

    References:
        Kargupta, Datta, Wang, Sivakumar. "On the privacy preserving properties of random data
        perturbation techniques", ICDM 2003 (spectral filtering, eigenvalue bounds of the noise
        covariance).
    """

    name = "rpt_spectral"
    knowledge = "disguised profiles + public σ_max, β_max"
    applies_to = ("rpt",)

    def __init__(self, max_rank: int = 20, method: Kernels = "fast") -> None:
        if not (isinstance(max_rank, int) and max_rank >= 1):
            raise ValueError(f"`max_rank` must be an int >= 1, got {max_rank!r}")
        check_kernels(method)
        self.max_rank = max_rank
        self.method: Kernels = method

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        basis = spectral_basis(dm, self.max_rank, method=self.method)
        weights = np.full(dm.matrix.nnz, 3.0 / dm.sigma_max**2)
        coef, _ = random_effects(dm, basis.vectors, weights, method=self.method)
        z_hat = _predict(dm, basis.vectors, coef, self.method)
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.Z_HAT,
            knowledge=self.knowledge,
            per_user=per_user_from_flat(dm.user_ids, dm.matrix.indptr, dm.matrix.indices, z_hat),
            diagnostics={
                "rank": float(basis.vectors.shape[1]),
                "mp_edge": basis.edge,
                "n_above_edge": float(basis.n_above_edge),
                "noise_var_per_entry": basis.noise_var,
            },
        )


__all__ = [
    "SpectralBasis",
    "SpectralFiltering",
    "dense_gram",
    "gram_is_cheaper",
    "random_effects",
    "ridge_fit",
    "spectral_basis",
]
