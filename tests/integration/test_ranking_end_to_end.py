"""Ranking evaluation end to end (`privrec sim`, in-process): the referee's ranking is the model
the aggregator fitted answering the very queries the clients sent — its scores at each test
user's withheld items equal, bit for bit, the scores her Predict got — and the report carries
the ranking metrics, the non-private counterpart's and the trivial predictors' beside the
model's, in report.json, report.md and the figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.population import load_population, population_plan
from privrec.sim.referee import stored_run_config
from privrec.sim.referee_ranking import RankingTask, ranking_task, served_scorer
from privrec.sim.run import SimOptions, simulate

BASE: dict[str, Any] = {
    "run": {"seed": 3},
    "data": {"dataset": "synthetic", "synthetic_users": 60, "synthetic_items": 80},
    "population": {"shards": 2, "batch_size": 16},
    "adversary": {"attacks": []},
}
RUNS = {
    "ppcf": {"model": {"name": "ppcf", "k": 10}},
    "sgd_mf": {
        "mechanism": {"name": "raw"},
        "model": {"name": "sgd_mf", "k": 4, "params": {"epochs": 3}},
    },
}
RANKING_KEYS = ("precision", "recall", "ndcg", "hit_rate", "mrr", "coverage", "arp")


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    name = request.param
    config = ExperimentConfig.from_dict(BASE | RUNS[name] | {"run": {"name": name, "seed": 3}})
    out = tmp_path_factory.mktemp(name)
    report = simulate(config, SimOptions(out, launcher="inprocess", mqtt="none"))
    return name, config, out, report


def test_served_ranking_scores_are_the_clients_predict_answers(run: Any) -> None:
    """Restored model + recorded query = the aggregator's answer: at each ranked user's
    withheld items the referee's scores equal the scores her Predict returned."""
    _, config, out, _ = run
    data = load_population(config.data, config.run.seed)
    plans = population_plan(data, config)
    task = ranking_task(config, plans, data, None)
    assert task is not None
    withheld = RankingTask(
        plans=task.plans,
        candidates=[p.withheld for p in task.plans],
        relevant=task.relevant,
        ks=task.ks,
        n_items=task.n_items,
        popularity=task.popularity,
        unranked=task.unranked,
    )
    scorer = served_scorer(out, stored_run_config(out / "server.sqlite"), withheld)
    ours = scorer(range(len(task.plans)))
    parts = [dict(np.load(f)) for f in sorted((out / "predictions").glob("shard-*.npz"))]
    theirs: dict[tuple[str, int], float] = {}
    for p in parts:
        for u, i, s in zip(p["user_ids"], p["items"], p["scores"], strict=True):
            theirs[(str(u), int(i))] = float(s)
    for plan, (scores, _) in zip(task.plans, ours, strict=True):
        want = [theirs[(plan.user_id, int(i))] for i in plan.withheld]
        np.testing.assert_array_equal(scores, want)


def test_report_ranks_beside_the_counterpart_and_trivial_predictors(run: Any) -> None:
    """report.json: every ranking metric at K = 10 and 20 for the model, the non-private
    counterpart and popularity, and the trivial means beside MAE/RMSE; report.md's utility
    tables and the two utility figures."""
    name, _, out, report = run
    u = report["utility"]
    for owner in (name, "baseline_pearson_knn", "trivial_popularity"):
        for metric in RANKING_KEYS:
            for k in (10, 20):
                value = u[f"{owner}_{metric}_at_{k}"]
                assert np.isfinite(value) and value >= 0.0
                if metric != "arp":
                    assert value <= 1.0
    for mean in ("global_mean", "user_mean", "item_mean"):
        assert {f"trivial_{mean}_mae", f"trivial_{mean}_rmse"} <= set(u)
    assert report["evaluation"]["ranking"]["candidates"] == "all"
    md = (out / "report.md").read_text()
    assert "| NDCG@10 |" in md and "trivial: popularity" in md and "| MAE |" in md
    assert {"utility.png", "utility_ranking.png"} <= {p.name for p in (out / "plots").iterdir()}
    on_disk = json.loads((out / "report.json").read_text())
    assert on_disk["utility"] == u


def test_sampled_negatives_are_recorded(tmp_path: Path) -> None:
    """`candidates = "sampled"`: the sample is written to the run directory and its SHA-256
    is in the report; each user ranks her test items and at most 20 negatives."""
    config = ExperimentConfig.from_dict(
        BASE
        | RUNS["ppcf"]
        | {"evaluation": {"candidates": "sampled", "negatives": 20}, "run": {"name": "s"}}
    )
    report = simulate(config, SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    r = report["evaluation"]["ranking"]
    assert r["candidates"] == "sampled" and r["negatives"] == 20
    assert len(r["sample_sha256"]) == 64
    assert (tmp_path / "evaluation" / "negatives.npz").is_file()
    assert r["mean_candidates"] <= 20 + config.data.withheld
