"""`sim.reproduce.protocol_run.ProtocolRun`: the user split, the non-private twins and the
classifier scoring that Bilge Ch. 4, 5 and 8 use (its agreement with `privrec sim` is checked in
tests/integration/test_bilge_clustered_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.server.models.knn import PearsonKNN
from privrec.server.models.nbc import PPNBC
from privrec.shared.config import ExperimentConfig
from privrec.shared.zscores import zscore
from privrec.sim.reproduce.protocol_run import ProtocolRun

DATA = {"dataset": "synthetic", "synthetic_users": 90, "synthetic_items": 50}


def _config(mechanism: dict, model: str = "ppcf") -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "run": {"name": "protocol-run", "seed": 3},
            "data": DATA,
            "mechanism": mechanism,
            "model": {"name": model, "k": 10},
        }
    )


RPT = {"name": "rpt", "params": {"sigma_max": 1.0}}


def test_user_split_queries_only_the_chosen_users_and_hides_them_from_training() -> None:
    run = ProtocolRun(_config(RPT), test_fraction=0.3)
    assert int(run.groups.sum()) == round(0.3 * 90)
    chosen = {run.user_ids[i] for i in np.flatnonzero(run.groups)}
    assert {a.user_id for a in run.testers} <= chosen
    assert run.exclude == [1] * len(run.testers)  # the test group is excluded from the fit
    assert len(run.queries) == len(run.items) == len(run.testers)
    again = ProtocolRun(_config(RPT), test_fraction=0.3)
    np.testing.assert_array_equal(run.groups, again.groups)  # the split is seeded


def test_cross_validation_groups_are_the_folds() -> None:
    run = ProtocolRun(_config(RPT))
    assert set(run.groups.tolist()) <= set(range(run.config.data.n_folds))
    assert len(set(run.groups.tolist())) > 1
    assert run.exclude == [int(run.groups[run.user_ids.index(a.user_id)]) for a in run.testers]


def test_true_twins_carry_each_users_own_data() -> None:
    run = ProtocolRun(_config(RPT), test_fraction=0.3)
    ratings, z = run.true_train("ratings"), run.true_train("zscores")
    agent = run.agents[5]
    row = ratings.getrow(5)
    np.testing.assert_array_equal(row.indices, agent.profile.items)
    np.testing.assert_array_equal(row.data, agent.profile.ratings)
    np.testing.assert_allclose(z.getrow(5).data, zscore(agent.profile.ratings).z)
    with pytest.raises(ValueError, match="`kind` must be one of"):
        run.true_train("likes")
    with pytest.raises(ValueError, match="`test_fraction`"):
        ProtocolRun(_config(RPT), test_fraction=1.5)


def test_private_and_true_scores_differ_and_true_cf_scores_like_the_registry_model() -> None:
    run = ProtocolRun(_config(RPT), test_fraction=0.3)
    private = run.evaluate(run.build("ppcf"), run.releases(), run.queries)
    scale = run.data.rating_scale
    true = run.evaluate(
        PearsonKNN(k=10, clip=scale), run.true_train("ratings"), run.true_queries("ratings")
    )
    assert private.predictions.size == true.predictions.size == run.truth.size
    assert 0.0 < true.mae < private.mae  # noise costs accuracy on this population
    assert private.metrics.keys() == {"mae", "rmse", "mae_other_clip"}
    with pytest.raises(ValueError, match="queries for"):
        run.evaluate(run.build("ppcf"), run.releases(), run.queries[:-1])


def test_classifier_is_scored_by_accuracy_and_f1() -> None:
    rrt = {"name": "rrt", "params": {"theta": 0.8, "n_groups": 3, "threshold": 3.0}}
    run = ProtocolRun(_config(rrt, "ppnbc"), test_fraction=0.3)
    s = run.evaluate(PPNBC(theta=0.8, random_state=0), run.releases(), run.queries)
    assert set(s.metrics) == {"ca", "f1", "precision", "recall"}
    assert set(np.unique(s.predictions)) <= {0.0, 1.0}
    with pytest.raises(KeyError, match="'mae' is not scored"):
        _ = s.mae
