"""End to end for the new protocol paths: a trusted-curator factorization (raw releases,
queries answered by fold-in, the model's stated claim in privacy.model) and Xin & Jaakkola's
Full EM (a two-tier run whose private tier sends raw ratings round by round). Each runs with
real node processes and in process; the numbers agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DP_MF: dict[str, Any] = {
    "run": {"name": "dpmf", "seed": 2},
    "data": {"dataset": "synthetic", "synthetic_users": 70, "synthetic_items": 40},
    "population": {"shards": 2},
    "mechanism": {"name": "raw"},
    "model": {"name": "dp_count_sketch_mf", "k": 4, "params": {"epsilon": 1.0, "epochs": 8}},
    "adversary": {"attacks": []},
}
FULL_EM: dict[str, Any] = {
    "run": {"name": "fullem", "seed": 4},
    "data": {"dataset": "synthetic", "synthetic_users": 70, "synthetic_items": 40},
    "population": {"shards": 2, "public_users": 15, "private_round_size": 20},
    "mechanism": {"name": "raw"},
    "model": {"name": "two_tier_full_em", "k": 3},
    "adversary": {"attacks": []},
}


def _both(raw: dict[str, Any], tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    config = ExperimentConfig.from_dict(raw)
    procs = simulate(
        config, SimOptions(out_dir=tmp_path / "p", launcher="processes", mqtt="embedded")
    )
    inproc = simulate(config, SimOptions(out_dir=tmp_path / "i", launcher="inprocess", mqtt="none"))
    return procs, inproc


def test_clipped_count_sketch_runs_through_the_protocol(tmp_path: Path) -> None:
    """Raw releases train the clipped count sketch; every test user is answered; the model's
    heuristic claim is stated (kind none, claimed ε in flags) and composed per training user;
    both launchers give the same report numbers."""
    procs, inproc = _both(DP_MF, tmp_path)
    for report in (procs, inproc):
        assert report["utility"]["dp_count_sketch_mf_predictions"] == 5 * 70
        model = report["privacy"]["model"]
        assert model["kind"] == "none" and model["epsilon"] is None
        assert "claimed-rating-level-epsilon=1" in model["notes"] or model["per_user"]
        assert model["per_user"]["users"] == 70
        assert "not against the aggregator" in model["guarantee"]
    assert procs["utility"] == inproc["utility"]
    assert procs["privacy"] == inproc["privacy"]


def test_full_em_folds_raw_private_ratings_round_by_round(tmp_path: Path) -> None:
    """Full EM: public model, then the private users' raw ratings in rounds of 20; the curve
    has one point per round plus the final model, which equals the all-public baseline; the
    launchers agree."""
    procs, inproc = _both(FULL_EM, tmp_path)
    for report in (procs, inproc):
        curve = report["curves"]["utility_by_private_users"]
        assert curve["private_users"] == [0.0, 20.0, 40.0, 55.0]
        u = report["utility"]
        assert u["two_tier_full_em_rmse"] == pytest.approx(u["baseline_all_public_rmse"], abs=1e-6)
        assert report["privacy"]["mechanism"] == "raw"
    assert procs["utility"] == inproc["utility"]
    assert procs["curves"] == inproc["curves"]
