"""Bilge Ch. 6/7 models through the protocol: the catalogue's genres reach the aggregator, both
launchers agree, configs run, and `sim.reproduce.protocol_run` answers exactly as a `privrec
sim` run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privrec.server.spec import run_spec
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.population import load_population
from privrec.sim.reproduce.protocol_run import ProtocolRun
from privrec.sim.run import SimOptions, simulate

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DATA = {
    "dataset": "synthetic",
    "synthetic_users": 120,
    "synthetic_items": 80,
    "synthetic_genres": 6,
}


def _config(model: str, params: dict, mechanism: dict | None = None, k: int = 15):
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"bilge-{model}", "seed": 2},
            "data": DATA,
            "population": {"shards": 2, "batch_size": 16},
            "mechanism": mechanism or {"name": "rpt", "params": {"sigma_max": 1.0}},
            "model": {"name": model, "k": k, "params": params},
            "adversary": {"attacks": []},
        }
    )


def _predictions(run_dir: Path) -> dict[tuple[str, int], float]:
    out = {}
    for f in sorted((run_dir / "predictions").glob("shard-*.npz")):
        with np.load(f) as z:
            for u, i, p in zip(z["user_ids"], z["items"], z["predictions"], strict=True):
                out[(str(u), int(i))] = float(p)
    return out


@pytest.mark.parametrize(
    ("model", "params", "mechanism"),
    [
        ("cluster_ppcf", {"clusters": 3, "method": "fcm"}, None),
        ("bkm_cf", {"clones": 2}, {"name": "raw"}),
    ],
)
def test_direct_run_answers_as_the_protocol(model, params, mechanism, tmp_path: Path) -> None:
    """`ProtocolRun.score` gives exactly the predictions (and MAE) of `privrec sim` with the same
    config and seed: same releases, folds, queries, de-normalisation."""
    config = _config(model, params, mechanism)
    report = simulate(config, SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    direct = ProtocolRun(config)
    scored = direct.score(model, params)
    assert scored.mae == pytest.approx(report["utility"][f"{model}_mae"], abs=1e-12)
    sim = _predictions(tmp_path)
    pairs = [(a.user_id, int(i)) for a in direct.testers for i in a.withheld]
    np.testing.assert_array_equal(scored.predictions, [sim[p] for p in pairs])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_processes_and_inprocess_agree_for_a_feature_model(tmp_path: Path) -> None:
    """The genres reach a separate server process from its own catalogue, and the two
    launchers give the same numbers (P²BKM+ on RPT)."""
    config = _config("bkm_ppcf", {"clones": 2})
    proc = simulate(config, SimOptions(tmp_path / "p", launcher="processes", mqtt="none"))
    inproc = simulate(config, SimOptions(tmp_path / "i", launcher="inprocess", mqtt="none"))
    assert proc["utility"] == inproc["utility"]
    assert 0.3 < proc["utility"]["bkm_ppcf_mae"] < 1.5
    assert proc["timings"]["train"] > 0 and "serve" in proc["timings"]


def test_a_feature_model_needs_a_catalogue_with_genres() -> None:
    """Without item features the run stops before it starts, naming data.dataset."""
    config = _config("cluster_ppcf", {})
    raw = json.loads(json.dumps(config.to_dict()))
    raw["data"]["synthetic_genres"] = 0
    bare = ExperimentConfig.from_dict(raw)
    with pytest.raises(ConfigError, match=r"data\.dataset: model cluster_ppcf needs"):
        run_spec(bare, "r", load_population(bare.data, 0), "")
    assert run_spec(config, "r", load_population(config.data, 0), "").item_features is not None


@pytest.mark.parametrize("name", ["cluster_ppcf", "cluster_cf", "bkm_ppcf", "bkm_cf"])
def test_configs_run_on_a_small_population(name: str, tmp_path: Path) -> None:
    """Each model's config runs in `privrec sim` (on a small synthetic population with genres)
    and reports its utility and timings."""
    raw = ExperimentConfig.load(CONFIGS / f"{name}.toml").to_dict()
    raw["data"] = {**raw["data"], **DATA}
    raw["adversary"]["attacks"] = []
    report = simulate(
        ExperimentConfig.from_dict(raw), SimOptions(tmp_path, launcher="inprocess", mqtt="none")
    )
    assert 0.3 < report["utility"][f"{name}_mae"] < 1.6
    assert report["utility"][f"{name}_predictions"] == 120 * 5
    assert {"train", "serve"} <= set(report["timings"])
