"""A new model and a new attack need only their own class and one registration.

The two examples below are deliberately small. Registered for the duration of the test, they
run in a `privrec sim` run end to end (in-process launcher, no broker): the aggregator trains
the model from the releases it received and answers the test users' queries with it, the
adversary runs the attack on what the aggregator observed, and the referee scores both into
`report.json` — with no other file touched.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import ClassVar

import dp_accounting
import numpy as np
import pytest
import scipy.sparse as sp

from privrec.adversary.attacks import ATTACKS, Attack
from privrec.adversary.attacks.base import AttackOutput, UserEstimate
from privrec.adversary.observations import Observations
from privrec.server.models import MODELS, OutputPrivacy, Recommender, UInt32Array
from privrec.server.models.persistence import load_model, save_model
from privrec.shared.capabilities import ModelCapabilities, ModelInput, ScoreKind, Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.errors import ConfigError
from privrec.shared.mechanisms.base import PrivacyStatement, SparsePayload
from privrec.shared.types import BoolArray, FloatArray, IntArray
from privrec.sim.run import SimOptions, simulate


class GlobalItemMean(Recommender):
    """Predicts every item's mean disguised z-score over the users who filled it."""

    name: ClassVar[str] = "global_item_mean"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.ZSCORE
    )

    def _fit(self, train: sp.csr_matrix) -> None:
        counts = np.bincount(train.indices, minlength=train.shape[1])
        sums = np.bincount(train.indices, weights=train.data, minlength=train.shape[1])
        self.means_ = np.divide(sums, counts, out=np.zeros(train.shape[1]), where=counts > 0)
        self.counts_ = counts.astype(np.uint32)

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        return self.means_[items], self.counts_[items]


class PopulationMeanGuess(Attack):
    """Guesses each user's z-score at an item as the population mean of the releases there."""

    name: ClassVar[str] = "population_mean_guess"
    knowledge: ClassVar[str] = "disguised profiles"
    applies_to: ClassVar[tuple[str, ...]] = ("rpt",)

    def _fit(self, observations: Observations) -> AttackOutput:
        rows = [p for p in observations.profiles.values() if isinstance(p, SparsePayload)]
        m = observations.n_items
        idx = np.concatenate([p.indices for p in rows])
        val = np.concatenate([p.values for p in rows])
        counts = np.maximum(np.bincount(idx, minlength=m), 1)
        means = np.bincount(idx, weights=val, minlength=m) / counts
        per_user = {
            uid: UserEstimate(p.indices.copy(), means[p.indices])
            for uid, p in observations.profiles.items()
            if isinstance(p, SparsePayload)
        }
        return AttackOutput(self.name, "z_hat", self.knowledge, per_user)


def _config(tmp_path: Path) -> ExperimentConfig:
    path = tmp_path / "toy.toml"
    path.write_text(
        """
[data]
dataset = "synthetic"
synthetic_users = 120
synthetic_items = 80
[model]
name = "global_item_mean"
baseline = false
[adversary]
attacks = ["population_mean_guess"]
"""
    )
    return ExperimentConfig.load(path)


def test_a_new_model_and_attack_run_end_to_end(tmp_path: Path) -> None:
    """Registered, the toy model and attack train, serve, attack and are scored in a sim run;
    unregistered, the same config is refused naming the model."""
    with MODELS.registered(GlobalItemMean), ATTACKS.registered(PopulationMeanGuess):
        report = simulate(
            _config(tmp_path), SimOptions(tmp_path / "run", launcher="inprocess", mqtt="none")
        )
    utility = report["utility"]
    assert utility["global_item_mean_predictions"] > 0
    assert 0.3 < utility["global_item_mean_mae"] < 2.0
    (attack,) = report["attacks"]
    assert attack["name"] == "population_mean_guess"
    assert attack["knowledge"] == "disguised profiles"
    # guessing the item mean of noisy releases is no better than guessing 0 by much
    assert 0.5 < attack["metrics"]["rmse_z"] < 1.5
    assert "global_item_mean" not in MODELS and "population_mean_guess" not in ATTACKS


def test_an_unregistered_model_is_a_config_error(tmp_path: Path) -> None:
    """Without the registration the run stops before any node starts, naming the key."""
    with pytest.raises(ConfigError, match=r"model.name: unknown model 'global_item_mean'"):
        simulate(_config(tmp_path), SimOptions(tmp_path / "run", launcher="inprocess", mqtt="none"))
    assert not (tmp_path / "run").exists()  # refused before the run folder is created


def test_the_toy_model_restores_from_its_state() -> None:
    """The 30-line model inherits persistence from the family (save → load → same answers)."""
    rng = np.random.default_rng(0)
    train = sp.random(20, 9, density=0.5, random_state=0, format="csr") * 3
    with MODELS.registered(GlobalItemMean):
        model = GlobalItemMean().fit(train)
        buf = io.BytesIO()
        save_model(model, buf)
        loaded = load_model(buf.getvalue(), MODELS)
    q = (np.array([0, 2]), rng.normal(size=2))
    np.testing.assert_array_equal(
        model.predict(*q, np.arange(9))[0],
        loaded.predict(*q, np.arange(9))[0],  # type: ignore[attr-defined]
    )


class NoisyItemMean(GlobalItemMean):
    """The item means with Laplace noise: a (toy) trusted-curator model with an output claim.

    Ratings lie in [1, 5] and each user adds at most one rating to an item's sum, so with at
    least `min_count` raters an item mean moves by at most 4/min_count; Laplace noise of scale
    4/(min_count·ε) makes the release of all means ε-DP per user (parallel composition over
    items does not apply: a user rates many items, so the per-item ε adds up to ε·g; this toy
    states only the per-item figure, which is what the test checks the ledger composes)."""

    name: ClassVar[str] = "noisy_item_mean"
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        ModelInput.RELEASES, Serving.QUERIES, ScoreKind.RATING
    )

    def __init__(self, epsilon: float = 1.0) -> None:
        self.epsilon = epsilon

    def output_privacy(self) -> OutputPrivacy:
        return OutputPrivacy(
            PrivacyStatement("pure", self.epsilon, 0.0, "one rating of an item changed"),
            fit_event=dp_accounting.LaplaceDpEvent(1.0 / self.epsilon),
        )


def test_a_trusted_curator_run_states_the_model_claim(tmp_path: Path) -> None:
    """Users release raw ratings (no local privacy, stated so); the model's output claim is
    composed per training user in `privacy.model`."""
    path = tmp_path / "raw.toml"
    path.write_text(
        """
[data]
dataset = "synthetic"
synthetic_users = 60
synthetic_items = 40
[mechanism]
name = "raw"
[model]
name = "noisy_item_mean"
params = { epsilon = 0.5 }
baseline = false
[adversary]
attacks = []
"""
    )
    with MODELS.registered(NoisyItemMean):
        report = simulate(
            ExperimentConfig.load(path),
            SimOptions(tmp_path / "run", launcher="inprocess", mqtt="none"),
        )
    privacy = report["privacy"]
    assert privacy["mechanism"] == "raw" and privacy["kind"] == "none"
    model = privacy["model"]
    assert model["model"] == "noisy_item_mean" and model["epsilon"] == 0.5
    assert "not against the aggregator" in model["guarantee"]
    # ε at δ = 1e-6 of one Laplace release of ε = 0.5 (PLD; the pure ε is its δ = 0 limit)
    assert model["per_user"]["per_user_epsilon"]["max"] == pytest.approx(0.5, abs=1e-4)
    assert model["answers"] == report["population"]["queries"] > 0
