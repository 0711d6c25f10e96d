"""The second-order reconstruction attack (adversary.attacks.second_order) and its scoring.

Population: `shared.data.make_synthetic` (rank 5, integer ratings 1..5, Zipf popularity),
300 public users who share their ratings and 200 private users who each release one vector
under a mechanism bound to the public model the "server" fits here, independently of the
attack. Everything is seeded (`SEED`). The figures quoted next to the assertions were measured
on seed 11 and on seeds 1–4 (`make_synthetic` seed; the same code otherwise); the thresholds
sit well outside that spread.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from privrec.adversary.attacks import ATTACKS, make_attack
from privrec.adversary.attacks.base import AttackOutput, UserEstimate
from privrec.adversary.attacks.public_tier import public_model, rebuild_public_tier
from privrec.adversary.attacks.second_order import (
    SIGN_FREQUENCY,
    SIGN_GRID,
    SIGN_PLUS,
    Calibration,
    SecondOrderReconstruction,
    fit_sign_model,
)
from privrec.adversary.observations import Observations
from privrec.shared.data.synthetic import make_synthetic
from privrec.shared.errors import ConfigError, NotFittedError, ValidationError
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import DensePayload, Profile, SparsePayload
from privrec.shared.mechanisms.completion import (
    estimate_shared_h,
    fit_public_model,
    public_item_means,
    public_ratings_matrix,
)
from privrec.shared.seeding import rng_for
from privrec.sim.referee_attacks import score_attack
from privrec.sim.referee_ratings import max_flip_chance
from tests.run_configs import make_run_config

SEED = 11
N_PUBLIC, N_PRIVATE, N_ITEMS = 300, 200, 150
MODEL = {"k": 5, "ridge": 1.0, "em_iters": 3, "private_weight": 0.5}
NAME = "second_order_reconstruction"

Params = tuple[tuple[str, object], ...]


@dataclasses.dataclass(frozen=True)
class Scenario:
    observations: Observations
    truth: dict[str, tuple[np.ndarray, np.ndarray]]
    mu: np.ndarray
    V: np.ndarray
    shared_h: float | None


@functools.cache
def _ratings(hide_tail: int = 0) -> tuple[dict[str, SparsePayload], dict[str, tuple]]:
    """(public payloads, private rows) in user-id order. `hide_tail` > 0 removes the public
    ratings of the last `hide_tail` items (so V is zero there)."""
    data = make_synthetic(N_PUBLIC + N_PRIVATE, N_ITEMS, rank=5, density=0.12, seed=SEED)
    public, private = {}, {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        items, ratings = items.astype(np.int64), ratings.astype(np.float64)
        if u < N_PUBLIC:
            keep = items < N_ITEMS - hide_tail
            public[f"u{u:04d}"] = SparsePayload(N_ITEMS, items[keep], ratings[keep])
        else:
            private[f"u{u:04d}"] = (items, ratings)
    return public, private


@functools.cache
def scenario(mechanism: str, params: Params = (), hide_tail: int = 0) -> Scenario:
    """The server fits (µ, V) from the public users; each private user releases once."""
    public, private = _ratings(hide_tail)
    csr = public_ratings_matrix(public, N_ITEMS)
    mu, V = fit_public_model(csr, rank=MODEL["k"], ridge=MODEL["ridge"], n_iter=MODEL["em_iters"])
    mech = make_mechanism(mechanism, dict(params))
    shared_h = None
    if dict(params).get("h_mode") == "shared":
        shared_h = estimate_shared_h(csr, mu, V, mech.ridge)  # type: ignore[attr-defined]
        mech.bind(mu, V, shared_h=shared_h)  # type: ignore[attr-defined]
    else:
        mech.bind(mu, V)  # type: ignore[attr-defined]
    profiles = {
        uid: mech.release(Profile(items, ratings, N_ITEMS), rng_for(SEED, "user", uid, "release"))
        for uid, (items, ratings) in private.items()
    }
    run_config = make_run_config(
        mechanism,
        mech.public_params(),
        N_ITEMS,
        model="two_tier_lowrank",
        model_params=dict(MODEL),
    )
    return Scenario(
        Observations(run_config, profiles, dict(public)), dict(private), mu, V, shared_h
    )


def shuffled(obs: Observations) -> Observations:
    """The broken observation: every private release handed to the next user."""
    uids = list(obs.profiles)
    moved = {uid: obs.profiles[uids[(u + 1) % len(uids)]] for u, uid in enumerate(uids)}
    return Observations(obs.run_config, moved, obs.public)


@functools.cache
def scored(
    mechanism: str, params: Params = (), broken: bool = False, hide_tail: int = 0
) -> tuple[dict[str, float], AttackOutput]:
    sc = scenario(mechanism, params, hide_tail)
    obs = shuffled(sc.observations) if broken else sc.observations
    out = make_attack(NAME).fit(obs).output()
    return score_attack(NAME, out, sc.truth, public=sc.observations.public), out


# ------------------------------------------------------------------ the public model
def test_second_order_rebuilds_the_server_model() -> None:
    """The attack's (µ, V) and shared h are the server's, bit for bit."""
    sc = scenario("pmc", (("h_mode", "shared"),))
    tier = rebuild_public_tier(sc.observations)
    np.testing.assert_array_equal(tier.mu, sc.mu)
    np.testing.assert_array_equal(tier.V, sc.V)
    assert tier.shared_h == sc.shared_h
    assert tier.mechanism.is_bound


def test_public_model_resolves_the_server_defaults() -> None:
    """Published model_params hold only what the config set; the rest are the model's defaults
    (TwoTierLowRank: ridge 1, em_iters 5, covariance spectrum), resolved by the server's class;
    a missing name or a bad value is refused naming the field."""
    model = public_model("two_tier_lowrank", {"k": 4})
    assert (model.k, model.ridge, model.em_iters, model.spectrum) == (4, 1.0, 5, "covariance")
    model = public_model("two_tier_lowrank", {"k": 3, "spectrum": "trace-norm"})
    assert model.spectrum == "trace-norm"
    for bad in ({"k": 0}, {"k": 3, "ridge": -1.0}):
        with pytest.raises(ValidationError) as info:
            public_model("two_tier_lowrank", bad)
        assert info.value.field == "run_config.model_params"
    with pytest.raises(ValidationError) as info:
        public_model("ppcf", {"k": 3})
    assert info.value.field == "run_config.model"


def test_public_item_means_is_fit_public_model_mu() -> None:
    """The referee's µ (public_item_means) is fit_public_model's µ, bit for bit."""
    sc = scenario("exact_second_order")
    mu = public_item_means(public_ratings_matrix(sc.observations.public))
    np.testing.assert_array_equal(mu, sc.mu)


# ------------------------------------------------------------------ what the attack reaches
def test_second_order_exact_recovers_the_ratings() -> None:
    """Exact second order: the rating-grid rule finds the sign, r̂ = r on rated items.

    Measured: RMSE 0.000 vs the µ baseline 1.04–1.09, sign accuracy 0.999–1.0, on the public
    users the grid rule is right for every user (so it is adopted).
    """
    s, out = scored("exact_second_order")
    assert out.kind == "rating_hat"
    assert out.diagnostics["sign_rule"] == SIGN_GRID
    assert s["rmse"] < 0.05 * s["rmse_mu"]
    assert s["sign_accuracy"] > 0.98
    assert s["coverage"] == 1.0


@pytest.mark.parametrize("h_mode", ["per-user", "shared"])
def test_second_order_pmc_leaks_the_sign_pattern(h_mode: str) -> None:
    """PMC: sign(r − µ) up to one global sign (Xin & Jaakkola Sec. 4), and the ratings with it.

    Measured (seed 11; seeds 1–4 within ±0.03): sign accuracy up to global sign 1.000 vs 0.62–0.64
    when scored against another user's estimate (binomial chance 0.58); RMSE after the best
    global sign 0.51 (per-user h) / 0.53 (shared h) vs the µ baseline 1.04. The global sign itself
    is a coin on this symmetric synthetic data: no rule beats 1/2 on the public users (0.517 <
    threshold 0.558), so the attack uses +1 and its plain RMSE (1.41–1.51) is WORSE than µ.
    """
    s, out = scored("pmc", (("h_mode", h_mode),))
    assert s["sign_accuracy_global"] > 0.95
    assert s["sign_accuracy_global"] > s["sign_accuracy_global_permuted"] + 0.25
    assert s["rmse_best_global_sign"] < 0.6 * s["rmse_mu"]
    assert out.diagnostics["sign_rule"] == SIGN_PLUS
    assert 0.40 < s["sign_accuracy"] < 0.60  # half the users mirrored
    assert s["rmse"] > s["rmse_mu"]


def test_second_order_pmd_leaks_less() -> None:
    """PMD hides a global sign too (Eq. (8) depends on the candidate only through (a·b)²).

    Measured: sign accuracy up to global sign 0.73–0.76 vs 0.61–0.62 permuted; RMSE after the best
    global sign 0.85–0.91 vs µ 1.04–1.09 (ratio 0.80–0.83).
    """
    s, out = scored("pmd")
    assert s["sign_accuracy_global"] > s["sign_accuracy_global_permuted"] + 0.08
    assert s["rmse_best_global_sign"] < 0.9 * s["rmse_mu"]
    assert out.diagnostics["sign_rule"] == SIGN_PLUS


def test_second_order_laplace_eps1_is_weak_eps5_is_not() -> None:
    """Laplace ε = 1 (scale 4 per element): a small but real gain; ε = 5: a large one.

    Measured: ε = 1 RMSE 1.006–1.040 vs µ 1.041–1.090 (reduction 3.4–5.4 %), sign accuracy
    0.60–0.62 vs 0.5; ε = 5 reduction 34–38 %, sign accuracy 0.82–0.84. The per-element noise is
    averaged over m coordinates by the projection on span(V), which is how ε per element lets
    the low-rank part through; the off-model part (coefficient ≈ 0.02) is lost.
    """
    weak, _ = scored("laplace_second_order", (("epsilon", 1.0),))
    strong, _ = scored("laplace_second_order", (("epsilon", 5.0),))
    assert 0.0 < weak["rmse_reduction"] < 0.10
    assert weak["sign_accuracy"] > 0.55
    assert strong["rmse_reduction"] > 0.25
    assert strong["sign_accuracy"] > 0.75


@pytest.mark.parametrize(
    ("mechanism", "params"),
    [("exact_second_order", ()), ("pmc", ()), ("laplace_second_order", (("epsilon", 5.0),))],
)
def test_second_order_shuffled_releases_lose_the_advantage(mechanism: str, params: Params) -> None:
    """Broken observation: each release given to another user; the advantage disappears.

    Measured on the shuffled releases: RMSE after the best global sign 1.07–1.24 ≥ µ's
    1.04–1.09, sign accuracy up to global sign 0.61–0.64 (vs 1.0 / 0.82 unshuffled), i.e. at the
    permuted level.
    """
    real, _ = scored(mechanism, params)
    broken, _ = scored(mechanism, params, broken=True)
    assert real["rmse_best_global_sign"] < 0.7 * real["rmse_mu"]
    assert broken["rmse_best_global_sign"] > broken["rmse_mu"]
    assert broken["rmse_reduction"] < 0.0
    assert broken["sign_accuracy_global"] < 0.70
    assert broken["sign_accuracy_global"] < real["sign_accuracy_global"] - 0.15


def test_second_order_pmc_zero_coordinates_no_longer_reveal_the_coin() -> None:
    """Items no public user rated (here the last 30) get V_j = 0, so a private user who did not
    rate them has r_j − µ_j = 0 exactly. Under the old convention sign(0) := +1 she sent +a·h
    there, the global coin a in clear: the frequency rule was adopted with accuracy 1.0 and the
    RMSE beat µ outright (measured 0.56 vs 1.00). PMC now draws an independent sign at each
    zero, so no rule beats a coin and the attack falls back to ŝ = +1 (the RMSE is then no
    better than µ's, the sign pattern still leaks up to the global sign)."""
    s, out = scored("pmc", (), hide_tail=30)
    assert out.diagnostics["sign_rule"] == SIGN_PLUS
    assert s["rmse"] > s["rmse_mu"]
    assert s["sign_accuracy_global"] > 0.95 > s["sign_accuracy_global_permuted"]


# ------------------------------------------------------------------ the sign rule alone
def _calibration(p_plus: np.ndarray, n: int, seed: int) -> Calibration:
    """Hand-built aligned releases: coordinate j positive with probability p_plus[j]."""
    rng = rng_for(seed, "test-sign-rule")
    m = p_plus.size
    aligned = np.where(rng.random((n, m)) < p_plus, 1.0, -1.0) * rng.uniform(0.5, 1.5, (n, m))
    coins = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return Calibration(
        coins[:, None] * aligned,
        coins,
        np.zeros((n, m)),
        np.arange(n) % 5,
        np.zeros((0, 2)),
        np.zeros(0),
        5,
    )


def test_sign_rule_adopted_only_when_it_beats_a_coin() -> None:
    """Skewed item signs (p = 0.7 on 100 items): adopted, right on almost every user;
    symmetric (p = 0.5): not adopted (accuracy within 2 s.e. of 1/2), ŝ = +1."""
    import scipy.sparse as sp

    ratings = sp.csr_matrix((300, 100))
    skewed = fit_sign_model("pmc", _calibration(np.full(100, 0.7), 300, 1), ratings, 2.0)
    assert skewed.rule == SIGN_FREQUENCY
    assert skewed.accuracy_public > 0.95  # Σ_j of 100 signs, drift 0.4·0.85 per item vs sd 10
    flat = fit_sign_model("pmc", _calibration(np.full(100, 0.5), 300, 2), ratings, 2.0)
    assert flat.rule == SIGN_PLUS
    assert abs(flat.accuracy_public - 0.5) < 0.1
    np.testing.assert_array_equal(flat.choose(np.ones((3, 100)), np.zeros(100)), np.ones(3))


# ------------------------------------------------------------------ contract and errors
def test_second_order_contract() -> None:
    """Registered, one-line knowledge, NotFittedError before fit, deterministic, all items."""
    attack = make_attack(NAME)
    assert ATTACKS[NAME] is SecondOrderReconstruction
    assert attack.knowledge and "\n" not in attack.knowledge
    assert set(attack.applies_to) == {"pmd", "pmc", "laplace_second_order", "exact_second_order"}
    with pytest.raises(NotFittedError):
        attack.output()
    obs = scenario("pmd").observations
    a, b = make_attack(NAME).fit(obs).output(), make_attack(NAME).fit(obs).output()
    assert set(a.per_user) == set(obs.profiles)
    for uid, est in a.per_user.items():
        np.testing.assert_array_equal(est.indices, np.arange(N_ITEMS))
        np.testing.assert_array_equal(est.values, b.per_user[uid].values)
        assert np.all((est.values >= 1.0) & (est.values <= 5.0))


def test_second_order_refuses_without_public_users() -> None:
    """No public tier: a ValidationError naming `public` and saying why."""
    obs = scenario("pmc").observations
    with pytest.raises(ValidationError, match="no public users observed") as info:
        make_attack(NAME).fit(Observations(obs.run_config, obs.profiles, {}))
    assert info.value.field == "public"


def test_second_order_rejects_bad_observations() -> None:
    """Wrong mechanism, missing model params, a malformed release (naming the user)."""
    obs = scenario("pmc").observations
    with pytest.raises(ValidationError) as info:
        make_attack(NAME).fit(
            Observations(
                dataclasses.replace(obs.run_config, mechanism_name="rpt"),
                obs.profiles,
                obs.public,
            )
        )
    assert info.value.field == "run_config.mechanism"
    no_model = dataclasses.replace(obs.run_config, model_params={"k": 0})
    with pytest.raises(ValidationError) as info:
        make_attack(NAME).fit(Observations(no_model, obs.profiles, obs.public))
    assert info.value.field == "run_config.model_params"
    bad = dict(obs.profiles)
    first = next(iter(bad))
    bad[first] = DensePayload(np.ones(N_ITEMS - 1))
    with pytest.raises(ValidationError) as info:
        make_attack(NAME).fit(Observations(obs.run_config, bad, obs.public))
    assert info.value.field == f"profiles[{first!r}]"


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"seed": -1}, "seed"),
        ({"n_folds": 0}, "n_folds"),
        ({"sign_z": float("nan")}, "sign_z"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_second_order_bad_parameters(params: dict[str, object], needle: str) -> None:
    """Bad constructor parameters are ConfigErrors naming the parameter."""
    with pytest.raises(ConfigError, match=needle):
        make_attack(NAME, **params)


# ------------------------------------------------------------------ the referee's scoring
def test_referee_rating_hat_oracles() -> None:
    """r̂ = the truth scores 0 and sign accuracy 1; r̂ = µ scores exactly the µ baseline."""
    sc = scenario("exact_second_order")
    exact, at_mu = {}, {}
    for uid, (items, ratings) in sc.truth.items():
        r = sc.mu.copy()
        r[items] = ratings
        exact[uid] = UserEstimate(np.arange(N_ITEMS), r)
        at_mu[uid] = UserEstimate(np.arange(N_ITEMS), sc.mu.copy())
    public = sc.observations.public
    s = score_attack("x", AttackOutput("x", "rating_hat", "t", exact), sc.truth, public=public)
    assert s["rmse"] == 0.0 and s["mae"] == 0.0
    assert s["sign_accuracy"] == 1.0 and s["sign_accuracy_global"] == 1.0
    assert s["rmse_mu"] == pytest.approx(1.04, abs=0.05)  # rating sd ≈ 1.04 (make_synthetic)
    m = score_attack("x", AttackOutput("x", "rating_hat", "t", at_mu), sc.truth, public=public)
    assert m["rmse"] == m["rmse_mu"] and m["rmse_reduction"] == 0.0
    assert m["sign_accuracy"] == m["sign_accuracy_mu"]
    assert m["sign_accuracy_global"] == m["sign_accuracy_global_mu"]


def test_referee_rating_hat_needs_public_and_chance_is_exact() -> None:
    """Scoring without `public` is refused; E[max(X, n − X)] for X ~ Bin(n, 1/2) is right."""
    sc = scenario("exact_second_order")
    out = AttackOutput(
        "x",
        "rating_hat",
        "t",
        {uid: UserEstimate(np.arange(N_ITEMS), sc.mu.copy()) for uid in sc.truth},
    )
    with pytest.raises(ValueError, match="needs `public`"):
        score_attack("x", out, sc.truth)
    assert max_flip_chance(1) == 1.0
    assert max_flip_chance(2) == pytest.approx(1.5)  # (2 + 1 + 1 + 2) / 4
    assert max_flip_chance(3) == pytest.approx(2.25)  # (3 + 2·3 + 2·3 + 3) / 8
