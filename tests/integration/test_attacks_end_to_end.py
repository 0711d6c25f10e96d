"""The attacks of issue 11 part B in `privrec sim` runs: report, replay, launchers, sybils.

Each attack runs over the real protocol's transcript (and, for the sybil attacks, over what the
adversary's sybil clients were answered through Enroll/SubmitStream/Recommend/Predict), appears
in report.json with its knowledge and metrics, and `privrec replay` reproduces the live numbers
exactly. Small synthetic populations keep each run to seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.replay import (
    STORE_NAME,
    load_output,
    observations_from_records,
    replay,
    transcript_records,
)
from privrec.adversary.sybils import SybilPlan, SybilSettings
from privrec.shared.config import ExperimentConfig
from privrec.shared.population import load_population
from privrec.sim.referee import score_attacks
from privrec.sim.run import SimOptions, simulate
from privrec.sim.sybil_offline import answer_offline

pytestmark = pytest.mark.timeout(600)

SYBIL_RUN = {
    "run": {"name": "sybils", "seed": 2},
    "data": {
        "dataset": "synthetic",
        "synthetic_users": 220,
        "synthetic_items": 150,
        "max_users": 180,
    },
    "population": {"shards": 2, "batch_size": 16},
    "mechanism": {"name": "rpt", "params": {"sigma_max": 1e-9, "beta_max": 0}},
    "model": {"name": "ppcf", "k": 5, "baseline": False},
    "adversary": {
        "attacks": ["knn_sybil", "membership_inference"],
        "knn_targets": 2,
        "knn_known_items": 8,
        "knn_recommend": 30,
        "membership_candidates": 8,
        "membership_known_items": 10,
        "membership_probe_items": 3,
    },
}


def config_of(raw: dict[str, Any], **overrides: dict[str, Any]) -> ExperimentConfig:
    raw = json.loads(json.dumps(raw))
    for section, values in overrides.items():
        raw.setdefault(section, {}).update(values)
    return ExperimentConfig.from_dict(raw)


@pytest.fixture(scope="module")
def sybil_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("sybils")
    report = simulate(
        config_of(SYBIL_RUN), SimOptions(out_dir=out, launcher="inprocess", mqtt="none")
    )
    return out, report


def test_sybil_attacks_in_the_report(sybil_run: tuple[Path, dict[str, Any]]) -> None:
    """Both sybil attacks are scored with their knowledge; the sybils enrolled, released and
    queried through the protocol and are counted in the population and the ledger."""
    out, report = sybil_run
    attacks = {a["name"]: a for a in report["attacks"]}
    assert set(attacks) == {"knn_sybil", "membership_inference"}
    assert "not the transcript" in attacks["knn_sybil"]["knowledge"]
    assert attacks["knn_sybil"]["metrics"]["targets"] == 2
    assert attacks["membership_inference"]["metrics"]["n_members"] == 8
    assert 0.0 <= attacks["membership_inference"]["metrics"]["auc"] <= 1.0
    plan = SybilPlan.read(out)
    assert plan is not None and all(p.answer_scores.size for p in plan.probes)
    pop = report["population"]
    crowd = len(plan.crowd)
    # the crowd, one querier per target, two per candidate (8 in the run, 8 outside)
    assert pop["sybils"] == len(plan.sybil_ids) == crowd + 2 + 16 * 2
    assert pop["enrolled"] == 180 + pop["sybils"]
    assert pop["profiles"] == 180 + crowd
    # every sybil's releases are in the privacy ledger like any user's
    assert report["privacy"]["per_user"]["users"] == pop["enrolled"]


def test_replay_reproduces_the_sybil_attacks(
    sybil_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """`replay` (transcript + the sybils' record + the stated knowledge) gives the live
    outputs bit for bit, and the referee the same metrics."""
    out, report = sybil_run
    names = ["knn_sybil", "membership_inference"]
    outputs = replay(out, names, tmp_path)
    for name in names:
        live = load_output(out / "adversary" / "live" / f"{name}.npz")
        assert live.per_user.keys() == outputs[name].per_user.keys()
        for user, est in live.per_user.items():
            np.testing.assert_array_equal(est.indices, outputs[name].per_user[user].indices)
            np.testing.assert_array_equal(est.values, outputs[name].per_user[user].values)
    rescored = score_attacks(config_of(SYBIL_RUN), outputs, out)
    assert {a["name"]: a["metrics"] for a in rescored} == {
        a["name"]: a["metrics"] for a in report["attacks"]
    }


def test_offline_replica_matches_the_protocol(sybil_run: tuple[Path, dict[str, Any]]) -> None:
    """`sim.sybil_offline` (what the sweeps use) answers every probe exactly as the aggregator
    answered the sybils during the run."""
    out, _ = sybil_run
    records, run_config = transcript_records(out / STORE_NAME)
    obs = observations_from_records(records, run_config)
    real = {u: p for u, p in obs.profiles.items() if not u.startswith("!")}
    knowledge = AdversaryKnowledge.read(out)
    config = config_of(SYBIL_RUN)
    offline = answer_offline(
        real, run_config, knowledge, SybilSettings.from_section(config.adversary)
    )
    recorded = SybilPlan.read(out)
    assert recorded is not None
    for a, b in zip(offline.probes, recorded.probes, strict=True):
        assert (a.subject, a.sybil_id) == (b.subject, b.sybil_id)
        np.testing.assert_array_equal(a.answer_items, b.answer_items)
        np.testing.assert_allclose(a.answer_scores, b.answer_scores, rtol=1e-12)


def test_offline_replica_gives_a_feature_model_its_item_features(tmp_path: Path) -> None:
    """The same on `cluster_ppcf` (genre profiles, k-means clusters), which needs the
    catalogue's item features: both sides fit through `server.fitting`. Before issue 24 the
    offline copy of the fit forgot the features and failed with "`item_features` are not set"
    while the real run worked."""
    config = config_of(
        SYBIL_RUN,
        run={"name": "sybils-clustered", "seed": 4},
        data={"synthetic_genres": 6},
        mechanism={"params": {"sigma_max": 1.0, "beta_max": 10}},
        model={"name": "cluster_ppcf", "params": {"clusters": 2, "method": "kmeans"}},
    )
    simulate(config, SimOptions(out_dir=tmp_path, launcher="inprocess", mqtt="none"))
    records, run_config = transcript_records(tmp_path / STORE_NAME)
    obs = observations_from_records(records, run_config)
    real = {u: p for u, p in obs.profiles.items() if not u.startswith("!")}
    catalogue = load_population(config.data, config.run.seed)
    assert catalogue.genres is not None
    offline = answer_offline(
        real,
        run_config,
        AdversaryKnowledge.read(tmp_path),
        SybilSettings.from_section(config.adversary),
        item_features=catalogue.genres,
    )
    recorded = SybilPlan.read(tmp_path)
    assert recorded is not None and len(recorded.probes) == len(offline.probes) > 0
    for a, b in zip(offline.probes, recorded.probes, strict=True):
        assert (a.subject, a.sybil_id, a.method) == (b.subject, b.sybil_id, b.method)
        np.testing.assert_array_equal(a.answer_items, b.answer_items)
        np.testing.assert_allclose(a.answer_scores, b.answer_scores, rtol=1e-12)
    assert any(p.answer_scores.size for p in offline.probes)


@pytest.mark.slow
def test_processes_launcher_agrees_with_inprocess(
    sybil_run: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The sybils as their own OS process over real gRPC (`privrec sybils`) give the numbers
    of the in-process run."""
    _, report = sybil_run
    again = simulate(
        config_of(SYBIL_RUN), SimOptions(out_dir=tmp_path, launcher="processes", mqtt="none")
    )
    assert "sybils" in again["run"]["nodes"]
    for key in ("utility", "attacks", "population"):
        assert again[key] == report[key], key


# ---------------------------------------------------------------------------- the others
OTHER_RUNS = {
    "rrt": (
        {
            "data": {"dataset": "synthetic", "synthetic_users": 200, "synthetic_items": 120},
            "mechanism": {"name": "rrt", "params": {"theta": 0.7, "n_groups": 3}},
            "model": {"name": "sketch_knn", "k": 10},
            "adversary": {"attacks": ["rrt_flip_inference"]},
        },
        "rrt_flip_inference",
        "bit_accuracy",
    ),
    "rpt": (
        {
            "data": {
                "dataset": "synthetic",
                "synthetic_users": 260,
                "synthetic_items": 120,
                "max_users": 200,
            },
            "model": {"k": 10, "baseline": False},
            "adversary": {"attacks": ["rpt_rating_recovery"], "outside_users": 60},
        },
        "rpt_rating_recovery",
        "rmse",
    ),
    "pmc": (
        {
            "data": {"dataset": "synthetic", "synthetic_users": 160, "synthetic_items": 80},
            "population": {"public_users": 40},
            "mechanism": {"name": "pmc"},
            "model": {"name": "two_tier_lowrank", "k": 3, "baseline": False},
            "adversary": {"attacks": ["second_order_signs"]},
        },
        "second_order_signs",
        "sign_accuracy_global",
    ),
}


@pytest.mark.parametrize("case", sorted(OTHER_RUNS))
def test_attack_in_a_run_and_replay(case: str, tmp_path: Path) -> None:
    """The attack runs over the run's transcript, appears in report.json with knowledge and
    metrics, and replay reproduces its output exactly."""
    raw, name, metric = OTHER_RUNS[case]
    config = config_of({"run": {"name": case, "seed": 1}} | raw)
    report = simulate(
        config, SimOptions(out_dir=tmp_path / "run", launcher="inprocess", mqtt="none")
    )
    (entry,) = [a for a in report["attacks"] if a["name"] == name]
    assert entry["knowledge"] and np.isfinite(entry["metrics"][metric])
    replayed = replay(tmp_path / "run", [name], tmp_path / "replay")[name]
    live = load_output(tmp_path / "run" / "adversary" / "live" / f"{name}.npz")
    for user, est in live.per_user.items():
        np.testing.assert_array_equal(est.values, replayed.per_user[user].values)
