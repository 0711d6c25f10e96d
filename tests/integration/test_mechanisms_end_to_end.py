"""Issue 3 mechanisms over the real protocol: each releases, the server builds its kNN graph,
the report carries the mechanism's privacy statement and recall@10."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.config import ExperimentConfig
from sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MECHS = {
    "blip": ({"epsilon": 8.0, "n_bits": 500, "n_hashes": 4}, "pure"),
    # a weak setting on purpose (σ ≈ 0.5): at this size a private JLT is at chance; the
    # statement must flag that ε ≥ ln(1/δ) violates the KKMM12 conditions
    "jlt": ({"epsilon": 20.0, "delta": 1e-3, "dim": 200}, "approximate"),
    "oue": ({"epsilon": 8.0}, "pure"),
    "rrt": ({"theta": 0.9, "n_groups": 3}, "none"),
}


def config(name: str) -> ExperimentConfig:
    params, _ = MECHS[name]
    return ExperimentConfig.from_dict({
        "run": {"name": f"e2e-{name}", "seed": 1},
        "data": {"dataset": "synthetic", "synthetic_users": 200, "synthetic_items": 250},
        "mechanism": {"name": name, "params": params},
        "model": {"name": "sketch_knn", "k": 10},
        "adversary": {"attacks": []},
    })


@pytest.mark.parametrize("name", sorted(MECHS))
def test_mechanism_runs_inprocess_with_statement_and_recall(name: str, tmp_path: Path) -> None:
    """Every user's release is accepted; recall beats chance; the statement is in the report."""
    report = simulate(config(name), SimOptions(out_dir=tmp_path, launcher="inprocess",
                                               mqtt="none"))
    assert report["population"]["releases_accepted"] == 200
    assert report["population"]["releases_rejected"] == 0
    privacy = report["privacy"]
    assert privacy["mechanism"] == name and privacy["kind"] == MECHS[name][1]
    if privacy["kind"] == "none":
        assert privacy["per_user"]["epsilon"] is None
    else:
        assert privacy["per_user"]["per_user_epsilon"]["max"] > 0
    if name == "jlt":
        assert "kkmm12-conditions-violated" in privacy["flags"]
    u = report["utility"]
    assert u["recall_at_10"] > 2 * u["recall_at_10_chance"]


def test_blip_over_real_processes_matches_inprocess(tmp_path: Path) -> None:
    """BLIP over real gRPC processes and the embedded broker gives the in-process numbers."""
    a = simulate(config("blip"), SimOptions(out_dir=tmp_path / "p", launcher="processes",
                                            mqtt="embedded"))
    b = simulate(config("blip"), SimOptions(out_dir=tmp_path / "i", launcher="inprocess",
                                            mqtt="none"))
    assert a["utility"] == b["utility"] and a["privacy"] == b["privacy"]
    assert {"server", "shard-0", "shard-1"} <= set(a["run"]["nodes"])
