"""`sim.sybil_offline` answers the sybils' probes as a real run's aggregator did, also for a
model that needs the catalogue's item features.

Both go through `server.fitting` (issue 24): before, the offline copy of the fit forgot the
item features, so on `cluster_ppcf` it failed with "`item_features` are not set" while the real
run worked.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.adversary.knowledge import AdversaryKnowledge
from privrec.adversary.replay import STORE_NAME, observations_from_records, transcript_records
from privrec.adversary.sybils import SybilPlan, SybilSettings
from privrec.shared.config import ExperimentConfig
from privrec.shared.population import load_population
from privrec.sim.run import SimOptions, simulate
from privrec.sim.sybil_offline import answer_offline

pytestmark = pytest.mark.timeout(600)

CLUSTERED_SYBIL_RUN = {
    "run": {"name": "sybils-clustered", "seed": 4},
    "data": {
        "dataset": "synthetic",
        "synthetic_users": 160,
        "synthetic_items": 120,
        "synthetic_genres": 6,
        "max_users": 140,
    },
    "population": {"shards": 1, "batch_size": 32},
    "mechanism": {"name": "rpt", "params": {"sigma_max": 1.0, "beta_max": 10}},
    "model": {
        "name": "cluster_ppcf",
        "k": 5,
        "baseline": False,
        "params": {"clusters": 2, "method": "kmeans", "profile": "pbp"},
    },
    "adversary": {
        "attacks": ["knn_sybil", "membership_inference"],
        "knn_targets": 2,
        "knn_known_items": 8,
        "knn_recommend": 20,
        "membership_candidates": 4,
        "membership_known_items": 8,
        "membership_probe_items": 3,
    },
}


def test_offline_answers_equal_the_run_on_a_feature_model(tmp_path: Path) -> None:
    """Every probe's offline answer (items and scores) is the one the aggregator gave the
    sybils in an in-process run of `cluster_ppcf` (genre profiles, k-means clusters)."""
    config = ExperimentConfig.from_dict(CLUSTERED_SYBIL_RUN)
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
