"""Reconstruction of users' true z-scores from RPT releases (Bilge 2013, Procedure 1).

What the server observes (Bilge §2.2.1, note §1.1): for every user u a sparse vector whose filled
cells are her g genuine z-scores plus noise, z′ = z + r, and F = ⌊e·β/100⌋ fakes, z′ = r, at empty
cells chosen uniformly at random; r is N(0, σ²) or U[−√3σ, √3σ] (a fair coin) with σ ~ U(0, σ_max]
and β ~ U{1..β_max} drawn privately per user. The adversary knows the protocol and the public
σ_max, β_max. Two attacks estimate z at each filled cell:

* ``rpt_spectral`` — spectral filtering (Kargupta, Datta, Wang, Sivakumar, ICDM 2003): the
  eigenvalues of the covariance of pure noise are bounded by the Marchenko–Pastur edge
  λ₊ = s²(1 + √(m/n))²; eigenvectors of the disguised covariance above it span the signal, and
  each user's vector is projected onto that subspace.
* ``rpt_bayes`` — Bayes-estimate reconstruction (BE-DR of Huang, Du & Chen, SIGMOD 2005: the
  posterior mean of x given y = x + r under a Gaussian prior whose mean and low-rank covariance
  are estimated from the disguised data), extended to what RPT actually does: per-user unknown
  σ (uniform prior, grid posterior), the noise-shape coin (Gaussian or uniform, where the
  posterior mean is a truncated-normal mean), fakes (a two-component genuine/fake mixture), and
  the known unit variance of z-scores.

Empty cells (a choice; Bilge is silent). The covariance uses the server's own convention,
empty = 0, i.e. "a z-score at the user's mean" as in Bilge Eq 2.4, with columns scaled by
1/√(fill density) so that the noise, which lives only on filled cells, has the same variance
E[σ²] = σ_max²/3 (σ ~ U(0, σ_max]) per entry in every column (`spectral_basis`). Every fit of a
user's coefficients, in contrast, treats empty cells as MISSING and uses only her filled
coordinates: projecting the zero-filled row would shrink every estimate towards 0 by roughly her
fill density (≈ 6 % on ML-100K). Estimates are produced on filled cells only; the referee
scores them on the genuine ones (`sim.referee_attacks`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as sla
import scipy.special as sc

from privrec.adversary.attacks.base import Attack, AttackOutput, per_user_from_flat
from privrec.adversary.observations import Observations
from privrec.shared.errors import ValidationError
from privrec.shared.mechanisms.base import SparsePayload
from privrec.shared.types import FloatArray, IntArray

logger = logging.getLogger(__name__)

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT3 = math.sqrt(3.0)
_TINY = 1e-300


# ======================================================================== the observed matrix
@dataclasses.dataclass(frozen=True)
class DisguisedMatrix:
    """The server's disguised matrix U′ (Bilge §2.2.1) as CSR, with the public parameters.

    Attributes:
        user_ids: row order, the users whose profile releases were observed.
        matrix: CSR of shape (n, m); stored entries are exactly the filled cells (genuine and
            fake; explicit zeros are kept), sorted within each row.
        sigma_max: public bound σ_max.
        beta_max: public bound β_max (percent).
    """

    user_ids: list[str]
    matrix: sp.csr_matrix
    sigma_max: float
    beta_max: int

    @property
    def n_users(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def rows(self) -> IntArray:
        """Row (user) index of every stored entry, in CSR order."""
        return np.repeat(np.arange(self.n_users), np.diff(self.matrix.indptr)).astype(np.int64)

    @property
    def filled(self) -> IntArray:
        """f_u, the number of filled cells of each user."""
        return np.diff(self.matrix.indptr).astype(np.int64)


def disguised_matrix(observations: Observations) -> DisguisedMatrix:
    """Stack the observed RPT profile releases into a `DisguisedMatrix`.

    Raises:
        ValidationError: a missing or invalid public parameter, or a payload that is not a
            well-formed RPT release of the run's dimension (naming the user).
    """
    params = observations.public_params
    try:
        sigma_max = float(params["sigma_max"])
        beta_max = int(params["beta_max"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(
            "public_params", f"need sigma_max and beta_max, got {params!r}"
        ) from exc
    if not (math.isfinite(sigma_max) and sigma_max > 0):
        raise ValidationError("public_params.sigma_max", f"must be > 0, got {sigma_max!r}")
    if not 0 <= beta_max <= 100:
        raise ValidationError("public_params.beta_max", f"must be in [0, 100], got {beta_max!r}")
    m = observations.n_items
    user_ids, idx, val, counts = [], [], [], []
    for uid, payload in observations.profiles.items():
        field = f"profiles[{uid!r}]"
        if not isinstance(payload, SparsePayload):
            raise ValidationError(field, f"expected a SparsePayload, got {type(payload).__name__}")
        i = np.asarray(payload.indices, dtype=np.int64)
        v = np.asarray(payload.values, dtype=np.float64)
        if payload.dim != m or i.shape != v.shape or i.ndim != 1:
            raise ValidationError(field, f"shape mismatch (dim {payload.dim}, n_items {m})")
        if i.size and (i[0] < 0 or i[-1] >= m or np.any(np.diff(i) <= 0)):
            raise ValidationError(f"{field}.indices", "must be strictly increasing in [0, m)")
        if not np.all(np.isfinite(v)):
            raise ValidationError(f"{field}.values", "must be finite")
        user_ids.append(uid)
        idx.append(i)
        val.append(v)
        counts.append(i.size)
    if not user_ids:
        raise ValidationError("profiles", "no profile releases observed")
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    mat = sp.csr_matrix(
        (np.concatenate(val), np.concatenate(idx), indptr), shape=(len(user_ids), m)
    )
    return DisguisedMatrix(user_ids, mat, sigma_max, beta_max)


def feasible_genuine(dm: DisguisedMatrix) -> tuple[FloatArray, FloatArray]:
    """Range of g_u consistent with f_u = g + ⌊(m − g)·β/100⌋ and β ∈ {1, …, β_max}.

    From (m − g)b − 1 < ⌊(m − g)b⌋ ≤ (m − g)b with b = β/100:
    (f − mb)/(1 − b) ≤ g < (f + 1 − mb)/(1 − b). The bound at β = β_max is the lower one and at
    β = 1 the upper one; at least one rating is genuine. (Bilge §3.1.1 reasons the same way
    about guessing the genuine count.)

    Returns:
        (lower, upper) float arrays of shape (n,).
    """
    f = dm.filled.astype(np.float64)
    m = dm.n_items
    if dm.beta_max == 0:
        return f, f
    b_hi, b_lo = dm.beta_max / 100.0, 0.01
    lo = np.clip((f - m * b_hi) / (1.0 - b_hi) if b_hi < 1 else 1.0, 1.0, f)
    hi = np.clip((f + 1.0 - m * b_lo) / (1.0 - b_lo), lo, f)
    return lo, hi


# ======================================================================== spectral filtering
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


def spectral_basis(dm: DisguisedMatrix, max_rank: int, *, mask_noise: bool = True) -> SpectralBasis:
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
    """
    y = dm.matrix
    n, m = y.shape
    density = np.bincount(y.indices, minlength=m) / n
    scale = 1.0 / np.sqrt(np.maximum(density, 1.0 / n))
    ys = y @ sp.diags(scale)
    noise_var = dm.sigma_max**2 / 3.0
    if mask_noise:
        g_lo, g_hi = feasible_genuine(dm)
        share = float(np.sum(g_lo + g_hi) / (2.0 * y.nnz))
        noise_var += (1.0 - y.nnz / (n * m)) * share
    edge = noise_var * (1.0 + math.sqrt(m / n)) ** 2
    # Only the top max_rank + 1 eigenpairs are needed: Lanczos on x ↦ ỸᵀỸx/n (never forming
    # the m × m matrix) unless m is small. A fixed start vector keeps it deterministic.
    top = min(max_rank + 1, m)
    if m <= 4 * top:
        w, v = scipy.linalg.eigh((ys.T @ ys).toarray() / n, subset_by_index=(m - top, m - 1))
    else:
        op = sla.LinearOperator((m, m), matvec=lambda x: ys.T @ (ys @ x) / n, dtype=np.float64)
        w, v = sla.eigsh(op, k=top, which="LA", v0=np.ones(m))
    order = np.argsort(w)[::-1]
    w, v = w[order], v[:, order]
    above = int(np.sum(w > edge))
    k = max(1, min(above, max_rank))
    # If z-scores have second moments W Wᵀ, the scaled covariance is ≈ D^(1/2) W Wᵀ D^(1/2) off
    # the diagonal, so its eigenvectors span D^(1/2) W: map them back with D^(-1/2).
    loadings = v[:, :k] * scale[:, None]
    return SpectralBasis(np.ascontiguousarray(loadings), w[:k].copy(), edge, noise_var, above)


def _side_update(
    wmat: sp.csr_matrix,
    wy: sp.csr_matrix,
    other: FloatArray,
    other_cov: FloatArray | None,
    prior_var: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Gaussian posterior of one side's factors given the other side's (rows of `wmat`).

    For row p: precision P_p = diag(1/prior_var) + Σ_q w_pq E[b_q b_qᵀ], mean
    P_p⁻¹ Σ_q w_pq y_pq E[b_q], with E[b bᵀ] = b̂b̂ᵀ + Cov(b) (variational Bayes matrix
    factorisation; `other_cov` None means the other side is fixed).
    """
    p, q = wmat.shape
    k = other.shape[1]
    second = other[:, :, None] * other[:, None, :]
    if other_cov is not None:
        second = second + other_cov
    prec = np.asarray(wmat @ second.reshape(q, k * k)).reshape(p, k, k)
    prec[:, np.arange(k), np.arange(k)] += 1.0 / prior_var
    cov = np.linalg.inv(prec)
    return np.einsum("pij,pj->pi", cov, np.asarray(wy @ other)), cov


def _quad_form(
    vecs: FloatArray, vec_idx: IntArray, covs: FloatArray, cov_idx: IntArray
) -> FloatArray:
    """x_cᵀ S_c x_c, x_c = vecs[vec_idx[c]], S_c = covs[cov_idx[c]], in memory-bounded chunks."""
    k = vecs.shape[1]
    out = np.empty(vec_idx.size)
    step = max(1, 4_000_000 // (k * k))
    for s in range(0, vec_idx.size, step):
        x = vecs[vec_idx[s : s + step]]
        out[s : s + step] = np.sum(
            (covs[cov_idx[s : s + step]] @ x[:, :, None])[:, :, 0] * x, axis=1
        )
    return out


def ridge_fit(
    dm: DisguisedMatrix,
    basis: FloatArray,
    weights: FloatArray,
    prior_var: FloatArray,
    *,
    leverage: bool = False,
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

    Returns:
        (coefficients (n, k), posterior covariances P_u⁻¹ (n, k, k), leverages (nnz,) or empty).
    """
    y = dm.matrix
    wmat = sp.csr_matrix((weights, y.indices, y.indptr), shape=y.shape)
    wy = sp.csr_matrix((weights * y.data, y.indices, y.indptr), shape=y.shape)
    coef, cov = _side_update(wmat, wy, basis, None, prior_var)
    lev = weights * _quad_form(basis, y.indices, cov, dm.rows) if leverage else np.empty(0)
    return coef, cov, lev


def _random_effects(
    dm: DisguisedMatrix, basis: FloatArray, weights: FloatArray, n_iter: int = 6
) -> tuple[FloatArray, FloatArray]:
    """Coefficients and their prior variances Λ by EM: Λ_i ← mean_u E[a_ui² | data]."""
    prior_var = np.full(basis.shape[1], float(basis.shape[0]))
    coef = np.zeros((dm.n_users, basis.shape[1]))
    for _ in range(n_iter):
        coef, cov, _ = ridge_fit(dm, basis, weights, prior_var)
        prior_var = np.maximum(np.mean(coef**2 + np.diagonal(cov, axis1=1, axis2=2), axis=0), 1e-8)
    return coef, prior_var


def _predict(dm: DisguisedMatrix, basis: FloatArray, coef: FloatArray) -> FloatArray:
    """v_jᵀ a_u at every filled cell, in CSR order."""
    return np.einsum("ci,ci->c", basis[dm.matrix.indices], coef[dm.rows])


class SpectralFiltering(Attack):
    """Spectral filtering of the disguised matrix (Kargupta et al. 2003), for sparse RPT data.

    1. Eigen-decompose the column-scaled covariance of U′ (empty = 0) and keep the
       eigenvectors whose eigenvalues exceed the Marchenko–Pastur edge for the noise variance
       σ_max²/3, plus the sparsity-mask term (see `spectral_basis`); map them back to item
       loadings V_k.
    2. Project each user's FILLED coordinates onto span(V_k): a per-user least-squares fit with
       noise variance σ_max²/3 per cell and a Wiener ridge 1/Λ_i per component, the prior
       variances Λ estimated by EM over all users (`_random_effects`). With complete data and
       no ridge this is Kargupta's X̂ = U′VVᵀ.
    3. ẑ_uj = v_jᵀ â_u at every filled cell.

    It treats fakes as genuine cells (they pull the fit towards 0) and uses a single noise level
    for all users; `BayesReconstruction` models both.

    Args:
        max_rank: cap on the number of kept components.

    References:
        Kargupta, Datta, Wang, Sivakumar. "On the privacy preserving properties of random data
        perturbation techniques", ICDM 2003 (spectral filtering, eigenvalue bounds of the noise
        covariance).
    """

    name = "rpt_spectral"
    knowledge = "disguised profiles + public σ_max, β_max"
    applies_to = ("rpt",)

    def __init__(self, max_rank: int = 20) -> None:
        if not (isinstance(max_rank, int) and max_rank >= 1):
            raise ValueError(f"`max_rank` must be an int >= 1, got {max_rank!r}")
        self.max_rank = max_rank

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        basis = spectral_basis(dm, self.max_rank)
        weights = np.full(dm.matrix.nnz, 3.0 / dm.sigma_max**2)
        coef, _ = _random_effects(dm, basis.vectors, weights)
        z_hat = _predict(dm, basis.vectors, coef)
        return AttackOutput(
            attack=self.name,
            kind="z_hat",
            knowledge=self.knowledge,
            per_user=per_user_from_flat(dm.user_ids, dm.matrix.indptr, dm.matrix.indices, z_hat),
            diagnostics={
                "rank": float(basis.vectors.shape[1]),
                "mp_edge": basis.edge,
                "n_above_edge": float(basis.n_above_edge),
                "noise_var_per_entry": basis.noise_var,
            },
        )


# ======================================================================== Bayes estimate
def _log_diff_ndtr(a: FloatArray, b: FloatArray) -> FloatArray:
    """log(Φ(b) − Φ(a)) for a < b, stable in both tails."""
    out = np.empty_like(a)
    lo, hi = b <= 0, a >= 0
    mid = ~(lo | hi)
    la, lb = sc.log_ndtr(a[lo]), sc.log_ndtr(b[lo])
    out[lo] = lb + np.log1p(-np.exp(np.minimum(la - lb, -1e-12)))
    la, lb = sc.log_ndtr(-a[hi]), sc.log_ndtr(-b[hi])
    out[hi] = la + np.log1p(-np.exp(np.minimum(lb - la, -1e-12)))
    out[mid] = np.log(np.maximum(sc.ndtr(b[mid]) - sc.ndtr(a[mid]), _TINY))
    return out


def _cell_terms(
    y: FloatArray, mu: FloatArray, tau2: FloatArray, sigma: float, uniform: bool
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """log L_genuine, log L_fake and E[z | y′, genuine] at one (σ, noise shape) hypothesis.

    Genuine: z ~ N(μ, τ²), y′ = z + r. Fake: y′ = r. Gaussian r ~ N(0, σ²): y′ ~ N(μ, τ² + σ²)
    and E[z|y′] = μ + τ²/(τ² + σ²)·(y′ − μ) (Huang et al. 2005, BE-DR). Uniform
    r ~ U[−α, α], α = √3σ: p(y′) = [Φ(b) − Φ(a)]/(2α) with a, b = (y′ ∓ α − μ)/τ, and z given y′
    is N(μ, τ²) truncated to [y′ − α, y′ + α], whose mean is μ + τ·(φ(a) − φ(b))/(Φ(b) − Φ(a)).
    """
    if not uniform:
        s2 = sigma * sigma
        v = tau2 + s2
        lg = -0.5 * (_LOG_2PI + np.log(v)) - (y - mu) ** 2 / (2.0 * v)
        lf = -0.5 * (_LOG_2PI + math.log(s2)) - y * y / (2.0 * s2)
        return lg, lf, mu + tau2 / v * (y - mu)
    alpha = _SQRT3 * sigma
    tau = np.sqrt(tau2)
    a, b = (y - alpha - mu) / tau, (y + alpha - mu) / tau
    log_d = _log_diff_ndtr(a, b)
    log2a = math.log(2.0 * alpha)
    lg = log_d - log2a
    lf = np.where(np.abs(y) <= alpha, -log2a, -np.inf)
    log_phi_a = -0.5 * (a * a + _LOG_2PI)
    log_phi_b = -0.5 * (b * b + _LOG_2PI)
    ratio = np.exp(log_phi_a - log_d) - np.exp(log_phi_b - log_d)
    return lg, lf, mu + tau * ratio


# A prior on which filled cells are genuine: given the current genuine and fake counts per user
# (g_u, F_u), return log prior odds (genuine : fake) for every filled cell in CSR order.
CellPrior = Callable[[DisguisedMatrix, FloatArray, FloatArray], FloatArray]


def count_only_prior(dm: DisguisedMatrix, g: FloatArray, f_fake: FloatArray) -> FloatArray:
    """Prior odds g_u/F_u for every filled cell of u: no item knowledge (Bilge §2.2.1)."""
    return (np.log(g) - np.log(np.maximum(f_fake, _TINY)))[dm.rows]


def _factor_model(
    dm: DisguisedMatrix,
    weights: FloatArray,
    items: FloatArray,
    item_var: FloatArray,
    n_sweeps: int,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Variational Bayes matrix factorisation of the filled values, z_uj ≈ a_uᵀ b_j.

    Priors a_u ~ N(0, I), b_j ~ N(0, diag(item_var)) (item_var re-estimated by EM); weights
    w_uj are the inverse noise variances. Starts from the item factors `items`, alternates
    item and user updates `n_sweeps` times, and returns the leave-one-out prediction
    y′ − (y′ − μ)/(1 − h) at every filled cell, where h = w·(b_jᵀ Cov(a_u) b_j + a_uᵀ Cov(b_j) a_u)
    is the cell's leverage on its own prediction, so that a cell's own noise does not enter the
    prior mean it is later compared with.

    Returns:
        (μ_loo (nnz,), its posterior variance (nnz,), item factors (m, k), item_var (k,)).
    """
    y = dm.matrix
    rows, cols = dm.rows, y.indices
    wmat = sp.csr_matrix((weights, cols, y.indptr), shape=y.shape)
    wy = sp.csr_matrix((weights * y.data, cols, y.indptr), shape=y.shape)
    wmat_t, wy_t = wmat.T.tocsr(), wy.T.tocsr()
    ones = np.ones(items.shape[1])
    users, user_cov = _side_update(wmat, wy, items, None, ones)
    item_cov: FloatArray | None = None
    for _ in range(n_sweeps):
        items, item_cov = _side_update(wmat_t, wy_t, users, user_cov, item_var)
        item_var = np.maximum(
            np.mean(items**2 + np.diagonal(item_cov, axis1=1, axis2=2), axis=0), 1e-8
        )
        users, user_cov = _side_update(wmat, wy, items, item_cov, ones)
    mu = np.einsum("ci,ci->c", users[rows], items[cols])
    var = _quad_form(items, cols, user_cov, rows)
    if item_cov is not None:
        var += _quad_form(users, rows, item_cov, cols)
    keep = 1.0 / np.maximum(1.0 - weights * var, 0.05)
    return y.data - (y.data - mu) * keep, var * keep, items, item_var


@dataclasses.dataclass(frozen=True)
class RptPosterior:
    """The fitted joint model of one disguised matrix (all per-cell arrays in CSR order).

    Attributes:
        z_hat: E[z | data, cell genuine] per filled cell.
        log_odds: posterior log odds that the cell is genuine.
        mu: leave-one-out low-rank prior mean of z per filled cell.
        sigma2: posterior mean of σ² per user.
        p_uniform: posterior probability that the user's noise was uniform, per user.
        genuine: estimated number of genuine cells g_u per user.
        tau2: τ₀², the pooled residual variance of z around the low-rank mean.
        rank: number of basis components.
        iterations: EM iterations run.
    """

    z_hat: FloatArray
    log_odds: FloatArray
    mu: FloatArray
    sigma2: FloatArray
    p_uniform: FloatArray
    genuine: FloatArray
    tau2: float
    rank: int
    iterations: int


def fit_rpt_posterior(
    dm: DisguisedMatrix,
    *,
    cell_prior: CellPrior = count_only_prior,
    max_rank: int = 20,
    n_iter: int = 8,
    n_sigma: int = 24,
    n_sweeps: int = 2,
    tau2_min: float = 0.002,
) -> RptPosterior:
    """EM for the joint RPT model: low-rank z-scores, per-user σ and noise shape, and fakes.

    Model of user u's filled cell j (Bilge Procedure 1): with prior probability from
    `cell_prior` it is genuine, y′ = z + r with z ~ N(μ_uj, τ_uj²), μ_uj = a_uᵀb_j; else a fake,
    y′ = r. σ_u has the public prior U(0, σ_max] (a grid of `n_sigma` midpoints), the shape is
    Gaussian or uniform with probability ½ each (the coin), both with variance σ².

    The low-rank part starts from the spectral basis (Kargupta et al. 2003), scaled by its
    EM-estimated coefficient variances, and is refined by variational Bayes matrix
    factorisation (`_factor_model`), which learns item factors from the filled cells instead of
    the zero-filled covariance. Each iteration:
      1. low-rank fit with weights γ_uj/(τ₀,u² + E[σ_u²]) (fakes get little weight); μ_uj is
         taken leave-one-out, so that a cell's own noise does not enter its prior mean, and
         its posterior variance v_uj is kept;
      2. τ² from the unit variance of z-scores (Procedure 1 makes each user's z-scores have
         mean 0 and sample variance exactly 1, so Σ_genuine z² = g − 1): since μ is
         leave-one-out, E[y′μ] = E[zμ] and E[(z − μ)²] = E[z²] − E[2y′μ − μ²], which gives per
         user τ₀,u² = (g_u − 1)/g_u − mean_γ(2y′μ − μ²) − mean_γ(v), shrunk towards the pooled
         value by 10 pseudo-cells and floored at `tau2_min`; τ_uj² = τ₀,u² + v_uj;
      3. E-step: per user, the posterior over (σ, shape) from the likelihood of all her filled
         cells, then per cell the genuine probability γ and E[z | y′, genuine];
      4. g_u = Σ_j γ_uj clipped to the range allowed by β ∈ {1, …, β_max}, F_u = f_u − g_u.

    References:
        Huang, Du, Chen. "Deriving private information from randomized data", SIGMOD 2005
        (Bayes-estimate-based data reconstruction, BE-DR).
        Kargupta, Datta, Wang, Sivakumar, ICDM 2003 (the spectral basis).
    """
    y_mat = dm.matrix
    y = y_mat.data
    rows = dm.rows
    n, nnz = dm.n_users, y_mat.nnz
    f = dm.filled.astype(np.float64)
    basis = spectral_basis(dm, max_rank)
    _, prior_var = _random_effects(dm, basis.vectors, np.full(nnz, 3.0 / dm.sigma_max**2))
    # Scale the basis so that user coefficients have unit prior variance.
    items = basis.vectors * np.sqrt(prior_var)
    item_var = np.mean(items**2, axis=0)

    g_lo, g_hi = feasible_genuine(dm)
    g = 0.5 * (g_lo + g_hi)
    no_fakes = dm.beta_max == 0
    gamma = np.clip(g / f, 0.0, 1.0)[rows]
    sigma2 = np.full(n, dm.sigma_max**2 / 3.0)
    p_unif = np.full(n, 0.5)
    tau2, tau2_u = 1.0, np.ones(n)
    grid = dm.sigma_max * (np.arange(n_sigma) + 0.5) / n_sigma
    hyps = [(s, u) for u in (False, True) for s in grid]
    z_hat = np.zeros(nnz)
    log_odds = np.zeros(nnz)
    mu = np.zeros(nnz)

    for _ in range(n_iter):
        # 1. low-rank prior mean, leave-one-out
        w = gamma / (tau2_u + sigma2)[rows]
        mu, mu_var, items, item_var = _factor_model(dm, w, items, item_var, n_sweeps)
        # 2. residual variance from the unit variance of z-scores
        wsum = np.maximum(np.bincount(rows, gamma, minlength=n), 1e-12)
        cross = np.bincount(rows, gamma * (2.0 * y * mu - mu**2), minlength=n) / wsum
        spread = np.bincount(rows, gamma * mu_var, minlength=n) / wsum
        tau2_u = (g - 1.0) / g - cross - spread
        # Light users' estimates are noisy: shrink towards the pooled value (10 pseudo-cells).
        tau2 = float(np.clip(np.sum(wsum * tau2_u) / np.sum(wsum), tau2_min, 1.0))
        tau2_u = np.clip((wsum * tau2_u + 10.0 * tau2) / (wsum + 10.0), tau2_min, 1.0)
        tau2_arr = tau2_u[rows] + mu_var
        # 3. E-step over the (σ, shape) grid: pass 1 per-user log likelihoods
        log_prior = np.full(nnz, np.inf) if no_fakes else cell_prior(dm, g, f - g)
        lp_g = -np.logaddexp(0.0, -log_prior)  # log ρ
        lp_f = -np.logaddexp(0.0, log_prior)  # log(1 − ρ)
        ll = np.empty((n, len(hyps)))
        for h, (s, unif) in enumerate(hyps):
            lg, lf, _ = _cell_terms(y, mu, tau2_arr, s, unif)
            ll[:, h] = np.bincount(rows, np.logaddexp(lp_g + lg, lp_f + lf), minlength=n)
        post = np.exp(ll - sc.logsumexp(ll, axis=1, keepdims=True))  # uniform prior on grid
        # pass 2: per-cell genuine probability and posterior mean, averaged over hypotheses
        p_gen = np.zeros(nnz)
        p_fake = np.zeros(nnz)  # accumulated separately: 1 − p_gen would lose the tail
        z_num = np.zeros(nnz)
        for h, (s, unif) in enumerate(hyps):
            # Each user's posterior sits on a few grid points: skip cells of users without mass.
            on = np.flatnonzero(post[rows, h] > 1e-10)
            if on.size == 0:
                continue
            lg, lf, zh = _cell_terms(y[on], mu[on], tau2_arr[on], s, unif)
            lmix = np.logaddexp(lp_g[on] + lg, lp_f[on] + lf)
            wh = post[rows[on], h]
            gen_h = wh * np.exp(lp_g[on] + lg - lmix)
            p_gen[on] += gen_h
            p_fake[on] += wh * np.exp(lp_f[on] + lf - lmix)
            z_num[on] += gen_h * zh
        gamma = np.clip(p_gen, 0.0, 1.0)
        z_hat = z_num / np.maximum(p_gen, _TINY)
        log_odds = np.log(np.maximum(p_gen, _TINY)) - np.log(np.maximum(p_fake, _TINY))
        sq = np.array([s * s for s, _ in hyps])
        sigma2 = post @ sq
        p_unif = post[:, len(grid) :].sum(axis=1)
        # 4. genuine counts within the β range
        g = np.clip(np.bincount(rows, gamma, minlength=n), g_lo, g_hi)

    logger.info(
        "rpt posterior: %d users, %d cells, rank %d, tau2 %.3f, mean sigma2 %.3f",
        n,
        nnz,
        items.shape[1],
        tau2,
        float(np.mean(sigma2)),
    )
    return RptPosterior(z_hat, log_odds, mu, sigma2, p_unif, g, tau2, items.shape[1], n_iter)


class BayesReconstruction(Attack):
    """Bayes-estimate reconstruction of z-scores (Huang et al. 2005, BE-DR) adapted to RPT.

    Runs `fit_rpt_posterior` (no item-popularity knowledge) and outputs ẑ = E[z | data, cell
    genuine] at every filled cell: the posterior mean averaged over the user's σ and noise
    shape, given a low-rank prior mean learned from all users (spectral basis of Kargupta et
    al. 2003) and the residual variance τ².

    Args:
        max_rank: cap on the number of basis components.
        n_iter: EM iterations.
        n_sigma: grid points for the per-user σ posterior.
    """

    name = "rpt_bayes"
    knowledge = "disguised profiles + public σ_max, β_max + the RPT protocol (σ, β, coin priors)"
    applies_to = ("rpt",)

    def __init__(self, max_rank: int = 20, n_iter: int = 8, n_sigma: int = 24) -> None:
        for key, val, low in (
            ("max_rank", max_rank, 1),
            ("n_iter", n_iter, 1),
            ("n_sigma", n_sigma, 2),
        ):
            if not (isinstance(val, int) and val >= low):
                raise ValueError(f"`{key}` must be an int >= {low}, got {val!r}")
        self.max_rank, self.n_iter, self.n_sigma = max_rank, n_iter, n_sigma

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        post = fit_rpt_posterior(
            dm, max_rank=self.max_rank, n_iter=self.n_iter, n_sigma=self.n_sigma
        )
        return AttackOutput(
            attack=self.name,
            kind="z_hat",
            knowledge=self.knowledge,
            per_user=per_user_from_flat(
                dm.user_ids, dm.matrix.indptr, dm.matrix.indices, post.z_hat
            ),
            diagnostics={
                "rank": float(post.rank),
                "tau2": post.tau2,
                "mean_sigma2_hat": float(np.mean(post.sigma2)),
                "iterations": float(post.iterations),
            },
        )


__all__ = [
    "BayesReconstruction",
    "CellPrior",
    "DisguisedMatrix",
    "RptPosterior",
    "SpectralBasis",
    "SpectralFiltering",
    "count_only_prior",
    "disguised_matrix",
    "feasible_genuine",
    "fit_rpt_posterior",
    "ridge_fit",
    "spectral_basis",
]
