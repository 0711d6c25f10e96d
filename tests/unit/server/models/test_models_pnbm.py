"""Wang & Tang's DP probabilistic NBMs, the MF baselines and the SGLD step: sensitivities and
scales (the extraction's C3 reference values), the exact gradient against finite differences,
the enforced gradient bound, the stationary law of the SGLD step (with the careless variant
rejected), DP item means, preprocessing, predictions and the privacy statements."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import DPPSMF, DPPSPNBM, DPSGDMF, DPSGDPNBM
from privrec.server.models.dp_neighbourhood import amplified_epsilon, dp_item_means
from privrec.server.models.dp_training import cap_users, exact_item_means, keep_active_users
from privrec.server.models.factorization import (
    FactorModel,
    MFConfig,
    cell_rows,
    init_factors,
    sgd_pass,
)
from privrec.server.models.langevin import (
    TemperedChain,
    effective_scale,
    langevin_step,
    step_size,
)
from privrec.server.models.pnbm import nbm_neighbourhood, nbm_predict, pnbm_gradient
from privrec.shared.accounting.accountant import compose_epsilon, naive_epsilon


def _ratings(seed: int, n_users: int = 12, n_items: int = 7, density: float = 0.7) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < density
    r, c = np.nonzero(filled)
    m = sp.csr_matrix((rng.integers(1, 6, r.size).astype(float), (r, c)), shape=filled.shape)
    m.sort_indices()
    return m


# ------------------------------------------------------------------ DPSGD: Algorithm 1 numbers
@pytest.mark.parametrize(
    ("t", "c", "delta_f"),
    [(1, 10, 1.6), (1, 15, 16 / 15), (2, 10, 1.2), (3, 10, 1.0), (5, 10, 0.8), (20, 15, 0.342857)],
)
def test_dpsgd_sensitivity_reference_values(t: int, c: float, delta_f: float) -> None:
    """ΔF_t = 2·e_max(t)·φ/C with e_max(t) = 0.5 + (φ − 1)/(t + 1), φ = 4 (extraction B3)."""
    model = DPSGDPNBM(lower_bound=c)
    assert model.sensitivity(t) == pytest.approx(delta_f, rel=1e-5)


def test_dpsgd_noise_scale_is_gamma_k_delta_over_epsilon() -> None:
    """Laplace scale γ·K·ΔF_t/ε_S with ε_S the model's share of ε (Theorem 1)."""
    model = DPSGDPNBM(2.0, n_iter=8, batch_fraction=0.25, mean_fraction=0.5)
    assert model.noise_scale(1) == pytest.approx(0.25 * 8 * 1.6 / 1.0)
    # exact amplification: ε_t = 1/(8·0.25) = 0.5 → ln(1 + 0.25(e^0.5 − 1))
    assert model.iteration_epsilon() == pytest.approx(math.log1p(0.25 * math.expm1(0.5)))
    assert amplified_epsilon(0.5, 0.25) > 0.25 * 0.5  # the paper's linear γε under-states


def test_dpsgd_statement_and_events() -> None:
    """Full batch: K Laplace steps of ε_S/K plus the means: the statement's ε is ε, the
    events compose (naively) to ε; flagged as the paper's claim."""
    model = DPSGDPNBM(1.0, n_iter=10, mean_fraction=0.2)
    claim = model.output_privacy()
    assert claim.statement.epsilon == pytest.approx(1.0)
    assert claim.fit_per_fold and claim.answer_event is None
    assert claim.fit_event is not None
    assert naive_epsilon([(claim.fit_event, 1)], 0.0) == pytest.approx(1.0)
    assert "claim-not-certified" in claim.statement.flags
    assert claim.statement.neighbouring == "one rating's value changed"


# ------------------------------------------------------------------ the gradient
def _loss(centred: sp.csr_matrix, raw: sp.csr_matrix, means: np.ndarray, s: np.ndarray) -> float:
    """½ Σ (r̂ − r)² with r̂ = r̄_i + Σ_{j≠i} s_ij c_uj / Σ_{j≠i} |s_ij| (Eq (2), written out)."""
    total = 0.0
    for u in range(centred.shape[0]):
        lo, hi = centred.indptr[u], centred.indptr[u + 1]
        items, c, r = centred.indices[lo:hi], centred.data[lo:hi], raw.data[lo:hi]
        for a, i in enumerate(items):
            others = np.arange(items.size) != a
            w = s[i, items[others]]
            den = np.abs(w).sum()
            p = (w @ c[others]) / den if den > 0 else 0.0
            total += 0.5 * (means[i] + p - r[a]) ** 2
    return total


def test_gradient_matches_finite_differences() -> None:
    """Σ e·∂r̂/∂s_ij with the sign term (Eq (5) in full) is the gradient of ½Σe²."""
    raw = _ratings(1)
    means = exact_item_means(raw, (1.0, 5.0)).item_means
    centred = raw.copy()
    centred.data = raw.data - means[raw.indices]
    rng = np.random.default_rng(2)
    s = rng.normal(0, 1, (7, 7))
    np.fill_diagonal(s, 0.0)
    grad, loss = pnbm_gradient(centred, raw, means, s, np.ones(raw.nnz, dtype=bool), floor=1e-12)
    assert loss / 2 == pytest.approx(_loss(centred, raw, means, s))
    h = 1e-6
    for i, j in [(0, 1), (2, 5), (6, 3), (4, 0)]:
        plus, minus = s.copy(), s.copy()
        plus[i, j] += h
        minus[i, j] -= h
        numeric = (_loss(centred, raw, means, plus) - _loss(centred, raw, means, minus)) / (2 * h)
        assert grad[i, j] == pytest.approx(numeric, rel=1e-5, abs=1e-7)


def test_one_ratings_gradient_is_bounded_by_e_max_phi_over_c() -> None:
    """With the clamps, every coordinate of one rating's gradient is ≤ e_max·φ/C, whatever S
    (the bound ΔF_t/2 that the sensitivity rests on, enforced rather than assumed)."""
    raw = _ratings(3, n_users=8, n_items=6, density=0.9)
    means = exact_item_means(raw, (1.0, 5.0)).item_means
    centred = raw.copy()
    centred.data = raw.data - means[raw.indices]
    rng = np.random.default_rng(4)
    for trial in range(20):
        s = rng.normal(0, 10 ** rng.uniform(-2, 1), (6, 6))
        batch = np.zeros(raw.nnz, dtype=bool)
        batch[trial % raw.nnz] = True
        grad, _ = pnbm_gradient(centred, raw, means, s, batch, floor=0.5, e_max=2.0, coef_max=4.0)
        assert np.abs(grad).max() <= 2.0 * 4.0 / 0.5 + 1e-12


def test_nbm_prediction_and_neighbourhood() -> None:
    """Eq (2) on a query: r̄_i + Σ_j s_ij (r_aj − r̄_j)/Σ|s_ij| over her items j ≠ i, the row
    cut to its N_k largest entries."""
    s = np.array([[0.0, 0.5, -0.2, 0.1], [0.5, 0.0, 0.3, 0.9], [0.4, 0.3, 0.0, 0.2], [0, 0, 0, 0]])
    cut = nbm_neighbourhood(s, 2)
    np.testing.assert_array_equal(cut[0], [0.0, 0.5, 0.0, 0.1])
    means = np.array([3.0, 3.5, 2.0, 4.0])
    q_idx, q_c = np.array([1, 2, 3]), np.array([1.0, -1.0, 0.5])
    out, n = nbm_predict(cut, means, q_idx, q_c, np.array([0, 3]), floor=1e-12)
    assert out[0] == pytest.approx(3.0 + (0.5 * 1.0 + 0.1 * 0.5) / 0.6)
    assert out[1] == 4.0 and n[1] == 0 and n[0] == 2


# ------------------------------------------------------------------ DPPS
def test_dpps_drift_scale_is_x_over_64_and_effective_epsilon() -> None:
    """B = (5 − 1)²·200 = 3200; with ε = x·τ the drift scale ε/(4B) = x/64; the chain samples
    the posterior scaled by (x/64)/ϱ and one sample is ε/(2ϱ)-DP (see the pnbm docstring)."""
    for x in (0.1, 1.0, 64.0):
        model = DPPSPNBM(x * 200, mean_fraction=0.0, temperature=0.004)
        assert model.bound == 3200
        assert model.drift_scale == pytest.approx(x / 64)
        assert model.effective_epsilon() == pytest.approx(x * 200 / (2 * 0.004))
    claim = DPPSPNBM(200.0, temperature=0.09).output_privacy()
    assert claim.statement.epsilon == pytest.approx(0.8 * 200 / 0.18 + 0.2 * 200)
    assert "temperature-weakens-epsilon" in claim.statement.flags
    assert "assumes-mcmc-convergence" in claim.statement.flags
    assert (
        "temperature-weakens-epsilon"
        not in DPPSPNBM(temperature=1.0).output_privacy().statement.flags
    )


def test_exact_means_are_flagged_and_charged_as_non_private() -> None:
    """mean_fraction 0 (the paper's exact means): the statement is flagged and the ledger
    event is non-private."""
    claim = DPSGDPNBM(1.0, mean_fraction=0.0).output_privacy()
    assert "item-means-not-private" in claim.statement.flags
    assert claim.fit_event is not None
    assert compose_epsilon([claim.fit_event], 1e-6) == math.inf


def test_sgld_step_samples_the_scaled_posterior_and_not_the_careless_one() -> None:
    """On U(θ) = ½aθ², θ ← θ − c(η/2)aθ + N(0, ϱη) has stationary variance ≈ ϱ/(c·a)
    (π ∝ e^{−(c/ϱ)U}); 40,000 independent chains, 2,000 steps (the start's weight decays as
    (1 − cηa/2)^4000 ≈ e^{−16}). Tolerance 5 %: the sample variance's SE is √(2/40000) ≈
    0.7 %, the discretisation bias cηa/4 ≈ 0.2 %. The careless variant that scales the noise
    by c as well samples variance ϱ/a, c = 1/5 of the target — rejected."""
    a, c, rho, eta = 2.0, 0.2, 0.01, 0.02
    rng = np.random.default_rng(31)
    theta = rng.normal(0, 1, 40_000)
    for _ in range(2_000):
        langevin_step(theta, a * theta, eta, drift_scale=c, temperature=rho, rng=rng)
    target = rho / (c * a)
    assert theta.var() == pytest.approx(target, rel=0.05)
    assert effective_scale(c, rho) == pytest.approx(c / rho)
    broken = rng.normal(0, 1, 40_000)
    for _ in range(2_000):  # noise N(0, c·ϱη): "scaling the injected noise by ε/(4B)"
        broken -= c * (eta / 2) * a * broken
        broken += rng.normal(0, math.sqrt(c * rho * eta), broken.size)
    assert abs(broken.var() / target - 1) > 0.5


def test_chain_in_drift_units_samples_the_tempered_posterior_at_every_epsilon() -> None:
    """`TemperedChain` runs Algorithm 2 with η_t = 2δ/c: on U(θ) = ½aθ² the drift per step is
    δa whatever c, and the stationary variance is 1/(κa), κ = c/ϱ, for c = 0.2 and for c =
    2000 with the same δ (20,000 chains, 1,500 steps from 0: 1 − (1 − δa)^3000 of the limit,
    ≈ 1 − e^{−60}; Euler's bias 1/(1 − δa/2) − 1 ≈ 1 %; SE √(2/20000) = 1 %; tolerance 5 %).
    The fixed-η chain (the previous DPPS step, η = 0.01 tuned at c = 1) at c = 2000 has drift
    factor 1 − cηa/2 = −19: it diverges — rejected."""
    a, rho, delta = 2.0, 0.01, 0.01
    for c in (0.2, 2000.0):
        chain = TemperedChain(delta, 0.0, 0, drift_scale=c, temperature=rho)
        rng = np.random.default_rng(41)
        theta = np.zeros(20_000)
        for t in range(1, 1_501):
            chain.move(theta, a * theta, t, rng)
        assert theta.var() == pytest.approx(1 / (chain.scale * a), rel=0.05)
        assert chain.paper_step(1) == pytest.approx(2 * delta / c)
    rng = np.random.default_rng(41)
    fixed = np.zeros(1_000)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(300):
            langevin_step(fixed, a * fixed, 0.01, drift_scale=2000.0, temperature=rho, rng=rng)
    assert not np.isfinite(fixed.var()) or fixed.var() > 1e6 * rho / (2000.0 * a)


def test_step_size_schedule() -> None:
    """η_t = η₁ t^(−ξ) after `hold` steps, η₁ before, floored."""
    assert step_size(1, 0.1, 0.3) == 0.1
    assert step_size(8, 0.1, 0.3) == pytest.approx(0.1 * 8**-0.3)
    assert step_size(8, 0.1, 0.3, hold=10) == 0.1
    assert step_size(10**9, 1e-3, 1.0, floor=1e-9) == 1e-9
    with pytest.raises(ValueError, match="counts from 1"):
        step_size(0, 0.1, 0.3)


# ------------------------------------------------------------------ item means, preprocessing
def test_dp_item_means_scales_and_limit() -> None:
    """Rating level: Laplace scale φ/ε on the sums (counts public); user level: 2τ(φ/2+1)/ε
    on sums and counts; a huge ε gives back the exact means (shrinkage w → 1 for n ≥ 30)."""
    train = _ratings(5, n_users=200, n_items=6, density=0.8)
    rng = np.random.default_rng(0)
    assert dp_item_means(train, 0.5, (1.0, 5.0), rng).scale == pytest.approx(8.0)
    user = dp_item_means(train, 2.0, (1.0, 5.0), rng, user_level_cap=10)
    assert user.scale == pytest.approx(2 * 10 * 3 / 2.0)
    exact = exact_item_means(train, (1.0, 5.0)).item_means
    near = dp_item_means(train, 1e9, (1.0, 5.0), rng).item_means
    np.testing.assert_allclose(near, exact, atol=0.02)
    with pytest.raises(ValueError, match="must be > 0"):
        dp_item_means(train, 0.0, (1.0, 5.0), rng)


def test_dp_item_means_noise_is_laplace_of_the_stated_scale() -> None:
    """Before shrinkage the released sum of one item is sum + Lap(φ/ε): over 4,000 runs the
    noisy raw mean's mean absolute deviation × n equals the scale (SE ≈ 1.6 %, tol 6 %)."""
    train = sp.csr_matrix(np.full((50, 1), 4.0))
    devs = []
    for seed in range(4_000):
        out = dp_item_means(train, 1.0, (1.0, 5.0), np.random.default_rng(seed))
        # invert the shrinkage toward µ to recover the raw noisy mean
        n, scale = 50.0, out.scale
        w = 0.25 / (0.25 + 1.0 / n + 2 * scale**2 / n**2)
        raw = out.global_mean + (out.item_means[0] - out.global_mean) / w
        devs.append(abs(raw - 4.0) * n)
    assert np.mean(devs) == pytest.approx(4.0, rel=0.06)


def test_cap_users_and_keep_active_users() -> None:
    """τ cap: every row keeps min(g, τ) of its own cells; the activity filter empties rows
    with fewer than `min_ratings`."""
    train = _ratings(6, n_users=20, n_items=30, density=0.5)
    capped = cap_users(train, 5, np.random.default_rng(0))
    counts, before = np.diff(capped.indptr), np.diff(train.indptr)
    np.testing.assert_array_equal(counts, np.minimum(before, 5))
    rows, cols = capped.nonzero()  # a subset of her own cells, values kept
    np.testing.assert_array_equal(np.asarray(train[rows, cols]).ravel(), capped.data)
    active = keep_active_users(train, 16)
    np.testing.assert_array_equal(np.diff(active.indptr), np.where(before >= 16, before, 0))


# ------------------------------------------------------------------ the MF baselines
def test_dpsgd_mf_noise_and_certified_statement() -> None:
    """Errors perturbed with Lap(Kφ/ε_S) every epoch: K epochs compose to ε_S; no flag."""
    model = DPSGDMF(2.0, n_iter=10, mean_fraction=0.25)
    assert model.noise_scale == pytest.approx(10 * 4 / 1.5)
    claim = model.output_privacy()
    assert claim.statement.flags == () and claim.statement.epsilon == 2.0
    assert claim.fit_event is not None
    assert naive_epsilon([(claim.fit_event, 1)], 0.0) == pytest.approx(2.0)


def test_sgd_pass_learns_a_low_rank_matrix_and_fold_in_is_ridge() -> None:
    """Without noise, SGD epochs drive the training error of a rank-2 matrix down; the fold-in
    without biases under the prior penalty solves (QᵀQ + λI)p = Qᵀx."""
    rng = np.random.default_rng(8)
    truth = rng.normal(0, 1, (40, 2)) @ rng.normal(0, 1, (2, 30))
    filled = rng.random(truth.shape) < 0.7
    r, c = np.nonzero(filled)
    train = sp.csr_matrix((truth[r, c], (r, c)), shape=truth.shape)
    rows = cell_rows(train)
    p, q = init_factors(40, 2, 0.1, rng), init_factors(30, 2, 0.1, rng)

    def epoch() -> float:
        order = rng.permutation(train.nnz)
        return sgd_pass(rows, train.indices, train.data, order, p, q, learning_rate=0.02, reg=0.0)[
            0
        ]

    first = epoch()
    for _ in range(200):
        last = epoch()
    assert last < 0.01 * first
    items, x = np.array([0, 3, 7]), np.array([1.0, -0.5, 2.0])
    config = MFConfig(n_factors=2, reg=0.7, biases=False, penalty="prior")
    b_u, got = FactorModel(0.0, np.zeros(40), np.zeros(30), p, q, config, np.zeros(0)).fold_in(
        items, x
    )
    qi = q[items]
    assert b_u == 0.0
    np.testing.assert_allclose((qi.T @ qi + 0.7 * np.eye(2)) @ got, qi.T @ x)


def test_dpps_mf_statement() -> None:
    """DPPS-MF states ε/(2ϱ) for the factors as DPPS-PNBM does."""
    model = DPPSMF(200.0, temperature=0.01, mean_fraction=0.0)
    assert model.effective_epsilon() == pytest.approx(200 / 0.02)
    assert "temperature-weakens-epsilon" in model.output_privacy().statement.flags


@pytest.mark.parametrize(
    ("cls", "kwargs", "needle"),
    [
        (DPSGDPNBM, {"epsilon": -1.0}, "`epsilon` must be > 0"),
        (DPSGDPNBM, {"batch_fraction": 1.5}, "`batch_fraction` must be > 0 and <= 1"),
        (DPSGDPNBM, {"mean_fraction": 1.0}, "`mean_fraction` must be < 1"),
        (DPPSPNBM, {"temperature": 0.0}, "`temperature` must be > 0"),
        (DPPSPNBM, {"tau": 0}, "`tau` must be an int >= 1"),
        (DPSGDMF, {"rating_scale": (5.0, 1.0)}, "`rating_scale` must have r_min < r_max"),
        (DPPSMF, {"n_factors": 0}, "`n_factors` must be an int >= 1"),
    ],
)
def test_bad_parameters_name_themselves(cls: type, kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValueError) as info:
        cls(**kwargs)
    assert needle in str(info.value)
