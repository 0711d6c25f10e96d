"""The tidy table takes every scalar of a report generically (issue 26, item 3), and the
headline columns are found by the referee's key conventions."""

from __future__ import annotations

from privrec.sim.study.metrics import headlines
from privrec.sim.study.store import RunRecord
from privrec.sim.study.table import columns, report_scalars, run_row, to_csv

REPORT = {
    "utility": {
        "ppcf_mae": 0.8,
        "ppcf_mae_unclipped": 0.81,
        "baseline_pearson_knn_mae": 0.75,
        "trivial_item_mean_mae": 0.82,
        "ppcf_predictions": 10.0,
        "ppcf_ndcg_at_10": 0.1,
        "ppcf_ndcg_at_20": 0.12,
        "trivial_popularity_ndcg_at_10": 0.08,
    },
    "privacy": {
        "mechanism": "blip",
        "epsilon": 2.0,
        "delta": None,
        "flags": ["x"],
        "per_user": {"per_user_epsilon": {"median": 4.0, "max": 6.0}, "histogram": {"c": [1]}},
    },
    "attacks": [
        {
            "name": "balu_single",
            "kind": "bits",
            "knowledge": "k",
            "applies_to": ["blip"],
            "metrics": {"recall": 0.3, "recall_chance": 0.1},
        }
    ],
    "timings": {"load": 1.0},
}


def test_report_scalars_flattens_every_scalar_and_skips_lists() -> None:
    flat = report_scalars(REPORT)
    assert flat == {
        **{f"utility.{k}": v for k, v in REPORT["utility"].items()},
        "privacy.mechanism": "blip",
        "privacy.epsilon": 2.0,
        "privacy.delta": None,
        "privacy.per_user.per_user_epsilon.median": 4.0,
        "privacy.per_user.per_user_epsilon.max": 6.0,
        "attacks.balu_single.kind": "bits",
        "attacks.balu_single.knowledge": "k",
        "attacks.balu_single.recall": 0.3,
        "attacks.balu_single.recall_chance": 0.1,
    }


def test_a_new_metric_appears_without_a_change() -> None:
    """A metric the referee starts to score (e.g. a ranking metric) is a new column."""
    report = {**REPORT, "utility": {**REPORT["utility"], "ppcf_ndcg_at_10": 0.2}}
    rec = RunRecord("abc", 0, {"mechanism.params.epsilon": 2}, 0, 1.5, "inprocess")
    row = run_row(rec, report)
    cols = columns([row], ["mechanism.params.epsilon"])
    assert cols[:5] == ["run_dir", "point", "seed", "mechanism.params.epsilon", "seconds"]
    assert "utility.ppcf_ndcg_at_10" in cols
    text = to_csv([row], cols)
    header, line = text.splitlines()
    assert header.split(",")[5] == "utility.ppcf_mae"
    assert line.startswith("runs/abc,0,0,2,1.5,0.8,")


def test_headlines_pair_each_metric_with_its_references() -> None:
    cols = list(report_scalars(REPORT))
    heads = {h.column: h for h in headlines(cols, {"balu_single": "bits"})}
    mae = heads["utility.ppcf_mae"]
    assert mae.owner == "ppcf" and mae.better == "lower is better" and mae.primary
    assert mae.references == (
        ("utility.baseline_pearson_knn_mae", "non-private: pearson knn"),
        ("utility.trivial_item_mean_mae", "trivial: item mean"),
    )
    assert "utility.ppcf_mae_unclipped" not in heads  # a variant is no headline
    ndcg = heads["utility.ppcf_ndcg_at_10"]
    assert ndcg.label == "NDCG@10" and ndcg.family == "ranking" and ndcg.brief
    assert [c for c, _ in ndcg.references] == ["utility.trivial_popularity_ndcg_at_10"]
    assert not heads["utility.ppcf_ndcg_at_20"].brief  # study.md shows the smallest K
    assert "utility.ppcf_predictions" not in heads  # a count is no headline
    assert "privacy.per_user.per_user_epsilon.median" in heads
    attack = [h for h in heads.values() if h.section == "attacks"]
    assert attack and attack[0].owner == "balu_single" and attack[0].primary
