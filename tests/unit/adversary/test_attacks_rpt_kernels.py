"""The compiled path of the RPT attacks equals the numpy reference (adversary.attacks.rpt_kernels).

Deterministic: fixed-seed inputs (the attack population of conftest, seed 7). The kernels sum
in the reference's order, so the two paths differ by rounding (measured ≤ 1e-11 relative) plus
what pruning drops (≤ H·1e-13 of a user's posterior mass); every comparison asserts 1e-8, the
tolerance `fit_rpt_posterior` states. Each comparison is also shown to reject a broken variant.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special as sc

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.rpt_bayes import (
    _e_step_reference,
    _log_diff_ndtr,
    count_only_prior,
    fit_rpt_posterior,
)
from privrec.adversary.attacks.rpt_kernels import PRUNE, e_step
from privrec.adversary.attacks.rpt_matrix import (
    DisguisedMatrix,
    cell_dots,
    disguised_matrix,
    feasible_genuine,
    precision_part,
    quad_form,
    sparse_dot,
)
from privrec.adversary.attacks.rpt_spectral import random_effects, spectral_basis
from privrec.adversary.attacks.rpt_vecmath import log_diff_ndtr as log_diff_ndtr_kernel
from privrec.adversary.attacks.rpt_vecmath import log_ndtr
from privrec.shared.errors import ConfigError
from privrec.shared.types import FloatArray

TOL = 1e-8
N_SIGMA = 24


def rel_diff(a: FloatArray, b: FloatArray) -> float:
    """max |a − b| / max(1, |b|) (relative for large values, absolute near 0)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    both_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    d = np.where(both_inf, 0.0, np.abs(a - b) / np.maximum(1.0, np.abs(b)))
    return float(np.max(d)) if d.size else 0.0


# ---------------------------------------------------------------------- special functions
def test_log_ndtr_matches_scipy_in_both_tails() -> None:
    """log Φ over the centre and both tails, including the asymptotic series below −20."""
    xs = np.concatenate([np.linspace(-60, 40, 2001), [-20.0, -19.999, 6.0, 6.001, 0.0]])
    ours = np.array([log_ndtr(float(x)) for x in xs])
    ref = sc.log_ndtr(xs)
    # relative error; below 1e-280 (scipy returns 0 for subnormal results) absolute
    assert np.max(np.abs(ours - ref) / np.maximum(1e-280, np.abs(ref))) < 1e-12


def test_log_diff_ndtr_matches_the_reference_in_every_regime() -> None:
    """log(Φ(b) − Φ(a)) in the lower tail, the middle, the upper tail and far out."""
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(-45, 45, 4000), [-35.0, 29.0, 31.0, -1.0]])
    b = a + np.concatenate([rng.uniform(0.1, 6.0, 4000), [0.2, 0.5, 0.3, 2.0]])
    ours = np.array([log_diff_ndtr_kernel(float(x), float(y)) for x, y in zip(a, b, strict=True)])
    ref = _log_diff_ndtr(a, b)
    # relative to |log| (the values reach −1000): 1e-12 is a few ulps of the difference
    assert np.max(np.abs(ours - ref) / np.maximum(1.0, np.abs(ref))) < 1e-12


# ---------------------------------------------------------------------------- the E-step
def _e_step_inputs(dm: DisguisedMatrix) -> dict[str, FloatArray]:
    """A realistic E-step state: prior means from the spectral fit, τ² = 0.6, count prior."""
    basis = spectral_basis(dm, 5)
    coef, _ = random_effects(dm, basis.vectors, np.full(dm.matrix.nnz, 3.0))
    mu = cell_dots(basis.vectors, dm.matrix.indices, coef, dm.rows)
    g_lo, g_hi = feasible_genuine(dm)
    g = 0.5 * (g_lo + g_hi)
    log_prior = count_only_prior(dm, g, dm.filled - g)
    return {
        "y": dm.matrix.data,
        "mu": mu,
        "tau2": np.full(dm.matrix.nnz, 0.6),
        "lp_g": -np.logaddexp(0.0, -log_prior),
        "lp_f": -np.logaddexp(0.0, log_prior),
    }


def _run_kernel(
    dm: DisguisedMatrix, x: dict[str, FloatArray], prev: FloatArray, first: bool, prune: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    n, nnz = dm.n_users, dm.matrix.nnz
    grid = dm.sigma_max * (np.arange(N_SIGMA) + 0.5) / N_SIGMA
    post = np.empty((n, 2 * N_SIGMA))
    p_gen, p_fake, z_num = np.zeros(nnz), np.zeros(nnz), np.zeros(nnz)
    e_step(
        dm.matrix.indptr.astype(np.int64), x["y"], x["mu"], x["tau2"], x["lp_g"], x["lp_f"],
        grid, prev, first, prune, post, p_gen, p_fake, z_num,
    )  # fmt: skip
    return post, p_gen, p_fake, z_num


def _reference(
    dm: DisguisedMatrix, x: dict[str, FloatArray]
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    grid = dm.sigma_max * (np.arange(N_SIGMA) + 0.5) / N_SIGMA
    hyps = [(float(s), u) for u in (False, True) for s in grid]
    return _e_step_reference(
        x["y"], dm.rows, dm.n_users, x["mu"], x["tau2"], x["lp_g"], x["lp_f"], hyps
    )


def _worst(got: tuple[FloatArray, ...], ref: tuple[FloatArray, ...]) -> float:
    return max(rel_diff(a, b) for a, b in zip(got, ref, strict=True))


def test_e_step_equals_the_reference_with_and_without_pruning(disguised) -> None:  # type: ignore[no-untyped-def]
    """Posterior weights and per-cell sums: every hypothesis (first iteration), then pruned
    from a previous posterior (a shifted state, as in the next EM iteration)."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    x = _e_step_inputs(dm)
    full = _run_kernel(dm, x, np.zeros((dm.n_users, 2 * N_SIGMA)), True, PRUNE)
    assert _worst(full, _reference(dm, x)) < TOL
    shifted = dict(x, mu=0.9 * x["mu"], tau2=np.full(dm.matrix.nnz, 0.5))
    pruned = _run_kernel(dm, shifted, full[0], False, PRUNE)
    assert _worst(pruned, _reference(dm, shifted)) < TOL
    # z_hat = z_num / p_gen, the attack's output, agrees too
    ref = _reference(dm, shifted)
    assert rel_diff(pruned[3] / pruned[1], ref[3] / ref[1]) < TOL


def test_e_step_comparison_rejects_dropped_hypotheses(disguised) -> None:  # type: ignore[no-untyped-def]
    """Broken variants: over-pruning (threshold 0.5: most hypotheses with weight dropped) and
    one hypothesis knocked out of every user's posterior are both far outside the tolerance."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    x = _e_step_inputs(dm)
    prev = _run_kernel(dm, x, np.zeros((dm.n_users, 2 * N_SIGMA)), True, PRUNE)[0]
    ref = _reference(dm, x)
    assert _worst(_run_kernel(dm, x, prev, False, 0.5), ref) > 1e-3
    dropped = list(_run_kernel(dm, x, prev, False, PRUNE))
    top = np.argmax(dropped[0].sum(axis=0))
    dropped[0] = dropped[0].copy()
    dropped[0][:, top] = 0.0
    dropped[0] /= dropped[0].sum(axis=1, keepdims=True)
    assert _worst(tuple(dropped), ref) > 1e-3


# ---------------------------------------------------------------------- filled-cell sums
def test_sparse_dot_is_scipys_product_bit_for_bit() -> None:
    """CSR rows gathered and CSC columns scattered give scipy's sums exactly (same order);
    summing a row's entries in reverse, a plausible slip, does not."""
    rng = np.random.default_rng(3)
    a = sp.random(300, 120, density=0.1, format="csr", random_state=rng)
    a.data = rng.normal(size=a.nnz) * 10.0 ** rng.integers(-3, 4, a.nnz)
    for m, d in ((a, rng.normal(size=(120, 21))), (a.T, rng.normal(size=(300, 21)))):
        got, want = sparse_dot(m, d), m @ d
        assert got.tobytes() == np.asarray(want).tobytes()
    rev = np.zeros((300, 21))
    d = rng.normal(size=(120, 21))
    for r in range(300):
        for idx in range(a.indptr[r + 1] - 1, a.indptr[r] - 1, -1):
            rev[r] += a.data[idx] * d[a.indices[idx]]
    assert rev.tobytes() != np.asarray(a @ d).tobytes()


def test_precisions_quad_forms_and_dots_equal_the_reference(disguised) -> None:  # type: ignore[no-untyped-def]
    """Σ w (b bᵀ + C), x_cᵀ S x_c and a·b per cell: upper-triangle and compiled vs numpy."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    rng = np.random.default_rng(3)
    k = 4
    other = rng.standard_normal((dm.n_items, k))
    a = rng.standard_normal((dm.n_items, k, k))
    cov = a @ a.transpose(0, 2, 1) / k  # symmetric, as the posterior covariances are
    w = rng.uniform(0.1, 2.0, dm.matrix.nnz)
    import scipy.sparse as sp

    wmat = sp.csr_matrix((w, dm.matrix.indices, dm.matrix.indptr), shape=dm.matrix.shape)
    for c in (None, cov):
        fast = precision_part(wmat, other, c, method="fast")
        assert rel_diff(fast, precision_part(wmat, other, c, method="reference")) < 1e-12
    users = rng.standard_normal((dm.n_users, k))
    user_cov = np.einsum("uij,ukj->uik", *(2 * [rng.standard_normal((dm.n_users, k, k))]))
    cols, rows = dm.matrix.indices, dm.rows
    q_fast = quad_form(other, cols, user_cov, rows, method="fast")
    assert rel_diff(q_fast, quad_form(other, cols, user_cov, rows, method="reference")) < 1e-12
    d_fast = cell_dots(users, rows, other, cols, method="fast")
    assert rel_diff(d_fast, cell_dots(users, rows, other, cols, method="reference")) < 1e-12
    # broken: a precision sum that misses the covariance term is caught
    no_cov = precision_part(wmat, other, None, method="fast")
    assert rel_diff(no_cov, precision_part(wmat, other, cov, method="reference")) > 1e-3


# -------------------------------------------------------------------- the fits and attacks
@pytest.mark.parametrize(("sigma_max", "beta_max"), [(1.0, 10), (0.5, 0)])
def test_fit_rpt_posterior_fast_equals_reference(disguised, sigma_max, beta_max) -> None:  # type: ignore[no-untyped-def]
    """Every output of the EM fit, with fakes and without (β_max = 0), to 1e-8."""
    dm = disguised_matrix(disguised(sigma_max, beta_max).observations)
    fast = fit_rpt_posterior(dm, n_iter=3, method="fast")
    ref = fit_rpt_posterior(dm, n_iter=3, method="reference")
    for field in ("z_hat", "log_odds", "mu", "sigma2", "p_uniform", "genuine"):
        assert rel_diff(getattr(fast, field), getattr(ref, field)) < TOL, field
    assert abs(fast.tau2 - ref.tau2) < TOL and fast.rank == ref.rank


def test_attacks_fast_equal_reference(disguised) -> None:  # type: ignore[no-untyped-def]
    """The three RPT attacks through the registry, both paths, same per-user outputs."""
    obs = disguised(1.0, 10).observations
    for name, params in (
        ("rpt_spectral", {}),
        ("rpt_bayes", {"n_iter": 2}),
        ("rpt_fake_detection", {"n_iter": 2, "popularity": "auxiliary"}),
    ):
        outs = [
            make_attack(name, method=m, **params).fit(obs).output() for m in ("fast", "reference")
        ]
        assert outs[0].per_user.keys() == outs[1].per_user.keys()
        for uid, est in outs[0].per_user.items():
            np.testing.assert_array_equal(est.indices, outs[1].per_user[uid].indices)
            assert rel_diff(est.values, outs[1].per_user[uid].values) < TOL, (name, uid)


def test_random_effects_cached_precision_equals_reference(disguised) -> None:  # type: ignore[no-untyped-def]
    """The fast EM sums each user's precision once; coefficients and Λ are unchanged."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    basis = spectral_basis(dm, 6).vectors
    w = np.full(dm.matrix.nnz, 3.0)
    fast = random_effects(dm, basis, w, method="fast")
    ref = random_effects(dm, basis, w, method="reference")
    assert rel_diff(fast[0], ref[0]) < 1e-10 and rel_diff(fast[1], ref[1]) < 1e-10


@pytest.mark.parametrize("name", ["rpt_spectral", "rpt_bayes", "rpt_fake_detection"])
def test_method_is_validated(name: str) -> None:
    """An unknown `method` is a ConfigError naming the parameter."""
    with pytest.raises(ConfigError, match="method"):
        make_attack(name, method="turbo")


def test_prune_threshold_is_validated(disguised) -> None:  # type: ignore[no-untyped-def]
    """`prune` must stay below the pass-2 threshold (else pass 2 could use unevaluated terms)."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    with pytest.raises(ValueError, match="prune"):
        fit_rpt_posterior(dm, n_iter=1, prune=1e-9)


# ------------------------------------------------------------ the uniform shape's bound
def test_uniform_bound_holds_and_a_midpoint_bound_would_not() -> None:
    """`_bound_uniform` ≥ `_eval_uniform` at every σ of the grid, for cells near and far
    (|y − μ|/τ up to 40, both tails and the rare-cell path); the midpoint density in place
    of the nearest-point one (not a bound) is caught by the same comparison."""
    from privrec.adversary.attacks.rpt_kernels import _bound_uniform, _eval_uniform

    rng = np.random.default_rng(5)
    n = 400
    tau = rng.uniform(0.05, 1.2, n)
    mu = rng.normal(0.0, 1.0, n)
    y = mu + tau * rng.uniform(-40.0, 40.0, n)
    lp_g = np.log(rng.uniform(0.05, 0.95, n))
    lp_f = np.log1p(-np.exp(lp_g))
    grid = 2.0 * (np.arange(N_SIGMA) + 0.5) / N_SIGMA
    scratch, buf = np.zeros((3, 2 * N_SIGMA, n)), np.empty(n)
    for i, sigma in enumerate(grid):
        for lo, hi in ((0, n), (0, 1), (17, 60)):
            exact = _eval_uniform(
                N_SIGMA + i, lo, hi, y, mu, 1.0 / tau, lp_g, lp_f, sigma, scratch, buf
            )
            bound = _bound_uniform(
                lo, hi, y, mu, 1.0 / tau, lp_g, lp_f, np.exp(lp_g), np.exp(lp_f), sigma, buf
            )
            assert bound >= exact - 1e-9 * max(1.0, abs(exact)), (sigma, lo, hi)
    # broken: φ at the interval's midpoint instead of its point nearest 0 undercuts the exact
    # value in the tails, and the comparison above would reject it
    sigma = grid[-1]
    alpha = np.sqrt(3.0) * sigma
    a, b = (y - alpha - mu) / tau, (y + alpha - mu) / tau
    mid = 0.5 * (a + b)
    ld_mid = np.minimum(0.0, np.log(2 * alpha / tau) - 0.5 * mid**2 - 0.5 * np.log(2 * np.pi))
    assert np.any(ld_mid < _log_diff_ndtr(a, b) - 1e-6)


# ------------------------------------------------------------- low-rank pieces, fast path
def test_cholesky_posteriors_equal_the_lu_reference_and_fall_back() -> None:
    """P⁻¹ rhs and P⁻¹ by Cholesky equal np.linalg.inv's to rounding; a row that is not
    positive definite in floating point takes the LU path (same result as the reference);
    50 rows make a full and a partial block of 32."""
    from privrec.adversary.attacks.rpt_matrix import posterior_from_sums

    rng = np.random.default_rng(6)
    p, k = 50, 7
    x = rng.standard_normal((p, 12, k))
    sums = np.einsum("pij,pik->pjk", x, x)
    sums[3] = -np.eye(k) * 5.0  # + diag(1/prior_var) = 1 leaves it negative definite
    rhs = rng.standard_normal((p, k))
    prior_var = np.ones(k)
    fast = posterior_from_sums(sums, rhs, prior_var, method="fast")
    ref = posterior_from_sums(sums, rhs, prior_var, method="reference")
    assert rel_diff(fast[1], ref[1]) < 1e-10 and rel_diff(fast[0], ref[0]) < 1e-10
    # rows go 32 at a time: moving every row to another place in its block changes no bit
    shifted = posterior_from_sums(sums[1:], rhs[1:], prior_var, method="fast")
    assert np.array_equal(shifted[0], fast[0][1:]) and np.array_equal(shifted[1], fast[1][1:])
    # broken: the prior term left out is far off
    bare = posterior_from_sums(sums + 1e-3 * np.eye(k), rhs, np.full(k, 1e12), method="fast")
    assert rel_diff(bare[1], ref[1]) > 1e-3


def test_cell_variances_and_scattered_precisions_equal_the_reference(disguised) -> None:  # type: ignore[no-untyped-def]
    """b_jᵀ Cov(a_u) b_j + a_uᵀ Cov(b_j) a_u as one dot per cell, and the item-side precision
    sums scattered from the CSR rows (the transpose read as CSC), against the numpy path."""
    import scipy.sparse as sp

    from privrec.adversary.attacks.rpt_matrix import cell_variances

    dm = disguised_matrix(disguised(1.0, 10).observations)
    rng = np.random.default_rng(8)
    k = 5
    users = rng.standard_normal((dm.n_users, k))
    items = rng.standard_normal((dm.n_items, k))
    au = rng.standard_normal((dm.n_users, k, k))
    ai = rng.standard_normal((dm.n_items, k, k))
    ucov = au @ au.transpose(0, 2, 1)
    icov = ai @ ai.transpose(0, 2, 1)
    rows, cols = dm.rows, dm.matrix.indices
    for ic in (None, icov):
        fast = cell_variances(users, ucov, items, ic, rows, cols, method="fast")
        ref = cell_variances(users, ucov, items, ic, rows, cols, method="reference")
        assert rel_diff(fast, ref) < 1e-12
    w = rng.uniform(0.1, 2.0, dm.matrix.nnz)
    wmat = sp.csr_matrix((w, cols, dm.matrix.indptr), shape=dm.matrix.shape)
    scattered = precision_part(wmat.T, users, ucov, method="fast")  # CSC: the scatter kernel
    assert (
        rel_diff(scattered, precision_part(wmat.T.tocsr(), users, ucov, method="reference")) < 1e-12
    )
    # broken: the covariance term of one side missing is caught
    half = cell_variances(users, ucov, items, None, rows, cols, method="fast")
    assert (
        rel_diff(half, cell_variances(users, ucov, items, icov, rows, cols, method="reference"))
        > 1e-3
    )


def test_hypothesis_kernels_equal_the_numpy_cell_terms_far_in_the_tails() -> None:
    """`_eval_gauss`/`_eval_uniform` (sum of log mixtures, genuine and fake shares) against
    `rpt_bayes._cell_terms` + logaddexp, with cells up to 45 τ from their mean, so that the
    uniform kernel's rare-cell path (|a| or |b| ≥ 30, log-space Φ) runs too; a kernel that
    skipped that path (erfc differences out there) is caught."""
    from privrec.adversary.attacks.rpt_bayes import _cell_terms
    from privrec.adversary.attacks.rpt_kernels import _eval_gauss, _eval_uniform

    rng = np.random.default_rng(9)
    n = 3000
    tau2 = rng.uniform(0.002, 1.5, n)
    tau = np.sqrt(tau2)
    mu = rng.normal(0.0, 1.0, n)
    y = mu + tau * rng.uniform(-45.0, 45.0, n)
    lp_g = np.log(rng.uniform(0.01, 0.99, n))
    lp_f = np.log1p(-np.exp(lp_g))
    scratch, buf = np.zeros((3, 2, n)), np.empty(n)
    rare = np.zeros(n, dtype=bool)
    for sigma in (0.04, 0.5, 1.9):
        for uniform in (False, True):
            if uniform:
                got = _eval_uniform(1, 0, n, y, mu, 1.0 / tau, lp_g, lp_f, sigma, scratch, buf)
                a = (y - np.sqrt(3.0) * sigma - mu) / tau
                rare |= (a >= 30) | (a + 2 * np.sqrt(3.0) * sigma / tau <= -30)
            else:
                got = _eval_gauss(0, 0, n, y, mu, tau2, lp_g, lp_f, sigma, scratch, buf)
            lg, lf, _ = _cell_terms(y, mu, tau2, sigma, uniform)
            lmix = np.logaddexp(lp_g + lg, lp_f + lf)
            assert abs(got - lmix.sum()) < 1e-9 * abs(lmix.sum())
            h = int(uniform)
            assert rel_diff(scratch[0, h], np.exp(lp_g + lg - lmix)) < 1e-9
            assert rel_diff(scratch[1, h], np.exp(lp_f + lf - lmix)) < 1e-9
    assert rare.sum() > 100  # the log-space path was exercised
    # broken: erfc differences beyond |b| = 30 (what the rare-cell path avoids) lose the cell
    a, b = -40.0, -39.0
    naive = np.log(max(0.5 * (sc.erfc(-b / np.sqrt(2)) - sc.erfc(-a / np.sqrt(2))), 1e-300))
    assert abs(naive - _log_diff_ndtr(np.array([a]), np.array([b]))[0]) > 1.0


# ---------------------------------------------------------------------- threads
_THREADS_PROBE = """
import sys
import numba
import numpy as np
import scipy.sparse as sp
from privrec.adversary.attacks.rpt_bayes import fit_rpt_posterior
from privrec.adversary.attacks.rpt_matrix import DisguisedMatrix

z = np.load(sys.argv[1])
mat = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]))
dm = DisguisedMatrix([str(u) for u in range(mat.shape[0])], mat, float(z["sigma_max"]), 10)
fits = []
for threads in (1, numba.config.NUMBA_NUM_THREADS):
    numba.set_num_threads(threads)
    fits.append(fit_rpt_posterior(dm, n_iter=3))
fields = ("z_hat", "log_odds", "mu", "sigma2", "p_uniform", "genuine")
same = [f for f in fields if np.asarray(getattr(fits[0], f)).tobytes()
        == np.asarray(getattr(fits[1], f)).tobytes()]
print(numba.config.NUMBA_NUM_THREADS, *same)
"""


def test_fit_is_the_same_bit_for_bit_on_any_number_of_threads(disguised, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The parallel kernels give each output row to one thread and keep every sum's order, so
    one thread and three (more than this machine's cores, chunks of unequal size) agree
    exactly, in a process of its own (numba's thread count is fixed at start)."""
    dm = disguised_matrix(disguised(1.0, 10).observations)
    y = dm.matrix
    path = tmp_path / "dm.npz"
    np.savez(path, data=y.data, indices=y.indices, indptr=y.indptr, shape=y.shape,
             sigma_max=dm.sigma_max)  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", _THREADS_PROBE, str(path)],
        env=os.environ | {"NUMBA_NUM_THREADS": "3"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.split()
    assert out == ["3", "z_hat", "log_odds", "mu", "sigma2", "p_uniform", "genuine"]
