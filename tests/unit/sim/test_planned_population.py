"""The referee's view of the plan (`sim.planned_population`): under the thesis protocol it
plans only the test users, and gives exactly what planning everyone gives (issue 28: at a
million users the plans of everyone took minutes and gigabytes)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.population import population_plan, rows_of_testers
from privrec.sim.planned_population import PlannedPopulation
from privrec.sim.referee_ranking import training_popularity
from privrec.sim.referee_trivial import TrainingPools
from tests.run_configs import make_run_config


@pytest.mark.parametrize("test_users", [0, 13])
@pytest.mark.parametrize("holdout", [False, True])
def test_thesis_view_equals_planning_everyone(test_users: int, holdout: bool) -> None:
    """Cells, training flags, test users, popularity and the trivial predictors' pools are
    the same numbers with and without planning every user (users too short to test, 6
    ratings with k = 5, among them)."""
    data = make_synthetic(80, 14, density=0.5, min_ratings=6, seed=9)
    config = ExperimentConfig().replace("evaluation", test_users=test_users)
    plans = population_plan(data, config)
    fast = PlannedPopulation.of_run(data, config)
    slow = PlannedPopulation.of_plans(plans, data.n_items)
    for field in ("rows", "items", "ratings", "training", "every_row"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field))
    assert [p.user_id for p in fast.testers] == [p.user_id for p in slow.testers]
    assert [p.row for p in fast.testers] == rows_of_testers(data, config).tolist()
    for a, b in zip(fast.testers, slow.testers, strict=True):
        np.testing.assert_array_equal(a.withheld, b.withheld)
    np.testing.assert_array_equal(fast.popularity(), training_popularity(data.n_items, plans))
    rc = make_run_config("rpt", {}, data.n_items)  # 5 folds, each user's left out
    if holdout:  # no fold rule: users release their training ratings only
        rc = dataclasses.replace(rc, n_folds=0)
    assert rc.holdout == holdout
    a, b = TrainingPools.of_run(fast, rc), TrainingPools.of_run(plans, rc)
    np.testing.assert_array_equal(a.sums, b.sums)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert a.group_of == {p.user_id: b.group_of[p.user_id] for p in slow.testers}
    released = sum((p.training_profile() if holdout else p.profile).items.size for p in plans)
    assert int(fast.released(holdout).sum()) == released
    if test_users:
        assert len(fast.testers) == test_users
