"""Balu's four scorers on small synthetic populations where the answer is known
(adversary.attacks.balu_single, balu_popularity, balu_mcmc)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.balu_mcmc import JointDecoder
from privrec.adversary.attacks.base import AttackOutput
from privrec.adversary.attacks.itemset_channel import channel_for
from privrec.adversary.attacks.itemset_prior import smoothed_log_odds, tilted_log_odds
from privrec.adversary.observations import Observations
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import ConfigError, ValidationError
from privrec.shared.mechanisms import make_mechanism
from privrec.shared.mechanisms.base import Profile
from privrec.shared.seeding import rng_for
from privrec.sim.referee_attacks import score_attack
from tests.run_configs import make_run_config

N_ITEMS = 300


def population(n_users: int, size: int, seed: int, skew: float) -> RatingData:
    """`n_users` profiles of `size` items drawn with popularity ∝ rank^(−skew)."""
    rng = rng_for(seed, "test", "balu-population")
    weight = 1.0 / (np.arange(N_ITEMS) + 1.0) ** skew
    weight /= weight.sum()
    rows = [np.sort(rng.choice(N_ITEMS, size, replace=False, p=weight)) for _ in range(n_users)]
    indptr = np.arange(n_users + 1) * size
    mat = sp.csr_matrix(
        (np.ones(n_users * size), np.concatenate(rows), indptr), shape=(n_users, N_ITEMS)
    )
    return RatingData("balu-test", mat, np.arange(n_users), np.arange(N_ITEMS), (1.0, 5.0))


@functools.cache
def world(
    mechanism: str,
    params: tuple[tuple[str, object], ...],
    n_users: int = 40,
    size: int = 12,
    skew: float = 1.0,
    n_aux: int = 200,
) -> tuple[Observations, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Releases of `n_users` attacked users + `n_aux` auxiliary users (ids after them)."""
    data = population(n_users + n_aux, size, 1, skew)
    mech = make_mechanism(mechanism, dict(params))
    profiles, truth = {}, {}
    for u in range(data.n_users):
        items, ratings = data.user_row(u)
        uid = str(u)
        profiles[uid] = mech.release(
            Profile(items.astype(np.int64), ratings, N_ITEMS), rng_for(2, "user", uid, "release")
        )
        truth[uid] = (items, ratings)
    aux_rows = slice(n_users, n_users + n_aux)
    aux = RatingData(
        "aux",
        data.ratings[aux_rows].tocsr(),
        data.user_ids[aux_rows],
        data.item_ids,
        data.rating_scale,
    )
    run_config = make_run_config(mechanism, mech.public_params(), N_ITEMS)
    obs = Observations(run_config, dict(sorted(profiles.items())), auxiliary=aux)
    return obs, truth


BLIP = (("epsilon", 8.0), ("n_bits", 1500), ("n_hashes", 10))


def _fit(name: str, obs: Observations, **params: object) -> AttackOutput:
    return make_attack(name, **params).fit(obs).output()


def test_attacks_skip_the_auxiliary_users() -> None:
    """Only the 40 users outside the auxiliary set are attacked, each with a set size."""
    obs, _ = world("blip", BLIP)
    for name in ("balu_single", "balu_popularity"):
        out = _fit(name, obs)
        assert set(out.per_user) == {str(u) for u in range(40)}
        assert set(out.set_sizes) == set(out.per_user)
        assert out.kind == "item_set"


def test_no_noise_gives_perfect_recovery() -> None:
    """BLIP with p = e^{−100} (ε = 1000, K = 10) and JLT with σ = 0: every decoder that reads
    the release ranks each profile's |P| items first (mAP@10 = 1). BLIP's ĉ is then exact too
    (cosine 1); JLT's (3.11) is off by the spread of the codewords' norms (‖X_j‖² = 1 ± 0.03 at
    L = 2000), so ĉ may miss by one and the cosine is ≥ 0.9. (L = 2000 keeps the single
    decoder's interference from the 11 other items, sd √(11/L), far below the unit signal.)"""
    for mechanism, params in (
        ("blip", (("epsilon", 1000.0), ("n_bits", 1500), ("n_hashes", 10))),
        (
            "jlt",
            (("epsilon", 600.0), ("dim", 2000), ("sigma_rule", "balu2016"), ("n_items", N_ITEMS)),
        ),
    ):
        obs, truth = world(mechanism, params)
        for name, extra in (
            ("balu_single", {}),
            ("balu_mcmc", {"burn_in": 200, "samples": 2000}),
            ("balu_mcmc_flat", {"burn_in": 200, "samples": 2000}),
        ):
            out = _fit(name, obs, **extra)
            for uid, est in out.per_user.items():
                items = truth[uid][0]
                top = est.indices[np.lexsort((est.indices, -est.values))][: items.size]
                assert set(top.tolist()) == set(items.tolist()), (mechanism, name, uid)
            m = score_attack(name, out, truth, n_items=N_ITEMS)
            assert m["map_at_10"] == 1.0
            if mechanism == "blip":
                assert m["cosine_mean"] == 1.0 and m["c_hat_mean"] == 12.0, (name, m)
            else:
                assert m["cosine_mean"] >= 0.9, (name, m)


def test_at_epsilon_zero_the_joint_decoder_returns_its_prior() -> None:
    """BLIP at ε = 0 carries nothing: the marginals of the prior chain estimate the prior's
    inclusion probabilities sigmoid(β_j) (mean absolute error < 0.03 over all candidates of
    all users: it was 0.018–0.019 on population seeds 1–5, the Monte Carlo error of T + M =
    20,000 steps), its mAP@10 is the popularity baseline's (±0.003 on those seeds), and the
    single decoder is blind (presence AUC 0.48–0.51 on those seeds)."""
    obs, truth = world("blip", (("epsilon", 0.0), ("n_bits", 1500), ("n_hashes", 10)))
    out = _fit("balu_mcmc", obs, burn_in=1000, samples=19000)
    base = smoothed_log_odds(obs.auxiliary, N_ITEMS)  # type: ignore[arg-type]
    errors = []
    for uid, est in out.per_user.items():
        q = expit(tilted_log_odds(base[est.indices], out.set_sizes[uid]))
        errors.append(np.abs(est.values - q))
    assert np.mean(np.concatenate(errors)) < 0.03
    single = score_attack("balu_single", _fit("balu_single", obs), truth, n_items=N_ITEMS)
    assert abs(single["presence_auc"] - 0.5) < 0.05
    pop = score_attack("balu_popularity", _fit("balu_popularity", obs), truth, n_items=N_ITEMS)
    mcmc = score_attack("balu_mcmc", out, truth, n_items=N_ITEMS)
    # the prior chain ranks like the popularity baseline, far above the blind decoders
    assert abs(mcmc["map_at_10"] - pop["map_at_10"]) < 0.03
    assert pop["map_at_10"] > single["map_at_10"] + 0.2


def test_joint_decoder_beats_single_decoder_at_high_epsilon() -> None:
    """Uniform profiles (no prior to exploit), BLIP ε = 20, K = 10: the flat joint decoder's
    mean cosine exceeds the single decoder's. Seeded; over population seeds 1–5 of this test
    world the gap was 0.022–0.029 (single 0.944–0.952), so 0.01 leaves room."""
    params = (("epsilon", 20.0), ("n_bits", 1500), ("n_hashes", 10))
    obs, truth = world("blip", params, n_users=30, size=40, skew=0.0)
    single = score_attack("balu_single", _fit("balu_single", obs), truth, n_items=N_ITEMS)
    joint = score_attack("balu_mcmc_flat", _fit("balu_mcmc_flat", obs), truth, n_items=N_ITEMS)
    assert joint["cosine_mean"] > single["cosine_mean"] + 0.01, (joint, single)


def test_prior_helps_on_skewed_profiles() -> None:
    """Zipf-skewed profiles at a weak ε (6): the popularity prior lifts the joint decoder
    above the flat one and above the popularity baseline. Seeded; on population seeds 1–5
    prior 0.544–0.568, flat 0.368–0.404, popularity 0.363–0.415."""
    obs, truth = world("blip", (("epsilon", 6.0), ("n_bits", 1500), ("n_hashes", 10)))
    m = {
        n: score_attack(n, _fit(n, obs), truth, n_items=N_ITEMS)["cosine_mean"]
        for n in ("balu_mcmc", "balu_mcmc_flat", "balu_popularity")
    }
    assert m["balu_mcmc"] > m["balu_mcmc_flat"] + 0.08, m
    assert m["balu_mcmc"] > m["balu_popularity"] + 0.08, m


def test_same_seed_same_marginals_other_seed_other_chains() -> None:
    """random_state fixes every chain; another seed changes them."""
    obs, _ = world("blip", BLIP)
    a = _fit("balu_mcmc_flat", obs, burn_in=10, samples=200)
    b = _fit("balu_mcmc_flat", obs, burn_in=10, samples=200)
    c = _fit("balu_mcmc_flat", obs, burn_in=10, samples=200, random_state=1)
    assert all(np.array_equal(a.per_user[u].values, b.per_user[u].values) for u in a.per_user)
    assert any(not np.array_equal(a.per_user[u].values, c.per_user[u].values) for u in a.per_user)


def test_prior_attacks_need_the_auxiliary_set() -> None:
    """Without auxiliary users the popularity baseline and the prior chain refuse, naming the
    config key; the single decoder and the flat chain attack every observed user."""
    obs, _ = world("blip", BLIP)
    bare = Observations(obs.run_config, obs.profiles)
    for name in ("balu_popularity", "balu_mcmc"):
        with pytest.raises(ValidationError, match="auxiliary"):
            make_attack(name).fit(bare)
    out = _fit("balu_mcmc_flat", bare, burn_in=10, samples=100)
    assert len(out.per_user) == len(obs.profiles)


def test_blip_at_epsilon_zero_takes_the_auxiliary_mean_size() -> None:
    """ε = 0: ĉ is the auxiliary users' mean profile size (12), said in the knowledge line."""
    obs, _ = world("blip", (("epsilon", 0.0), ("n_bits", 1500), ("n_hashes", 10)))
    out = _fit("balu_single", obs)
    assert set(out.set_sizes.values()) == {12}
    assert "mean profile size" in out.knowledge


def test_candidates_and_slots_follow_the_size_estimate() -> None:
    """The chain's candidates are the f·ĉ best single-decoder items (flat prior; equal scores
    at the cut go either way, at random), its slots c_max lie in [ĉ, f·ĉ]."""
    obs, _ = world("blip", BLIP)
    attack = JointDecoder(prior="flat", prefilter=3.0, burn_in=0, samples=1)
    out = attack.fit(obs).output()
    channel = channel_for(obs)
    targets = attack._targets(obs, channel)
    single = channel.single_scores(targets.releases, targets.sizes.c_hat)
    for u, uid in enumerate(targets.user_ids):
        n_c = 3 * out.set_sizes[uid]
        cut = np.sort(single[u])[::-1][n_c - 1]
        chosen = out.per_user[uid].indices
        assert chosen.size == n_c
        assert np.all(single[u][chosen] >= cut)
        assert set(np.flatnonzero(single[u] > cut).tolist()) <= set(chosen.tolist())
    assert out.diagnostics["c_max_mean"] <= out.diagnostics["candidates_mean"]


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"prior": "psychic"}, "prior"),
        ({"burn_in": -1}, "burn_in"),
        ({"samples": 0}, "samples"),
        ({"prefilter": 0.5}, "prefilter"),
        ({"confidence": 1.0}, "confidence"),
        ({"sigma_floor": 0.0}, "sigma_floor"),
    ],
)
def test_bad_parameters_are_config_errors(params: dict[str, object], needle: str) -> None:
    """Each bad value is a ConfigError naming the parameter."""
    with pytest.raises(ConfigError, match=needle):
        make_attack("balu_mcmc", **params)
