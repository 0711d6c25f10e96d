"""Issue 3 mechanisms over the real protocol: each releases, the server builds its kNN graph,
the report carries the mechanism's privacy statement and recall@10."""

from __future__ import annotations

from pathlib import Path

import pytest

from privrec.shared.config import ExperimentConfig
from privrec.sim.run import SimOptions, simulate

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
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"e2e-{name}", "seed": 1},
            "data": {"dataset": "synthetic", "synthetic_users": 200, "synthetic_items": 250},
            "mechanism": {"name": name, "params": params},
            "model": {"name": "sketch_knn", "k": 10},
            "adversary": {"attacks": []},
        }
    )


@pytest.mark.parametrize("name", sorted(MECHS))
def test_mechanism_runs_inprocess_with_statement_and_recall(name: str, tmp_path: Path) -> None:
    """Every user's release is accepted; recall beats chance; the statement is in the report."""
    report = simulate(config(name), SimOptions(out_dir=tmp_path, launcher="inprocess", mqtt="none"))
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
    a = simulate(
        config("blip"), SimOptions(out_dir=tmp_path / "p", launcher="processes", mqtt="embedded")
    )
    b = simulate(
        config("blip"), SimOptions(out_dir=tmp_path / "i", launcher="inprocess", mqtt="none")
    )
    assert a["utility"] == b["utility"] and a["privacy"] == b["privacy"]
    assert {"server", "shard-0", "shard-1"} <= set(a["run"]["nodes"])


# ---------------------------------------------------------------- two-tier (Xin & Jaakkola)
SECOND_ORDER = {
    "pmd": ({}, "element-wise"),
    "pmc": ({"h_mode": "shared"}, "element-wise"),
    "laplace_second_order": ({"epsilon": 1.0}, "pure"),
    "exact_second_order": ({}, "none"),
}
N_USERS, N_PUBLIC = 300, 30


def two_tier_config(
    name: str, round_size: int = 0, attacks: tuple[str, ...] = ()
) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"e2e-{name}", "seed": 1},
            "data": {"dataset": "synthetic", "synthetic_users": N_USERS, "synthetic_items": 200},
            "population": {"public_users": N_PUBLIC, "private_round_size": round_size},
            "mechanism": {"name": name, "params": SECOND_ORDER[name][0]},
            "model": {"name": "two_tier_lowrank", "k": 5},
            "adversary": {"attacks": list(attacks)},
        }
    )


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_mechanism_runs_two_tier(name: str, tmp_path: Path) -> None:
    """Public users share, the rest release once against the public model; every release is
    accepted, the ledger covers only the private tier, and every user predicts locally."""
    report = simulate(
        two_tier_config(name), SimOptions(out_dir=tmp_path, launcher="inprocess", mqtt="none")
    )
    pop, privacy, u = report["population"], report["privacy"], report["utility"]
    assert pop["releases_accepted"] == N_USERS and pop["releases_rejected"] == 0
    assert pop["public_profiles"] == N_PUBLIC
    assert privacy["mechanism"] == name and privacy["kind"] == SECOND_ORDER[name][1]
    assert privacy["tiers"]["public"] == N_PUBLIC
    assert privacy["tiers"]["private"] == N_USERS - N_PUBLIC
    assert privacy["per_user"]["users"] == N_USERS - N_PUBLIC
    assert u["two_tier_lowrank_predictions"] == 5 * N_USERS
    # the non-private reference (everyone public) beats the public model alone
    assert u["baseline_all_public_rmse"] < u["two_tier_lowrank_rmse_public_model_only"] - 0.05
    if name == "exact_second_order":  # exact second-order statistics do help (Fig. 2)
        assert u["two_tier_lowrank_rmse"] < u["two_tier_lowrank_rmse_public_model_only"] - 0.01


def test_exact_rounds_fold_private_users_in_and_lower_the_error(tmp_path: Path) -> None:
    """Three collect rounds of 100, 100 and 70 private users: each round binds to the model
    the server re-published after the previous ones (Xin & Jaakkola Fig. 2), and the curve
    of test RMSE against private users folded in ends lower than it starts."""
    report = simulate(
        two_tier_config("exact_second_order", 100),
        SimOptions(out_dir=tmp_path, launcher="inprocess", mqtt="none"),
    )
    curve = report["curves"]["utility_by_private_users"]
    assert curve["private_users"] == [0.0, 100.0, 200.0, 270.0]
    assert curve["rmse"][0] == report["utility"]["two_tier_lowrank_rmse_public_model_only"]
    assert curve["rmse"][-1] == report["utility"]["two_tier_lowrank_rmse"]
    assert curve["rmse"][-1] < curve["rmse"][0] - 0.01
    assert (tmp_path / "plots" / "rmse_by_private_users.png").exists()


def test_pmc_rounds_over_real_processes_match_inprocess(tmp_path: Path) -> None:
    """Two tiers with collect rounds over real gRPC processes and the embedded broker, with the
    live adversary attacking, give the in-process numbers."""
    config = two_tier_config("pmc", 135, attacks=("second_order_reconstruction",))
    a = simulate(config, SimOptions(out_dir=tmp_path / "p", launcher="processes", mqtt="embedded"))
    b = simulate(config, SimOptions(out_dir=tmp_path / "i", launcher="inprocess", mqtt="none"))
    assert a["utility"] == b["utility"] and a["privacy"] == b["privacy"]
    # the live adversary node (MQTT feed, GetRunConfig) attacks exactly as in-process
    assert a["attacks"] == b["attacks"] and a["attacks"][0]["metrics"]["n_users"] == 270
    assert a["curves"] == b["curves"] and len(a["curves"]["utility_by_private_users"]["rmse"]) == 3
    assert a["population"]["public_profiles"] == N_PUBLIC
