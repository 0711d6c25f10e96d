"""The population benchmark's protocol path (OUE + `item_frequency` + `oue_decoder`, the
model fed by `ModelInput.ESTIMATE_SUM`): real processes agree with the in-process launcher,
and the published frequencies are those of the releases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def config() -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "run": {"name": "population", "seed": 2},
            "data": {"dataset": "synthetic", "synthetic_users": 300, "synthetic_items": 100},
            "mechanism": {"name": "oue", "params": {"epsilon": 8.0}},
            "model": {"name": "item_frequency", "k": 10},
            "adversary": {"attacks": ["oue_decoder"]},
        }
    )


def test_processes_match_inprocess(tmp_path: Path) -> None:
    a = simulate(config(), SimOptions(tmp_path / "p", launcher="processes", mqtt="none"))
    b = simulate(config(), SimOptions(tmp_path / "i", launcher="inprocess", mqtt="none"))
    assert a["utility"] == b["utility"] and a["attacks"] == b["attacks"]
    assert set(a["utility"]) == {"frequency_mae", "frequency_max_error", "top_10_recall"}
    # ε = 8: the estimate is close to the truth, the decoder far above chance
    assert a["utility"]["frequency_mae"] < 0.05 and a["utility"]["top_10_recall"] >= 0.5
    metrics = a["attacks"][0]["metrics"]
    assert metrics["n_users"] == 300 and metrics["cosine_mean"] > 2 * metrics["cosine_chance"]
    with np.load(tmp_path / "p" / "model.npz") as z, np.load(tmp_path / "i" / "model.npz") as y:
        np.testing.assert_array_equal(z["frequencies"], y["frequencies"])
