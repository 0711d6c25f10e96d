"""The utility half of the report: the model's predictions, its ranking, its non-private
counterpart and the trivial predictors, each a timed step of the report phase.

Keys of the `utility` block (the figures group them by these names, `sim.figures`):

* ``{model}_{metric}[_{variant}]``: the run's model (``ppcf_mae``, ``ppcf_mae_unclipped``,
  ``ppcf_ndcg_at_10``);
* ``baseline_{reference}_{metric}``: its non-private counterpart (`sim.referee_reference`);
* ``trivial_{predictor}_{metric}``: the trivial predictors (`sim.referee_trivial`);
* ``{metric}_chance``: chance, where the referee knows it.

The `evaluation` block states how the test set was made and ranked (`RankingTask.protocol`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from privrec.shared.capabilities import ScoreKind, Serving
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.splits import split_fingerprint
from privrec.shared.population import tested_user_count
from privrec.shared.run_config import PublicRunConfig
from privrec.sim.planned_population import PlannedPopulation
from privrec.sim.progress import Steps
from privrec.sim.referee import PUBLISHED_SCORERS, score_predictions, score_rounds
from privrec.sim.referee_ranking import ranking_task, score_ranking, served_scorer
from privrec.sim.referee_reference import like_threshold, reference_of, score_reference
from privrec.sim.referee_trivial import (
    TrainingPools,
    popularity_scorer,
    score_trivial_classes,
    score_trivial_ratings,
)

UTILITY_STEPS = ("utility", "ranking", "baseline", "trivial")
"""The report steps this module times (``report.STEP``), in order."""


@dataclasses.dataclass
class UtilityResult:
    """What the utility steps produce: the `utility` block, the two-tier curve (or None) and
    the `evaluation` block."""

    utility: dict[str, float]
    curve: dict[str, list[float]] | None
    evaluation: dict[str, Any]


def split_block(
    config: ExperimentConfig,
    data: RatingData,
    population: PlannedPopulation,
    run_config: PublicRunConfig,
) -> dict[str, Any]:
    """The test set as the report states it: the split and its parameters, its sizes, and
    its fingerprint (`shared.data.splits.split_fingerprint`: the test cells and the seed), so
    two runs can be shown to share it."""
    ev, seed = config.evaluation, config.run.seed
    testers = population.testers
    users = [np.full(p.withheld.size, int(data.user_ids[p.row])) for p in testers]
    items = [np.asarray(data.item_ids)[p.withheld] for p in testers]
    released = int(np.count_nonzero(population.released(run_config.holdout)))
    by_split: dict[str, dict[str, Any]] = {
        "thesis": {"withheld": config.data.withheld, "n_folds": config.data.n_folds},
        "ratio": {"train": ev.ratio_train, "validation": ev.ratio_validation},
        "leave-one-out": {},
        "temporal": {"test_share": ev.temporal_test},
        "file": {"path": ev.split_file},
    }
    return {
        "name": ev.split,
        "params": by_split[ev.split],
        "seed": seed,
        "fingerprint": split_fingerprint(ev.split, seed, _cat(users), _cat(items)),
        "test_users": len(testers),
        "test_cells": int(sum(p.withheld.size for p in testers)),
        "released_training_cells": released,
        "set_aside_cells": int(data.n_ratings - population.items.size),
        "fold_left_out": run_config.n_folds > 0 and not run_config.local_prediction,
        "sampled_test_users": tested_user_count(config, data.n_users),
    }


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def score_utility(
    config: ExperimentConfig,
    data: RatingData,
    out_dir: Path,
    run_config: PublicRunConfig,
    steps: Steps,
) -> UtilityResult:
    """Run the utility steps of the report (module docstring) under `steps`."""
    if run_config.capabilities.serving is Serving.PUBLISHED:
        publishes = run_config.capabilities.publishes
        with steps.step("utility", f"scoring the published {publishes}"):
            utility = PUBLISHED_SCORERS[publishes](config, data, out_dir, run_config)
        for step in UTILITY_STEPS[1:]:
            with steps.step(step, "(none: the published result is scored against the truth)"):
                pass
        return UtilityResult(utility, None, {})
    ev = config.evaluation
    with steps.step("utility", "scoring the clients' predictions"):
        utility = score_predictions(config, data, out_dir)
        curve = score_rounds(config, data, out_dir)
    population = PlannedPopulation.of_run(data, config)
    task = ranking_task(config, population, data, out_dir) if ev.ranking else None
    evaluation: dict[str, Any] = {"split": split_block(config, data, population, run_config)}
    if task is not None:
        evaluation["ranking"] = task.protocol(config)
    with steps.step("ranking", "ranking every test user's candidates with the model"):
        if task is not None:
            served = served_scorer(out_dir, run_config, task)
            utility |= score_ranking(task, served, config.model.name)
            del served  # the stored model, refitted: not held beside the reference's fit
    with steps.step("baseline", "the non-private reference on the true ratings"):
        if config.model.baseline:
            reference = reference_of(config, data, run_config)
            utility |= score_reference(reference, config, population.testers)
            if task is not None:
                prefix = f"baseline_{reference.name}"
                utility |= score_ranking(task, reference.scorer(task), prefix)
    with steps.step("trivial", "the trivial predictors on the true training ratings"):
        if ev.trivial:
            pools = TrainingPools.of_run(population, run_config)
            if run_config.score_kind is ScoreKind.PROBABILITY:
                utility |= score_trivial_classes(population, run_config, like_threshold(config))
            else:
                clip = data.rating_scale if config.model.clip else None
                utility |= score_trivial_ratings(population.testers, pools, clip)
            if task is not None:
                popularity = popularity_scorer(task, pools)
                utility |= score_ranking(task, popularity, "trivial_popularity")
    return UtilityResult(utility, curve, evaluation)


__all__ = ["UTILITY_STEPS", "UtilityResult", "score_utility", "split_block"]
