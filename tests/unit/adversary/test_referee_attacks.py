"""The referee's attack scoring (sim.referee_attacks): oracles and baselines."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.adversary.attacks.base import AttackOutput, OutputKind, UserEstimate
from privrec.shared.metrics import roc_auc
from privrec.shared.zscores import zscore
from privrec.sim.referee_attacks import SCORERS, score_attack
from privrec.sim.referee_truth import truth_from_rating_data


def _output(kind: str, per_user: dict[str, UserEstimate], name: str = "x") -> AttackOutput:
    return AttackOutput(attack=name, kind=kind, knowledge="test", per_user=per_user)


def test_oracle_reconstruction_scores_zero(disguised) -> None:  # type: ignore[no-untyped-def]
    """ẑ = the true z on genuine cells gives RMSE 0, and the naive baseline is σ_max/√3.

    Naive: E[(z′ − z)²] = E[σ²] = σ_max²/3. Over 400 users the mean of σ² (σ ~ U(0, 1]) has
    standard error √(1/5 − 1/9)/√400 ≈ 0.015 around 1/3, i.e. ≈ 2.2 % on the RMSE; a 9 % band
    is 4 standard errors (cell-level noise adds little with ≈ 12,000 cells).
    """
    d = disguised(1.0, 10)
    per_user = {}
    for uid, p in d.observations.profiles.items():
        items, ratings = d.truth[uid]
        values = np.zeros(p.indices.size)
        values[np.searchsorted(p.indices, items)] = zscore(ratings).z
        per_user[uid] = UserEstimate(p.indices, values)
    s = score_attack("x", _output("z_hat", per_user), d.truth, releases=d.observations.profiles)
    assert s["rmse_z"] == pytest.approx(0.0, abs=1e-12)
    assert s["coverage"] == 1.0
    assert s["rmse_z_naive"] == pytest.approx(1.0 / np.sqrt(3.0), rel=0.09)
    assert s["rmse_z_zero"] == pytest.approx(1.0, abs=0.05)  # z-scores have variance 1


def test_oracle_detection_scores(disguised) -> None:  # type: ignore[no-untyped-def]
    """The true labels as scores give AUC 1 and exact lists; negated, AUC 0."""
    d = disguised(1.0, 10)
    good, bad = {}, {}
    for uid, p in d.observations.profiles.items():
        label = np.isin(p.indices, d.truth[uid][0]).astype(float)
        good[uid] = UserEstimate(p.indices, label)
        bad[uid] = UserEstimate(p.indices, -label)
    s = score_attack("x", _output("genuine_score", good), d.truth)
    assert s["auc"] == 1.0 and s["auc_per_user_mean"] == 1.0
    assert s["exact_list_rate"] == 1.0 and s["top_g_precision"] == 1.0
    assert s["auc_baseline"] == 0.5
    assert s["top_g_precision_chance"] == pytest.approx(
        s["n_genuine"] / (s["n_genuine"] + s["n_fake"]), rel=0.2
    )
    assert score_attack("x", _output("genuine_score", bad), d.truth)["auc"] == 0.0


def test_truth_from_rating_data_uses_wire_ids(population) -> None:  # type: ignore[no-untyped-def]
    """Truth is keyed by the dataset's own user id as a string (client.population.user_id_of)."""
    truth = truth_from_rating_data(population)
    assert len(truth) == population.n_users
    items, _ = truth[str(int(population.user_ids[3]))]
    np.testing.assert_array_equal(items, population.user_row(3)[0])


def test_score_attack_rejects_mismatches() -> None:
    """A name that is not the output's, an unknown kind, or no overlap are errors."""
    est = {"1": UserEstimate(np.array([0, 2]), np.array([0.1, 0.2]))}
    truth = {"1": (np.array([0, 1]), np.array([4.0, 2.0]))}
    with pytest.raises(ValueError, match="not 'y'"):
        score_attack("y", _output("z_hat", est), truth)
    with pytest.raises(ValueError, match="no scoring rule"):
        score_attack("x", _output("odd", est), truth)
    with pytest.raises(ValueError, match="no estimate"):
        score_attack("x", _output("z_hat", est), {"1": (np.array([1]), np.array([3.0]))})


def _detection_by_user_loop(
    per_user: dict[str, UserEstimate], truth: dict[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, float]:
    """The per-user loop the detection scores were first computed with (`roc_auc` and a
    stable sort per user), kept as the oracle of the one-pass version."""
    labels, scores, aucs = [], [], []
    exact = prec = chance = n = 0.0
    for uid, est in per_user.items():
        y = np.isin(est.indices, truth[uid][0], assume_unique=True)
        g = int(y.sum())
        labels.append(y)
        scores.append(est.values)
        if 0 < g < y.size:
            aucs.append(roc_auc(y, est.values))
            top = np.argsort(-est.values, kind="stable")[:g]
            n += 1
            prec += float(y[top].mean())
            chance += g / y.size
            exact += float(y[top].all())
    lab, sc = np.concatenate(labels), np.concatenate(scores)
    return {
        "auc": roc_auc(lab, sc),
        "auc_per_user_mean": float(np.mean(aucs)),
        "n_genuine": float(lab.sum()),
        "top_g_precision": prec / n,
        "top_g_precision_chance": chance / n,
        "exact_list_rate": exact / n,
    }


@pytest.mark.parametrize("with_nan", [False, True])
def test_detection_scores_equal_the_per_user_loop_bit_for_bit(with_nan: bool) -> None:
    """1,500 users with tied and signed-zero scores (and, in the second case, NaN scores), some
    with only genuine or only fake cells (no per-user figure), some with no cell: every figure
    equals the loop's exactly."""
    rng = np.random.default_rng(3)
    per_user, truth = {}, {}
    for u in range(1500):
        m = int(rng.integers(0, 30))
        idx = np.sort(rng.choice(60, size=m, replace=False))
        vals = rng.integers(-3, 4, m).astype(float)  # ties within a user
        noisy = rng.random(m) < 0.3
        vals[noisy] += rng.standard_normal(int(noisy.sum()))
        vals[vals == 0.0] = -0.0 if u % 2 else 0.0
        if with_nan and (u % 97 == 0 or u % 7 == 1) and m:  # in mixed and one-class users
            vals[0] = np.nan
        p_genuine = {0: 0.0, 1: 1.0}.get(u % 7, 0.5)  # every 7th: fakes only, genuine only
        genuine = idx[rng.random(m) < p_genuine]
        per_user[str(u)] = UserEstimate(idx, vals)
        truth[str(u)] = (genuine, np.full(genuine.size, 3.0))
    got = score_attack("x", _output("genuine_score", per_user), truth)
    want = _detection_by_user_loop(per_user, truth)
    for key, value in want.items():
        assert got[key] == value or (np.isnan(got[key]) and np.isnan(value)), key
    # a NaN score makes that user's AUC NaN, as `roc_auc` does
    assert np.isnan(got["auc_per_user_mean"]) == with_nan


def test_every_output_kind_has_a_scoring_rule() -> None:
    """The referee's table covers every `OutputKind`, and a string names its kind."""
    assert set(SCORERS) == set(OutputKind)
    est = {"1": UserEstimate(np.array([0]), np.array([0.1]))}
    assert _output("z_hat", est).kind is OutputKind.Z_HAT
