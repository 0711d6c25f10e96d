"""The referee: the only holder of truth. It scores what the clients predicted and what the
adversary reconstructed, and runs the non-private baseline on the true ratings."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from privrec.adversary.attacks import make_attack
from privrec.adversary.attacks.base import AttackOutput, OutputKind
from privrec.adversary.observations import Observations
from privrec.adversary.replay import STORE_NAME, read_run_config, stored_observations
from privrec.server.models.sketch_knn import cosine_knn
from privrec.server.store import Store
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import PrivrecError
from privrec.shared.metrics import classification_scores, mae, rmse
from privrec.shared.population import (
    collect_rounds,
    load_population,
    population_plan,
    rows_of_testers,
    user_id_of,
)
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.serde import read_npz
from privrec.shared.zscores import zscore
from privrec.sim.adversary_knowledge import side_knowledge_plan
from privrec.sim.auxiliary import attack_target_ids, auxiliary_user_ids
from privrec.sim.referee_attacks import score_attack
from privrec.sim.referee_cells import TruthProfiles
from privrec.sim.referee_frequency import rows_of, score_frequencies
from privrec.sim.referee_reference import like_threshold, reference_of, score_reference
from privrec.sim.referee_truth import RowTruth

logger = logging.getLogger(__name__)


def _truth_lookup(data: RatingData, user_ids: np.ndarray) -> dict[str, dict[int, float]]:
    """user id → {item: true rating} of the users `user_ids` (wire ids; repeats allowed)."""
    out = {}
    for row in np.unique(rows_of(data, np.unique(user_ids))).tolist():
        items, ratings = data.user_row(row)
        out[user_id_of(data, row)] = dict(zip(items.tolist(), ratings.tolist(), strict=True))
    return out


def score_predictions(
    config: ExperimentConfig, data: RatingData, out_dir: Path
) -> dict[str, float]:
    """MAE/RMSE of the clients' predictions against the withheld truth.

    The clients clip as `[model].clip` says; the referee also recomputes the other variant from
    the scores (for z-score answers it can: it holds every user's statistics), so the report
    shows both. Local predictions of a two-tier run also come with what the public model alone
    would have predicted (`…_rmse_public_model_only`, Xin & Jaakkola Fig. 2 at 0 private users).
    """
    files = sorted((out_dir / "predictions").glob("shard-*.npz"))
    if not files:
        raise PrivrecError(f"no predictions in {out_dir / 'predictions'}")
    parts = [read_npz(f, "prediction file") for f in files]
    users = np.concatenate([p["user_ids"] for p in parts])
    items = np.concatenate([p["items"] for p in parts])
    scores = np.concatenate([p["scores"] for p in parts])
    preds = np.concatenate([p["predictions"] for p in parts])
    n_nb = np.concatenate([p["n_neighbours"] for p in parts])
    truth = _truth_lookup(data, users)
    actual = np.array([truth[u][i] for u, i in zip(users.tolist(), items.tolist(), strict=True)])
    if str(parts[0].get("score_kind", "")) == str(ScoreKind.PROBABILITY):
        return score_classification(config, preds, actual, n_nb)
    local = str(parts[0].get("score_kind", "zscore")) == "rating"
    if local:  # the scores are the unclipped predictions themselves
        other = scores.copy()
    else:
        predicted = np.unique(rows_of(data, np.unique(users))).tolist()
        stats = {
            plan.user_id: zscore(plan.training_profile().ratings)
            for plan in population_plan(data, config, predicted)
        }
        means = np.array([stats[u].mean for u in users.tolist()])
        stds = np.array([stats[u].std for u in users.tolist()])
        other = means + stds * scores  # Bilge Eq 2.5 with the other clipping choice
    if not config.model.clip:
        other = np.clip(other, *data.rating_scale)
    other_tag = "unclipped" if config.model.clip else "clipped"
    name = config.model.name
    out = {
        f"{name}_mae": mae(preds, actual),
        f"{name}_rmse": rmse(preds, actual),
        f"{name}_mae_{other_tag}": mae(other, actual),
        f"{name}_predictions": float(preds.size),
    }
    if local:
        if all("round_predictions" in p for p in parts):
            before = np.concatenate([p["round_predictions"][0] for p in parts])
            out |= {
                f"{name}_mae_public_model_only": mae(before, actual),
                f"{name}_rmse_public_model_only": rmse(before, actual),
            }
    else:
        out[f"{name}_coverage"] = float(np.mean(n_nb > 0))
    return out


def score_classification(
    config: ExperimentConfig, labels: np.ndarray, actual: np.ndarray, n_nb: np.ndarray
) -> dict[str, float]:
    """CA and F1 (Bilge §2.4) of the classes the clients read from a classifier's P(like),
    against the withheld ratings binarised with the mechanism's public threshold."""
    name = config.model.name
    scores = classification_scores(labels, (actual > like_threshold(config)).astype(float))
    return {f"{name}_{k}": v for k, v in scores.items()} | {
        f"{name}_predictions": float(labels.size),
        f"{name}_coverage": float(np.mean(n_nb > 0)),
    }


def score_rounds(
    config: ExperimentConfig, data: RatingData, out_dir: Path
) -> dict[str, list[float]] | None:
    """Test RMSE against the number of private users folded into the model (Xin & Jaakkola
    Fig. 2): the model of each collect round (round 0: public users only), then the final one;
    None when the predictions carry no rounds (not a two-tier run)."""
    parts = [
        read_npz(f, "prediction file")
        for f in sorted((out_dir / "predictions").glob("shard-*.npz"))
    ]
    if not parts or not all("round_predictions" in p for p in parts):
        return None
    users = np.concatenate([p["user_ids"] for p in parts])
    truth = _truth_lookup(data, users)
    items = np.concatenate([p["items"] for p in parts])
    actual = np.array([truth[u][i] for u, i in zip(users.tolist(), items.tolist(), strict=True)])
    rounds = np.concatenate([p["round_predictions"] for p in parts], axis=1)
    final = np.concatenate([p["predictions"] for p in parts])
    private = np.array(collect_rounds(data, config.population, config.run.seed))
    folded = [int(np.sum((private >= 0) & (private < r))) for r in range(rounds.shape[0])]
    return {
        "private_users": [*map(float, folded), float(np.sum(private >= 0))],
        "rmse": [*(rmse(r, actual) for r in rounds), rmse(final, actual)],
        "mae": [*(mae(r, actual) for r in rounds), mae(final, actual)],
    }


def true_encodings(data: RatingData, run_config: PublicRunConfig) -> np.ndarray:
    """What the sanitized vectors stand for, computed on the truth: item-set indicators (BLIP,
    JLT, OUE: Balu's "profile" P), or ±1 like/dislike vectors at rated cells (RRT)."""
    x = data.ratings.copy().astype(np.float64)
    if run_config.mechanism_name == "rrt":
        threshold = float(run_config.public_params.get("threshold", 3.0))
        x.data = np.where(x.data > threshold, 1.0, -1.0)
    else:
        x.data = np.ones_like(x.data)
    return np.asarray(x.todense())


def score_graph(
    config: ExperimentConfig, data: RatingData, out_dir: Path, run_config: PublicRunConfig
) -> dict[str, float]:
    """Recall of the true k-NN in the server's published graph (Balu §3.5.4, k = 10):
    mean over users of |server's k-NN ∩ true k-NN| / k, the truth by cosine on raw profiles."""
    z = read_npz(out_dir / "model.npz", "published model")
    neighbours, user_ids = z["neighbours"], [str(u) for u in z["user_ids"]]
    row_of = {user_id_of(data, r): r for r in range(data.n_users)}
    rows = np.array([row_of[u] for u in user_ids])
    truth = cosine_knn(true_encodings(data, run_config)[rows], neighbours.shape[1])
    hits = [np.intersect1d(a, b).size for a, b in zip(neighbours, truth, strict=True)]
    k = neighbours.shape[1]
    chance = k / (len(rows) - 1)
    return {f"recall_at_{k}": float(np.mean(hits) / k), f"recall_at_{k}_chance": chance}


PUBLISHED_SCORERS = {"knn_graph": score_graph, "item_frequencies": score_frequencies}
"""How the referee scores a `Serving.PUBLISHED` model's result, by what it publishes."""


def score_baseline(config: ExperimentConfig, data: RatingData) -> dict[str, float]:
    """The non-private reference of a one-tier run on the true ratings, same folds and items
    (`sim.referee_reference.reference_of`)."""
    testers = population_plan(data, config, rows_of_testers(data, config).tolist())
    return score_reference(reference_of(config, data), config, testers)


def stored_run_config(store_path: Path) -> PublicRunConfig:
    """The public run configuration a server store holds (without reading its transcript).

    Raises:
        DataError: the store holds none.
    """
    store = Store(store_path, read_only=True)
    try:
        return read_run_config(store)
    finally:
        store.close()


SCORED_WITHOUT_RELEASES = frozenset(
    {OutputKind.ITEM_SET, OutputKind.GENUINE_SCORE, OutputKind.DENORMALISED_HAT}
)
"""Attack output kinds whose scores read no observed release (`score_attack`)."""


def score_attacks(
    config: ExperimentConfig,
    outputs: dict[str, AttackOutput],
    run_dir: Path,
    data: RatingData | None = None,
) -> list[dict[str, Any]]:
    """Score each attack output against the truth (the report's `attacks` list): each user's
    profile as she released it (in a two-tier run, her training ratings: the held-out ones
    never left her). The observed releases come from the run's store, for the baselines.
    Auxiliary users (`[adversary] auxiliary`, `sim.auxiliary`) are not scored: the adversary
    holds their raw profiles."""
    data = data if data is not None else load_population(config.data, config.run.seed)
    # the observed releases serve only the kinds scored against them (naive baselines, bit
    # and public-tier truths): neither read nor decoded for item sets (a million payloads,
    # about 1.4 kB each as records, at bench scale)
    if {out.kind for out in outputs.values()} <= SCORED_WITHOUT_RELEASES:
        observed = Observations(stored_run_config(run_dir / STORE_NAME), {})
    else:  # the attacked users' releases only (all of them when every user is attacked)
        observed = stored_observations(run_dir / STORE_NAME, users=attack_target_ids(config, data))
    run_config = observed.run_config
    truth: TruthProfiles
    if run_config.holdout:  # two-tier runs and named splits: training ratings released only
        truth = {
            plan.user_id: (q.items, q.ratings)
            for plan in population_plan(data, config)
            for q in [plan.training_profile()]
        }
        for uid in auxiliary_user_ids(config, data):
            truth.pop(uid, None)
    else:  # the rating matrix itself, looked up by id (no object per user)
        truth = RowTruth(data, exclude=auxiliary_user_ids(config, data))
    # the side knowledge the experiment gave the adversary, and who of the membership
    # candidates is in the run (the same deterministic draw as before the run)
    knowledge, membership = side_knowledge_plan(config, data)
    return [
        {
            "name": name,
            "knowledge": out.knowledge,
            "kind": out.kind.value,
            "applies_to": list(make_attack(name).applies_to),
            "metrics": score_attack(
                name,
                out,
                truth,
                releases=observed.profiles,
                public=observed.public,
                run_config=run_config,
                knowledge=knowledge,
                members=membership.members,
            ),
        }
        for name, out in outputs.items()
    ]


__all__ = [
    "PUBLISHED_SCORERS",
    "like_threshold",
    "score_attacks",
    "score_baseline",
    "score_classification",
    "score_graph",
    "score_predictions",
    "score_rounds",
]
