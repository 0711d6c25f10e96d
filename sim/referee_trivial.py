"""The trivial predictors, computed by the referee on the true training ratings of every run:
the floor any recommender must clear, drawn beside the model in every utility figure.

* rating error: the global mean, the test user's own mean (of her training ratings) and the
  item's mean predict each withheld rating (MAE, RMSE);
* classification (a classifier's run, like = rating above the mechanism's public threshold):
  the same three as majority votes of the like bits (like when more than half of the pool's
  bits are likes), scored by CA and F1 (Bilge §2.4);
* ranking: the most popular items first (the number of training ratings of each candidate),
  scored by the ranking metrics (`sim.referee_ranking`).

"Training ratings" are exactly what the model was fitted on for that user (`TrainingPools`):
in a run whose users release their whole profile (Bilge's protocol, 5-fold over users), the
profiles of the users outside her fold; in a run whose users release only their training
ratings (two-tier runs: her held-out ratings never leave her), everyone's training ratings.
So a trivial predictor never sees a cell the model did not see, and never a test cell.

References:
    Herlocker, Konstan, Terveen, Riedl. "Evaluating collaborative filtering recommender
    systems", TOIS 2004 (mean and popularity baselines).
    Cremonesi, Koren, Turrin. "Performance of recommender algorithms on top-N recommendation
    tasks", RecSys 2010 (the popularity ranking as the top-N floor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Self

import numpy as np

from privrec.shared.metrics import classification_scores, mae, rmse
from privrec.shared.population import UserPlan
from privrec.shared.protocol import excluded_fold
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.types import FloatArray
from privrec.sim.planned_population import PlannedPopulation, as_planned
from privrec.sim.referee_ranking import RankingTask, Scored, Scorer

TRIVIAL_RATING = ("global_mean", "user_mean", "item_mean")
"""The trivial rating predictors, in the order the report lists them."""


@dataclasses.dataclass(frozen=True)
class TrainingPools:
    """The true training values behind each test user's answers, as item sums and counts per
    group (module docstring).

    Attributes:
        sums: float array of shape (groups, n_items), the values' sums per group.
        counts: float array of shape (groups, n_items), how many per group.
        group_of: test user id → her group.
        exclude_own: whether a user's own group is left out of her pool (the fold rule).
    """

    sums: FloatArray
    counts: FloatArray
    group_of: Mapping[str, int]
    exclude_own: bool

    @classmethod
    def of_run(
        cls,
        plans: PlannedPopulation | Sequence[UserPlan],
        run_config: PublicRunConfig,
        value: Callable[[FloatArray], FloatArray] = lambda r: r,
    ) -> Self:
        """The pools of a run: whole profiles with the fold left out (the thesis protocol),
        or everyone's training ratings when users release only those (`holdout`: two-tier
        runs and named splits); `value` maps true ratings to what is averaged (like bits).
        `plans`: the run's `PlannedPopulation` (or every user's plan); `group_of` holds the
        test users. Each (group, item) sum adds its cells in row order, as a loop over the
        users would."""
        population = as_planned(plans)
        folds = run_config.n_folds if not run_config.local_prediction else 0
        rows = population.every_row
        group = np.zeros(int(rows[-1]) + 1 if rows.size else 0, dtype=np.int64)
        if folds:
            for r in rows.tolist():
                group[r] = excluded_fold(population.user_ids(r), folds, run_config.fold_seed) or 0
        n_groups = int(group[rows].max(initial=0)) + 1
        n_items = population.n_items
        keep = population.released(run_config.holdout)
        bins = group[population.rows[keep]] * n_items + population.items[keep]
        size = n_groups * n_items
        weights = value(population.ratings[keep])
        sums = np.asarray(np.bincount(bins, weights=weights, minlength=size), np.float64)
        counts = np.bincount(bins, minlength=size).astype(np.float64)
        groups = {p.user_id: int(group[p.row]) for p in population.testers}
        return cls(
            sums.reshape(n_groups, n_items),
            counts.reshape(n_groups, n_items),
            groups,
            exclude_own=folds > 0,
        )

    def pool(self, user_id: str) -> tuple[FloatArray, FloatArray]:
        """(sums, counts) per item of the training values `user_id`'s answers drew on."""
        total_s, total_c = self.sums.sum(axis=0), self.counts.sum(axis=0)
        if not self.exclude_own:
            return total_s, total_c
        g = self.group_of[user_id]
        return total_s - self.sums[g], total_c - self.counts[g]

    def pools_by_group(self) -> dict[int, tuple[FloatArray, FloatArray, float]]:
        """group → (item sums, item counts, global mean) of the pool of its users."""
        out = {}
        for g in sorted(set(self.group_of.values())):
            s, c = self.pool(next(u for u, h in self.group_of.items() if h == g))
            out[g] = (s, c, float(s.sum() / c.sum()) if c.sum() else 0.0)
        return out


def trivial_predictions(
    testers: Sequence[UserPlan],
    pools: TrainingPools,
    value: Callable[[FloatArray], FloatArray] = lambda r: r,
) -> dict[str, FloatArray]:
    """Each trivial rating predictor's prediction of every withheld cell of `testers`, in
    their order (the order of the referee's truth); an item nobody in the pool rated gets the
    pool's global mean."""
    by_group = pools.pools_by_group()
    out: dict[str, list[FloatArray]] = {name: [] for name in TRIVIAL_RATING}
    for plan in testers:
        sums, counts, global_mean = by_group[pools.group_of[plan.user_id]]
        n = plan.withheld.size
        own = value(plan.training_profile().ratings)
        c, s = counts[plan.withheld], sums[plan.withheld]
        out["global_mean"].append(np.full(n, global_mean))
        out["user_mean"].append(np.full(n, float(own.mean()) if own.size else global_mean))
        out["item_mean"].append(np.where(c > 0, s / np.maximum(c, 1.0), global_mean))
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}


def score_trivial_ratings(
    testers: Sequence[UserPlan], pools: TrainingPools, clip: tuple[float, float] | None
) -> dict[str, float]:
    """MAE and RMSE of each trivial predictor (``trivial_{name}_mae``/``_rmse``)."""
    actual = np.concatenate([p.withheld_ratings() for p in testers])
    out = {}
    for name, pred in trivial_predictions(testers, pools).items():
        p = np.clip(pred, *clip) if clip else pred
        out[f"trivial_{name}_mae"] = mae(p, actual)
        out[f"trivial_{name}_rmse"] = rmse(p, actual)
    return out


def score_trivial_classes(
    plans: PlannedPopulation | Sequence[UserPlan], run_config: PublicRunConfig, threshold: float
) -> dict[str, float]:
    """CA and F1 of each trivial predictor as a majority vote of like bits
    (``trivial_{name}_ca``/``_f1``…), like = rating > `threshold`; `plans`: the run's
    `PlannedPopulation` (or every user's plan)."""

    def likes(r: FloatArray) -> FloatArray:
        return (np.asarray(r) > threshold).astype(np.float64)

    population = as_planned(plans)
    testers = population.testers
    pools = TrainingPools.of_run(population, run_config, likes)
    actual = np.concatenate([likes(p.withheld_ratings()) for p in testers])
    out: dict[str, float] = {}
    for name, rate in trivial_predictions(testers, pools, likes).items():
        scores = classification_scores((rate > 0.5).astype(np.float64), actual)
        out |= {f"trivial_{name}_{k}": v for k, v in scores.items()}
    return out


def popularity_scorer(task: RankingTask, pools: TrainingPools) -> Scorer:
    """The popularity ranking: each candidate scored by the number of training ratings in
    the user's pool (no rating: no evidence, ranked last)."""
    by_group = pools.pools_by_group()

    def score(positions: Sequence[int]) -> list[Scored]:
        out = []
        for p in positions:
            _, counts, _ = by_group[pools.group_of[task.plans[p].user_id]]
            c = counts[task.candidates[p]]
            out.append((c, c > 0))
        return out

    return score


__all__ = [
    "TRIVIAL_RATING",
    "TrainingPools",
    "popularity_scorer",
    "score_trivial_classes",
    "score_trivial_ratings",
    "trivial_predictions",
]
