"""Bayes-estimate reconstruction of RPT z-scores (Huang, Du & Chen, SIGMOD 2005, adapted).

``rpt_bayes``: BE-DR (the posterior mean of x given y = x + r under a Gaussian prior whose mean
and low-rank covariance are estimated from the disguised data), extended to what RPT (Bilge 2013,
Procedure 1) actually does: per-user unknown σ (uniform prior, grid posterior), the noise-shape
coin (Gaussian or uniform, where the posterior mean is a truncated-normal mean), fakes (a
two-component genuine/fake mixture), and the known unit variance of z-scores. The joint model
(`fit_rpt_posterior`) also drives genuine-vs-fake scoring (`fake_detection`). The observation
model and the empty-cell conventions are in `rpt_matrix`; the low-rank part starts from the
spectral basis of `rpt_spectral`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import scipy.special as sc

from privrec.adversary.attacks.base import Attack, AttackOutput, OutputKind, per_user_from_flat
from privrec.adversary.attacks.rpt_kernels import (
    PASS2_MIN,
    PRUNE,
    e_step,
    mixture_log_weights,
)
from privrec.adversary.attacks.rpt_linalg import as_index
from privrec.adversary.attacks.rpt_matrix import (
    DisguisedMatrix,
    Kernels,
    cell_dots,
    cell_variances,
    check_kernels,
    disguised_matrix,
    feasible_genuine,
    side_update,
)
from privrec.adversary.attacks.rpt_spectral import random_effects, spectral_basis
from privrec.adversary.observations import Observations
from privrec.shared.types import FloatArray, IntArray

logger = logging.getLogger(__name__)

_LOG_2PI = math.log(2.0 * math.pi)
_SQRT3 = math.sqrt(3.0)
_TINY = 1e-300


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
    method: Kernels = "fast",
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
    # the fast kernels read the transposes as CSC (no copy; `precision_part` scatters them)
    wmat_t, wy_t = (wmat.T, wy.T) if method == "fast" else (wmat.T.tocsr(), wy.T.tocsr())
    ones = np.ones(items.shape[1])
    users, user_cov = side_update(wmat, wy, items, None, ones, method=method)
    item_cov: FloatArray | None = None
    for _ in range(n_sweeps):
        items, item_cov = side_update(wmat_t, wy_t, users, user_cov, item_var, method=method)
        item_var = np.maximum(
            np.mean(items**2 + np.diagonal(item_cov, axis1=1, axis2=2), axis=0), 1e-8
        )
        users, user_cov = side_update(wmat, wy, items, item_cov, ones, method=method)
    mu = cell_dots(users, rows, items, cols, method=method)
    var = cell_variances(users, user_cov, items, item_cov, rows, cols, method=method)
    keep = 1.0 / np.maximum(1.0 - weights * var, 0.05)
    return y.data - (y.data - mu) * keep, var * keep, items, item_var


def _e_step_reference(
    y: FloatArray,
    rows: IntArray,
    n: int,
    mu: FloatArray,
    tau2_arr: FloatArray,
    lp_g: FloatArray,
    lp_f: FloatArray,
    hyps: list[tuple[float, bool]],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Step 3 of `fit_rpt_posterior` in numpy, every hypothesis (the reference path).

    Returns:
        (posterior over hypotheses (n, H), p_gen, p_fake, z_num (nnz,)).
    """
    nnz = y.size
    # pass 1: per-user log likelihoods
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
    return post, p_gen, p_fake, z_num


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
    method: Kernels = "fast",
    prune: float = PRUNE,
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

    `method` "fast" (the default) runs step 3 as one compiled pass over the cells with all
    hypotheses fused (`rpt_kernels.e_step`) and the sums of step 1 in compiled kernels; from the
    second iteration on it evaluates a user's (σ, shape) hypotheses only where the posterior
    has weight above `prune` (1e-13; `rpt_kernels.e_step` states the rule), so it differs from
    "reference" (numpy, every hypothesis every iteration) by at most that missing mass. The
    tests hold the two to 1e-8 in every output; ``bench/attacks.py`` times both.

    References:
        Huang, Du, Chen. "Deriving private information from randomized data", SIGMOD 2005
        (Bayes-estimate-based data reconstruction, BE-DR).
        Kargupta, Datta, Wang, Sivakumar, ICDM 2003 (the spectral basis).
    """
    check_kernels(method)
    if not 0.0 <= prune < PASS2_MIN:
        raise ValueError(f"`prune` must be in [0, {PASS2_MIN}), got {prune!r}")
    y_mat = dm.matrix
    y = y_mat.data
    rows = dm.rows
    n, nnz = dm.n_users, y_mat.nnz
    f = dm.filled.astype(np.float64)
    basis = spectral_basis(dm, max_rank, method=method)
    _, prior_var = random_effects(
        dm, basis.vectors, np.full(nnz, 3.0 / dm.sigma_max**2), method=method
    )
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
    mu = np.zeros(nnz)
    post = np.zeros((n, len(hyps)))
    indptr = as_index(y_mat.indptr)
    evaluated = 0

    for it in range(n_iter):
        # 1. low-rank prior mean, leave-one-out
        w = gamma / (tau2_u + sigma2)[rows]
        mu, mu_var, items, item_var = _factor_model(dm, w, items, item_var, n_sweeps, method)
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
        if method == "fast":
            lp_g, lp_f = mixture_log_weights(log_prior)
            p_gen, p_fake, z_num = np.zeros(nnz), np.zeros(nnz), np.zeros(nnz)
            post_new = np.empty((n, len(hyps)))
            evaluated += e_step(
                indptr, y, mu, tau2_arr, lp_g, lp_f, grid, post, it == 0, prune,
                post_new, p_gen, p_fake, z_num,
            )  # fmt: skip
            post = post_new
        else:
            lp_g = -np.logaddexp(0.0, -log_prior)  # log ρ
            lp_f = -np.logaddexp(0.0, log_prior)  # log(1 − ρ)
            post, p_gen, p_fake, z_num = _e_step_reference(
                y, rows, n, mu, tau2_arr, lp_g, lp_f, hyps
            )
            evaluated += n * len(hyps)
        gamma = np.clip(p_gen, 0.0, 1.0)
        sq = np.array([s * s for s, _ in hyps])
        sigma2 = post @ sq
        p_unif = post[:, len(grid) :].sum(axis=1)
        # 4. genuine counts within the β range
        g = np.clip(np.bincount(rows, gamma, minlength=n), g_lo, g_hi)

    z_hat = z_num / np.maximum(p_gen, _TINY)
    log_odds = np.log(np.maximum(p_gen, _TINY)) - np.log(np.maximum(p_fake, _TINY))
    logger.info(
        "rpt posterior: %d users, %d cells, rank %d, tau2 %.3f, mean sigma2 %.3f, "
        "%.1f of %d hypotheses evaluated per user and iteration (%s)",
        n,
        nnz,
        items.shape[1],
        tau2,
        float(np.mean(sigma2)),
        evaluated / (n * n_iter),
        len(hyps),
        method,
    )
    return RptPosterior(z_hat, log_odds, mu, sigma2, p_unif, g, tau2, items.shape[1], n_iter)


class PosteriorSettings:
    """What an attack runs `fit_rpt_posterior` with: max_rank, n_iter, n_sigma and method."""

    max_rank: int
    n_iter: int
    n_sigma: int
    method: Kernels

    def _set_posterior(self, max_rank: int, n_iter: int, n_sigma: int, method: Kernels) -> None:
        """Check and keep the settings (a refusal names the setting)."""
        for key, val, low in (
            ("max_rank", max_rank, 1),
            ("n_iter", n_iter, 1),
            ("n_sigma", n_sigma, 2),
        ):
            if not (isinstance(val, int) and val >= low):
                raise ValueError(f"`{key}` must be an int >= {low}, got {val!r}")
        check_kernels(method)
        self.max_rank, self.n_iter, self.n_sigma = max_rank, n_iter, n_sigma
        self.method = method

    def _posterior(
        self, dm: DisguisedMatrix, cell_prior: CellPrior = count_only_prior
    ) -> RptPosterior:
        """`fit_rpt_posterior` on `dm` with these settings."""
        return fit_rpt_posterior(
            dm,
            cell_prior=cell_prior,
            max_rank=self.max_rank,
            n_iter=self.n_iter,
            n_sigma=self.n_sigma,
            method=self.method,
        )


class BayesReconstruction(PosteriorSettings, Attack):
    """Bayes-estimate reconstruction of z-scores (Huang et al. 2005, BE-DR) adapted to RPT.

    Runs `fit_rpt_posterior` (no item-popularity knowledge) and outputs ẑ = E[z | data, cell
    genuine] at every filled cell: the posterior mean averaged over the user's σ and noise
    shape, given a low-rank prior mean learned from all users (spectral basis of Kargupta et
    al. 2003) and the residual variance τ².

    Args:
        max_rank: cap on the number of basis components.
        n_iter: EM iterations.
        n_sigma: grid points for the per-user σ posterior.
        method: "fast" (compiled, pruned E-step; the default) or "reference" (numpy, every
            hypothesis), equal to 1e-8 (`fit_rpt_posterior`).
    """

    name = "rpt_bayes"
    knowledge = "disguised profiles + public σ_max, β_max + the RPT protocol (σ, β, coin priors)"
    applies_to = ("rpt",)

    def __init__(
        self, max_rank: int = 20, n_iter: int = 8, n_sigma: int = 24, method: Kernels = "fast"
    ) -> None:
        self._set_posterior(max_rank, n_iter, n_sigma, method)

    def _fit(self, observations: Observations) -> AttackOutput:
        dm = disguised_matrix(observations)
        post = self._posterior(dm)
        return AttackOutput(
            attack=self.name,
            kind=OutputKind.Z_HAT,
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
    "PosteriorSettings",
    "RptPosterior",
    "count_only_prior",
    "fit_rpt_posterior",
]
