"""Balu's attacks over the real protocol: a BLIP or JLT run with the four scorers and the
auxiliary users (`[adversary] auxiliary = "popularity"`); the report carries each attack's
knowledge and metrics, `privrec replay` reproduces the live numbers exactly, and real processes
(the live adversary node building its own auxiliary set) agree with the in-process launcher."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privrec.adversary.replay import load_output
from privrec.shared.config import ExperimentConfig
from privrec.sim.cli import main as privrec_main
from privrec.sim.run import SimOptions, simulate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ATTACKS = ["balu_single", "balu_popularity", "balu_mcmc", "balu_mcmc_flat"]
N_USERS, N_AUX = 150, 90
PARAMS = {
    "blip": {"epsilon": 17.0, "n_bits": 1000, "n_hashes": 10},
    "jlt": {"epsilon": 2.0, "dim": 200, "sigma_rule": "balu2016"},
}


def config(mechanism: str) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "run": {"name": f"balu-{mechanism}", "seed": 3},
            "data": {"dataset": "synthetic", "synthetic_users": N_USERS, "synthetic_items": 200},
            "mechanism": {"name": mechanism, "params": PARAMS[mechanism]},
            "model": {"name": "sketch_knn", "k": 10, "baseline": False},
            "adversary": {"attacks": ATTACKS, "auxiliary": "popularity", "auxiliary_users": N_AUX},
        }
    )


@pytest.mark.parametrize("mechanism", ["blip", "jlt"])
def test_attacks_in_report_and_replay_equals_live(mechanism: str, tmp_path: Path) -> None:
    """Each attack is in report.json with its knowledge (naming the auxiliary users where it
    uses them) and scores on exactly the N_USERS − N_AUX attacked users; `privrec replay`
    gives bit-identical outputs and the same metrics."""
    run = tmp_path / "run"
    report = simulate(config(mechanism), SimOptions(run, launcher="inprocess", mqtt="none"))
    attacks = {a["name"]: a for a in report["attacks"]}
    assert sorted(attacks) == sorted(ATTACKS)
    for name, a in attacks.items():
        assert a["metrics"]["n_users"] == N_USERS - N_AUX
        assert 0.0 <= a["metrics"]["cosine_mean"] <= 1.0
        uses_aux = name in ("balu_popularity", "balu_mcmc")
        assert (f"{N_AUX} auxiliary users" in a["knowledge"]) == uses_aux, a["knowledge"]
    # the joint decoder with prior reads the release: it beats the release-blind baseline
    assert (
        attacks["balu_mcmc"]["metrics"]["cosine_mean"]
        > (attacks["balu_popularity"]["metrics"]["cosine_mean"])
    )
    assert privrec_main(["replay", str(run)]) == 0
    scores = json.loads((run / "adversary" / "replay" / "scores.json").read_text())
    assert {s["name"]: s["metrics"] for s in scores} == {
        n: a["metrics"] for n, a in attacks.items()
    }
    for name in ATTACKS:
        live = load_output(run / "adversary" / "live" / f"{name}.npz")
        again = load_output(run / "adversary" / "replay" / f"{name}.npz")
        assert live.set_sizes == again.set_sizes and live.diagnostics == again.diagnostics
        for uid, est in live.per_user.items():
            np.testing.assert_array_equal(est.values, again.per_user[uid].values)
            np.testing.assert_array_equal(est.indices, again.per_user[uid].indices)


def test_blip_attacks_over_real_processes_match_inprocess(tmp_path: Path) -> None:
    """Real gRPC processes with the embedded broker: the live adversary node follows the feed,
    rebuilds the auxiliary set from the config, and reports the in-process attack numbers."""
    a = simulate(config("blip"), SimOptions(tmp_path / "p", launcher="processes", mqtt="embedded"))
    b = simulate(config("blip"), SimOptions(tmp_path / "i", launcher="inprocess", mqtt="none"))
    assert "adversary" in a["run"]["nodes"]
    assert a["attacks"] == b["attacks"]
    assert a["utility"] == b["utility"]
