"""The trivial predictors (`sim.referee_trivial`) and the ranking task (`sim.referee_ranking`)
on hand-made populations: each mean is the mean of exactly the cells the model was fitted on
for that user, never of a test cell; the popularity ranking counts those cells."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.population import population_plan
from privrec.shared.protocol import fold_of
from privrec.sim.referee_ranking import ranking_task, score_ranking, training_popularity
from privrec.sim.referee_trivial import (
    TrainingPools,
    popularity_scorer,
    score_trivial_ratings,
    trivial_predictions,
)
from tests.run_configs import make_run_config


def _data(seed: int = 0, n_users: int = 12, n_items: int = 15) -> RatingData:
    """Every user rates 8 to 12 items, integer ratings 1..5."""
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for u in range(n_users):
        items = np.sort(rng.choice(n_items, size=int(rng.integers(8, 13)), replace=False))
        rows += [u] * items.size
        cols += items.tolist()
        vals += rng.integers(1, 6, size=items.size).astype(float).tolist()
    ratings = sp.csr_matrix((vals, (rows, cols)), shape=(n_users, n_items))
    return RatingData("hand", ratings, np.arange(1, n_users + 1), np.arange(n_items), (1.0, 5.0))


def _config(**evaluation: object) -> ExperimentConfig:
    return ExperimentConfig().replace("data", withheld=3).replace("evaluation", **evaluation)


def test_trivial_means_are_the_means_of_the_cells_her_model_saw() -> None:
    """Thesis protocol (whole profiles released, the querier's fold left out): for each test
    cell, the item mean is the mean of that item's ratings by users outside her fold, the
    global mean theirs over every item, the user mean her own training ratings' mean;
    none of them touches a cell of her fold (her test cells included)."""
    data = _data()
    plans = population_plan(data, _config())
    rc = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 0}, data.n_items)
    pools = TrainingPools.of_run(plans, rc)
    testers = [p for p in plans if p.withheld.size]
    got = trivial_predictions(testers, pools)
    dense = data.ratings.toarray()
    fold = {p.user_id: fold_of(p.user_id, rc.n_folds, rc.fold_seed) for p in plans}
    at = 0
    for plan in testers:
        others = [p.row for p in plans if fold[p.user_id] != fold[plan.user_id]]
        pool = dense[others]
        global_mean = pool[pool > 0].mean()
        for item in plan.withheld:
            column = pool[:, item][pool[:, item] > 0]
            want_item = column.mean() if column.size else global_mean
            assert got["item_mean"][at] == pytest.approx(want_item)
            assert got["global_mean"][at] == pytest.approx(global_mean)
            assert got["user_mean"][at] == pytest.approx(plan.training_profile().ratings.mean())
            at += 1
    assert at == sum(p.withheld.size for p in testers)


def test_holdout_pools_hold_no_test_cell() -> None:
    """A run whose users release only their training ratings (two-tier): one pool of every
    user's training cells; a test cell's own rating never enters it (changing it changes no
    trivial prediction)."""
    data = _data(1)
    plans = population_plan(data, _config())
    rc = make_run_config("raw", {}, data.n_items, model="two_tier_lowrank")
    pools = TrainingPools.of_run(plans, rc)
    assert not pools.exclude_own
    counts = np.zeros(data.n_items)
    for p in plans:
        counts[p.training_profile().items] += 1
    np.testing.assert_array_equal(pools.counts.sum(axis=0), counts)
    testers = [p for p in plans if p.withheld.size]
    before = trivial_predictions(testers, pools)
    shifted = data.ratings.copy()
    for p in testers:  # every test rating changed: the pools must not notice
        for item in p.withheld:
            shifted[p.row, item] = 6.0 - shifted[p.row, item]
    again = population_plan(
        RatingData("hand", shifted, data.user_ids, data.item_ids, (1, 5)), _config()
    )
    after = trivial_predictions(
        [p for p in again if p.withheld.size], TrainingPools.of_run(again, rc)
    )
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def test_trivial_scores_and_popularity_ranking() -> None:
    """MAE/RMSE keys for each mean; the popularity ranking puts the most-rated candidates of
    her pool first and is scored like any ranking."""
    data = _data(2, n_users=30, n_items=20)
    cfg = _config(relevance_threshold=3.0)
    plans = population_plan(data, cfg)
    rc = make_run_config("rpt", {"sigma_max": 1.0, "beta_max": 0}, data.n_items)
    pools = TrainingPools.of_run(plans, rc)
    testers = [p for p in plans if p.withheld.size]
    scores = score_trivial_ratings(testers, pools, (1.0, 5.0))
    assert set(scores) == {
        f"trivial_{n}_{m}"
        for n in ("global_mean", "user_mean", "item_mean")
        for m in ("mae", "rmse")
    }
    task = ranking_task(cfg, plans, data, None)
    assert task is not None
    score = popularity_scorer(task, pools)
    ((s, evidence),) = score([0])
    _, counts = pools.pool(task.plans[0].user_id)
    np.testing.assert_array_equal(s, counts[task.candidates[0]])
    np.testing.assert_array_equal(evidence, counts[task.candidates[0]] > 0)
    got = score_ranking(task, score, "trivial_popularity")
    assert {"trivial_popularity_ndcg_at_10", "trivial_popularity_arp_at_20"} <= set(got)
    np.testing.assert_array_equal(task.popularity, training_popularity(data.n_items, plans))


def test_ranking_task_candidates_and_sampled_negatives(tmp_path) -> None:
    """Full ranking: every item not in her training profile (withheld items included).
    Sampled: her withheld items and `negatives` items she never rated — never one of her test
    items nor a rated one; the sample is written and its SHA-256 reported."""
    data = _data(3, n_users=20, n_items=40)
    cfg = _config(relevance_threshold=1.0)
    plans = population_plan(data, cfg)
    full = ranking_task(cfg, plans, data, None)
    assert full is not None
    for plan, cand in zip(full.plans, full.candidates, strict=True):
        want = np.setdiff1d(np.arange(data.n_items), plan.training_profile().items)
        np.testing.assert_array_equal(cand, want)
    sampled_cfg = _config(relevance_threshold=1.0, candidates="sampled", negatives=7)
    sampled = ranking_task(sampled_cfg, plans, data, tmp_path)
    assert sampled is not None and len(sampled.sample_sha256) == 64
    for plan, cand in zip(sampled.plans, sampled.candidates, strict=True):
        negatives = np.setdiff1d(cand, plan.withheld)
        assert negatives.size == 7
        assert not np.isin(negatives, plan.profile.items).any()
        assert np.isin(plan.withheld, cand).all()
    with np.load(tmp_path / "evaluation" / "negatives.npz") as z:
        assert z["offsets"][-1] == sum(c.size for c in sampled.candidates)
    again = ranking_task(sampled_cfg, plans, data, tmp_path)
    assert again is not None and again.sample_sha256 == sampled.sample_sha256
