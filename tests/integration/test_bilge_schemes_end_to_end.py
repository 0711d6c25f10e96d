"""Bilge's server schemes over the protocol: every scheme's config runs in `privrec sim` and
reports its utility and the server's timings; the classifier path (RRT → PPNBC → P(like) → the
client reads the class → CA/F1) agrees between real processes and in-process."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import Any

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.report import public_run_config
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = {"dataset": "synthetic", "synthetic_users": 120, "synthetic_items": 80}


def _config(name: str, **data: Any) -> ExperimentConfig:
    raw = tomllib.loads((CONFIGS / f"{name}.toml").read_text())
    raw["data"] = SMALL | data
    raw["adversary"] = {"attacks": []}
    return ExperimentConfig.from_dict(raw)


@pytest.mark.parametrize(
    ("name", "model", "metrics"),
    [
        ("ppcf_plus", "ppcf_plus", ("mae", "rmse", "coverage")),
        ("ppcf_plus_plus", "ppcf_plus", ("mae", "rmse", "coverage")),
        ("ppdwt", "ppdwt", ("mae", "rmse", "coverage")),
        ("ppdwt_ma", "ppdwt", ("mae", "rmse", "coverage")),
        ("ppnbc", "ppnbc", ("ca", "f1", "precision", "recall", "coverage")),
    ],
)
def test_each_scheme_config_runs_with_utility_and_timings(
    name: str, model: str, metrics: tuple[str, ...], tmp_path: Path
) -> None:
    """configs/NAME.toml trains from the releases and reports its utility, its non-private
    baseline, and the server's train/answer seconds."""
    report = simulate(_config(name), SimOptions(tmp_path, launcher="inprocess", mqtt="none"))
    utility = report["utility"]
    for metric in metrics:
        assert math.isfinite(utility[f"{model}_{metric}"])
    assert utility[f"{model}_predictions"] == 120 * 5
    baseline = "baseline_nbc_ca" if model == "ppnbc" else "baseline_pearson_knn_mae"
    assert baseline in utility
    assert report["timings"]["server_train"] > 0 and report["timings"]["server_answer"] > 0
    assert report["population"]["queries"] == 120


def test_mechanism_parameters_reach_the_model(tmp_path: Path) -> None:
    """The server fills PPCF+'s σ_max and PPNBC's θ from the mechanism's public parameters;
    [model.params] still wins."""
    raw = tomllib.loads((CONFIGS / "ppcf_plus.toml").read_text())
    raw["data"] = SMALL | {"max_users": 40}
    raw["adversary"] = {"attacks": []}
    raw["mechanism"]["params"]["sigma_max"] = 1.5
    simulate(ExperimentConfig.from_dict(raw), SimOptions(tmp_path / "a", "inprocess", "none"))
    assert public_run_config(tmp_path / "a").model_params["sigma_max"] == 1.5
    raw["model"]["params"] = {"sigma_max": 0.5}
    simulate(ExperimentConfig.from_dict(raw), SimOptions(tmp_path / "b", "inprocess", "none"))
    assert public_run_config(tmp_path / "b").model_params["sigma_max"] == 0.5


def test_ppnbc_over_real_processes_matches_inprocess(tmp_path: Path) -> None:
    """The classifier path gives the same CA/F1 over gRPC processes as in-process, and θ
    travels from RRT's public parameters to the model."""
    raw = tomllib.loads((CONFIGS / "ppnbc.toml").read_text())
    raw["data"], raw["adversary"] = SMALL, {"attacks": []}
    raw["mechanism"]["params"]["theta"] = 0.8
    config = ExperimentConfig.from_dict(raw)
    a = simulate(config, SimOptions(tmp_path / "p", launcher="processes", mqtt="none"))
    b = simulate(config, SimOptions(tmp_path / "i", launcher="inprocess", mqtt="none"))
    assert a["utility"] == b["utility"]
    assert public_run_config(tmp_path / "p").model_params["theta"] == 0.8
    assert a["utility"]["ppnbc_ca"] > 0.5
