"""The referee (`sim.referee`): it rebuilds each user's truth from the public plan alone and
scores what the clients wrote."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.errors import PrivrecError
from privrec.shared.population import population_plan
from privrec.sim.referee import score_baseline, score_predictions


def config() -> ExperimentConfig:
    return ExperimentConfig().replace("model", name="ppcf", k=10)


def write_predictions(out: Path, preds: dict[str, np.ndarray]) -> None:
    (out / "predictions").mkdir(parents=True, exist_ok=True)
    np.savez(out / "predictions" / "shard-0.npz", **preds)


def test_perfect_rating_predictions_score_zero(tmp_path: Path) -> None:
    """Clients that predict exactly the withheld ratings get MAE = RMSE = 0; shifting every
    prediction by 0.5 gives MAE 0.5 (the referee really compares with the truth)."""
    data = make_synthetic(40, 30, density=0.4, seed=1)
    testers = [p for p in population_plan(data, config()) if p.withheld.size]
    truth = np.concatenate([p.withheld_ratings() for p in testers])
    base = {
        "user_ids": np.array([p.user_id for p in testers for _ in p.withheld]),
        "items": np.concatenate([p.withheld for p in testers]),
        "n_neighbours": np.ones(truth.size, np.int64),
        "score_kind": np.array("rating"),
    }
    write_predictions(tmp_path, base | {"scores": truth, "predictions": truth})
    got = score_predictions(config(), data, tmp_path)
    assert got["ppcf_mae"] == 0.0 and got["ppcf_rmse"] == 0.0
    assert got["ppcf_predictions"] == truth.size
    shifted = np.clip(truth + 0.5, 1, 5)
    write_predictions(tmp_path, base | {"scores": shifted, "predictions": shifted})
    assert score_predictions(config(), data, tmp_path)["ppcf_mae"] == pytest.approx(
        np.mean(np.abs(shifted - truth))
    )


def test_no_predictions_is_an_error(tmp_path: Path) -> None:
    """A run directory without predictions is refused, naming where it looked."""
    with pytest.raises(PrivrecError, match="no predictions"):
        score_predictions(config(), make_synthetic(20, 20, seed=0), tmp_path)


def test_baseline_scores_every_tester_once() -> None:
    """The Pearson baseline predicts every withheld rating of every test user."""
    data = make_synthetic(60, 40, density=0.3, seed=2)
    out = score_baseline(config(), data)
    assert 0.3 < out["baseline_pearson_knn_mae"] < 1.5
    assert out["baseline_pearson_knn_rmse"] >= out["baseline_pearson_knn_mae"]


def test_a_dp_factorisation_model_is_scored_beside_biased_mf() -> None:
    """DPSGD-MF and DPPS-MF declare `biased_mf` (the trainer they perturb) as their
    non-private counterpart: the baseline is biased_mf with its defaults fitted on the true
    ratings with the run's folds, each test user folded in with her training ratings."""
    from privrec.server.fitting import answer_predicts, fit, recommender
    from privrec.server.models import make_model
    from privrec.shared.protocol import fold_of

    data = make_synthetic(60, 40, density=0.3, seed=2)
    for name in ("dpsgd_mf", "dpps_mf"):
        cfg = ExperimentConfig().replace("model", name=name)
        out = score_baseline(cfg, data)
        assert set(out) == {"baseline_biased_mf_mae", "baseline_biased_mf_rmse"}
    plans = population_plan(data, cfg)
    folds = np.array([fold_of(p.user_id, cfg.data.n_folds, cfg.run.seed) for p in plans])
    model = recommender(fit(make_model("biased_mf", {}), data.ratings, folds), "biased_mf")
    testers = [p for p in plans if p.withheld.size]
    queries = [(q.items, q.ratings) for q in (p.training_profile() for p in testers)]
    answers = answer_predicts(
        model, queries, [p.withheld for p in testers], [int(folds[p.row]) for p in testers]
    )
    scores = np.clip(np.concatenate([s for s, _ in answers]), *data.rating_scale)
    truth = np.concatenate([p.withheld_ratings() for p in testers])
    assert out["baseline_biased_mf_mae"] == pytest.approx(np.mean(np.abs(scores - truth)))
    pearson = score_baseline(config(), data)["baseline_pearson_knn_mae"]
    assert out["baseline_biased_mf_mae"] != pearson
