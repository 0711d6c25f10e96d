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


def test_ratio_split_releases_no_test_cell_and_states_its_fingerprint(tmp_path: Path) -> None:
    """`[evaluation] split = "ratio"`: no profile release the server stored carries a test or
    validation cell of its user, the report states the split's sizes and fingerprint, and the
    same config and seed give the same fingerprint (the test set is shared)."""
    from privrec.server.store import Store
    from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
    from privrec.shared.serde import payload_from_proto

    raw = {
        "evaluation": {"split": "ratio", "ratio_train": 0.7, "ratio_validation": 0.1},
        "mechanism": {"name": "rpt", "params": {"beta_max": 0}},  # no fake cells: exact sets
    }
    config = ExperimentConfig.from_dict(BASE | RUNS["ppcf"] | raw | {"run": {"name": "r"}})
    report = simulate(config, SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    data = load_population(config.data, config.run.seed)
    plans = {p.user_id: p for p in population_plan(data, config)}
    store = Store(tmp_path / "server.sqlite", read_only=True)
    try:
        released = {
            u: set(np.asarray(payload_from_proto(pb.Release.FromString(r))[1].indices).tolist())
            for u, r in store.releases_by_purpose(pb.PURPOSE_PROFILE)
        }
    finally:
        store.close()
    assert len(released) == data.n_users
    for uid, items in released.items():
        assert items == set(plans[uid].training_profile().items.tolist())
        assert not items & set(plans[uid].withheld.tolist())
    split = report["evaluation"]["split"]
    assert split["name"] == "ratio" and not split["fold_left_out"]
    assert split["test_cells"] == report["utility"]["ppcf_predictions"]
    assert split["set_aside_cells"] > 0
    again = simulate(config, SimOptions(tmp_path / "again", launcher="inprocess", mqtt="none"))
    assert again["evaluation"]["split"]["fingerprint"] == split["fingerprint"]
