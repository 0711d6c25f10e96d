"""The referee's attack scoring (sim.referee_attacks): oracles and baselines."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.adversary.attacks.base import AttackOutput, UserEstimate
from privrec.shared.zscores import zscore
from privrec.sim.referee_attacks import score_attack, truth_from_rating_data


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
