"""The DP neighbourhood models (Zhu's PNCF, Wang & Tang) in trusted-curator `privrec sim` runs:
users release raw ratings, the aggregator trains from the protocol's data, the report states the
model's output privacy and composes it per training user; in-process and real processes agree;
the per-user charges of PNCF (one per predicted item, to its raters) are what the store says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privrec.server.models import make_model
from privrec.server.store import Store
from privrec.shared.config import ExperimentConfig
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.protocol import fold_of
from privrec.shared.serde import payload_from_proto
from privrec.sim.report import public_run_config
from privrec.sim.report_privacy import _per_user_charges
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

N_USERS = 100
MODELS: dict[str, dict[str, Any]] = {
    "pncf": {"k": 5, "params": {"epsilon": 1.0}},
    "corated_knn": {"k": 5, "params": {"similarity": "cos"}},
    "dpsgd_pnbm": {"params": {"epsilon": 2.0, "n_iter": 3, "n_neighbours": 30}},
    "dpps_pnbm": {"params": {"epsilon": 200.0, "n_iter": 5, "n_neighbours": 30}},
    "dpsgd_mf": {"params": {"epsilon": 20.0, "n_iter": 5}},
    "dpps_mf": {"params": {"epsilon": 200.0, "n_iter": 5}},
}


def config(name: str, mode: str = "item") -> ExperimentConfig:
    model: dict[str, Any] = {"name": name, **MODELS[name], "baseline": False}
    if name == "pncf":
        model["params"] = {**model["params"], "mode": mode}
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"e2e-{name}", "seed": 3},
            "data": {"dataset": "synthetic", "synthetic_users": N_USERS, "synthetic_items": 60},
            "mechanism": {"name": "raw"},
            "model": model,
            "adversary": {"attacks": []},
        }
    )


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_trains_from_protocol_data_and_states_its_privacy(name: str, tmp_path: Path) -> None:
    """Each model trains on the raw releases, answers every test user, and (but the
    non-private baseline) appears in privacy.model with its statement and per-user ledger."""
    report = simulate(config(name), SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    utility = report["utility"]
    assert utility[f"{name}_predictions"] > 0
    assert 0.3 < utility[f"{name}_mae"] < 2.5
    privacy = report["privacy"]
    assert privacy["mechanism"] == "raw" and privacy["kind"] == "none"
    if name == "corated_knn":
        assert "model" not in privacy  # no output-privacy claim
        return
    model = privacy["model"]
    assert model["model"] == name and model["epsilon"] > 0
    assert model["guarantee"].endswith("not against the aggregator")
    assert model["per_user"]["users"] == N_USERS
    if name == "pncf":
        assert model["answer_scope"] == "raters"
        assert model["per_user"]["per_user_epsilon"]["max"] > 1.0  # many predictions
    else:
        assert model["fit_per_fold"] is True
    if name.startswith("dpps"):
        assert "temperature-weakens-epsilon" in model["flags"]
        assert "ε/(2ϱ)" in model["notes"]


def test_pncf_user_based_over_real_processes_matches_inprocess(tmp_path: Path) -> None:
    """User-based PNCF over gRPC processes and the embedded broker gives the in-process
    numbers, privacy ledger included (answers are keyed by query content, not arrival)."""
    a = simulate(
        config("pncf", "user"),
        SimOptions(tmp_path / "p", launcher="processes", mqtt="embedded"),
    )
    b = simulate(
        config("pncf", "user"), SimOptions(tmp_path / "i", launcher="inprocess", mqtt="none")
    )
    assert a["utility"] == b["utility"] and a["privacy"] == b["privacy"]
    assert {"server", "shard-0", "shard-1"} <= set(a["run"]["nodes"])


def test_pncf_charges_each_prediction_to_the_raters_of_its_item(tmp_path: Path) -> None:
    """`answer_scope = "raters"`: a training user pays one prediction for every predicted item
    she rated, from queries of other folds — recomputed here by a plain loop over the store."""
    simulate(config("pncf"), SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    run_config = public_run_config(tmp_path)
    store = Store(tmp_path / "server.sqlite", read_only=True)
    try:
        rated: dict[str, set[int]] = {}
        for user, raw in store.releases_by_purpose(pb.PURPOSE_PROFILE):
            _, payload = payload_from_proto(pb.Release.FromString(raw))
            rated[user] = set(np.asarray(payload.indices).tolist())  # type: ignore[attr-defined]
        expected = dict.fromkeys(rated, 0)
        for row in store.transcript():
            if row.method != "Predict":
                continue
            req = pb.PredictRequest.FromString(row.request)
            f = fold_of(req.query.user_id, run_config.n_folds, run_config.fold_seed)
            for user, items in rated.items():
                if fold_of(user, run_config.n_folds, run_config.fold_seed) != f:
                    expected[user] += len(items & set(req.items))
        claim = make_model(run_config.model_name, run_config.model_params).output_privacy()
        assert claim is not None
        got = _per_user_charges(claim, run_config, sorted(rated), store, answered=0)
    finally:
        store.close()
    assert {u: a for u, (_, a) in got.items()} == expected
    assert sum(expected.values()) > 0
