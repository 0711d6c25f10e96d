"""The non-private counterpart of a run's model, fitted by the referee on the true ratings:
the reference every utility figure draws beside the model.

One `Reference` per kind of run, each answering the same test users' items as the model did
(same folds, same queries made of her true training ratings):

* a model that declares its counterpart (`Model.counterpart`): that model with its defaults,
  e.g. `biased_mf` beside DPSGD-MF and DPPS-MF, which run its trainer (`baseline_biased_mf_*`);
* any other rating or z-score model: the Pearson kNN of Bilge Eq 2.1/2.2
  (`baseline_pearson_knn_*`);
* a classifier (`ScoreKind.PROBABILITY`): the run's classifier without masking, θ = 1 (Miyahara
  & Pazzani's NBC) on the binarised truth (`baseline_nbc_*`);
* a two-tier model: the run's model fitted as if every user were public, each user completing
  her ratings with it by the model's local rule (`baseline_all_public_*`).

A `Reference` scores items (its `predict`), so the referee computes its rating error and its
ranking (`sim.referee_ranking`) from one fitted model, fitted and asked through the one path
of `server.fitting` (`fit`, `answer_predicts`) on the true ratings in the data set's row order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from privrec.server.fitting import answer_predicts, fit, recommender
from privrec.server.models import MODELS, TwoTierModel, make_model
from privrec.server.models.knn import PearsonKNN
from privrec.server.spec import model_params
from privrec.shared.capabilities import ScoreKind
from privrec.shared.config import ExperimentConfig
from privrec.shared.data.dataset import RatingData
from privrec.shared.local_prediction import LOCAL_PREDICTORS
from privrec.shared.mechanisms.base import Profile
from privrec.shared.metrics import classification_scores, mae, rmse
from privrec.shared.population import UserPlan, population_plan, user_id_of
from privrec.shared.protocol import fold_of
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.types import FloatArray, IntArray
from privrec.sim.referee_ranking import RankingTask, Scored, Scorer

Predict = Callable[[Sequence[UserPlan], Sequence[IntArray], bool], list[Scored]]
"""(test users, items to score for each, clip) → per user (scores, evidence)."""


@dataclasses.dataclass(frozen=True)
class Reference:
    """A non-private counterpart (module docstring).

    Attributes:
        name: the key prefix after ``baseline_`` (``pearson_knn``, ``nbc``, ``all_public``).
        kind: what its scores are (``RATING`` or ``PROBABILITY``).
        predict: scores of given items for given test users (clipped to the rating scale
            when asked, for the rating error; unclipped for ranking, where clipping only ties).
    """

    name: str
    kind: ScoreKind
    predict: Predict

    def scorer(self, task: RankingTask) -> Scorer:
        """The reference's ranking of the task's candidates."""

        def score(positions: Sequence[int]) -> list[Scored]:
            return self.predict(
                [task.plans[p] for p in positions], [task.candidates[p] for p in positions], False
            )

        return score


def training_matrix(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig | None
) -> tuple[sp.csr_matrix, IntArray | None]:
    """The true ratings a reference is fitted on, with each row's fold: under the thesis
    protocol every rating (whole profiles, as released) and the fold rule; under a named
    split (`run_config.n_folds` = 0) every user's training ratings and no fold."""
    if run_config is not None and run_config.n_folds == 0:
        return _matrix([p.training_profile() for p in population_plan(data, config)], data), None
    folds = np.array(
        [
            fold_of(user_id_of(data, r), config.data.n_folds, config.run.seed)
            for r in range(data.n_users)
        ],
        dtype=np.int64,
    )
    return data.ratings, folds


def _matrix(profiles: Sequence[Profile], data: RatingData) -> sp.csr_matrix:
    """The rows of `profiles` as one CSR matrix of the data set's shape."""
    return sp.csr_matrix(
        (
            np.concatenate([p.ratings for p in profiles]),
            np.concatenate([p.items for p in profiles]),
            np.concatenate([[0], np.cumsum([p.items.size for p in profiles])]),
        ),
        shape=(data.n_users, data.n_items),
    )


def _groups(folds: IntArray | None, plans: Sequence[UserPlan]) -> list[int | None]:
    return [None if folds is None else int(folds[p.row]) for p in plans]


def like_threshold(config: ExperimentConfig) -> float:
    """The public like threshold of the run's binarising mechanism (RRT: like = rating > it).

    Raises:
        PrivrecError: the mechanism binarises nothing (a classifier needs one that does).
    """
    from privrec.shared.errors import PrivrecError
    from privrec.shared.mechanisms import make_mechanism

    params = make_mechanism(config.mechanism.name, dict(config.mechanism.params)).public_params()
    if "threshold" not in params:
        raise PrivrecError(
            f"model {config.model.name!r} classifies like/dislike, but mechanism "
            f"{config.mechanism.name!r} has no like `threshold` (use rrt)"
        )
    return float(params["threshold"])


def pearson_reference(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig | None = None
) -> Reference:
    """The non-private Pearson kNN (Bilge Eq 2.1/2.2) on the true ratings, same folds.

    One model, fitted unclipped, answers both: a clipped score is its unclipped score clipped
    to the rating scale (`PearsonKNN._finish`), so the rating error's clipped answers are the
    same floats as a second model fitted with `clip` gave (twice the memory and fit time)."""
    truth, folds = training_matrix(config, data, run_config)
    scale = data.rating_scale
    model = recommender(fit(PearsonKNN(k=config.model.k), truth, folds), "pearson_knn")

    def predict(plans: Sequence[UserPlan], items: Sequence[IntArray], clip: bool) -> list[Scored]:
        answers = answer_predicts(model, _queries(plans), list(items), _groups(folds, plans))
        if clip and config.model.clip:
            answers = [(np.clip(s, float(scale[0]), float(scale[1])), n) for s, n in answers]
        return [(s, n > 0) for s, n in answers]

    return Reference("pearson_knn", ScoreKind.RATING, predict)


def counterpart_reference(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig | None = None
) -> Reference:
    """The counterpart the run's model declares (`Model.counterpart`), with its defaults, on
    the true ratings, same folds; its scores clipped to the rating scale for the rating error
    when the run clips."""
    name = MODELS.lookup(config.model.name).counterpart
    if name is None:
        raise ValueError(f"model {config.model.name!r} declares no counterpart")
    truth, folds = training_matrix(config, data, run_config)
    model = recommender(fit(make_model(name, {}), truth, folds), name)

    def predict(plans: Sequence[UserPlan], items: Sequence[IntArray], clip: bool) -> list[Scored]:
        answers = answer_predicts(model, _queries(plans), list(items), _groups(folds, plans))
        if clip and config.model.clip:
            answers = [(np.clip(s, *data.rating_scale), n) for s, n in answers]
        return [(s, n > 0) for s, n in answers]

    return Reference(name, ScoreKind.RATING, predict)


def _queries(plans: Sequence[UserPlan]) -> list[tuple[IntArray, FloatArray]]:
    """Each test user's query: her true training ratings."""
    return [(q.items, q.ratings) for q in (p.training_profile() for p in plans)]


def classifier_reference(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig | None = None
) -> Reference:
    """The run's classifier without masking (θ = 1: Miyahara & Pazzani's NBC, with the run's
    extraction and densifying) on the true binarised ratings, same folds."""
    threshold = like_threshold(config)
    ratings, folds = training_matrix(config, data, run_config)
    truth = ratings.tocsr().astype(np.float64)
    truth.data = (truth.data > threshold).astype(np.float64)
    unmasked = make_model(config.model.name, model_params(config) | {"theta": 1.0})
    model = recommender(fit(unmasked, truth, folds), config.model.name)

    def predict(plans: Sequence[UserPlan], items: Sequence[IntArray], clip: bool) -> list[Scored]:
        answers = answer_predicts(
            model,
            [
                (q.items, (q.ratings > threshold).astype(np.float64))
                for q in (p.training_profile() for p in plans)
            ],
            list(items),
            _groups(folds, plans),
        )
        return [(s, n > 0) for s, n in answers]

    return Reference("nbc", ScoreKind.PROBABILITY, predict)


def all_public_reference(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig
) -> Reference:
    """The non-private reference of a two-tier run: the run's model fitted as if every user
    were public, i.e. on everyone's training ratings, each user completing her ratings with it
    by the model's local rule, as the clients do."""
    matrix = _matrix([p.training_profile() for p in population_plan(data, config)], data)
    model = make_model(run_config.model_name, run_config.model_params)
    assert isinstance(model, TwoTierModel)
    published = model.fit_public(matrix).public_arrays()
    rule = LOCAL_PREDICTORS[run_config.capabilities.local_predictor]

    def predict(plans: Sequence[UserPlan], items: Sequence[IntArray], clip: bool) -> list[Scored]:
        out = []
        for plan, it in zip(plans, items, strict=True):
            q = plan.training_profile()
            s = np.asarray(rule(published, q.items, q.ratings, it))
            if clip and config.model.clip:
                s = np.clip(s, *data.rating_scale)
            out.append((s, np.ones(s.size, dtype=bool)))
        return out

    return Reference("all_public", ScoreKind.RATING, predict)


def reference_of(
    config: ExperimentConfig, data: RatingData, run_config: PublicRunConfig | None = None
) -> Reference:
    """The run's non-private counterpart (module docstring); without `run_config`, a one-tier
    run under the thesis protocol."""
    if run_config is not None and run_config.two_tier:
        return all_public_reference(config, data, run_config)
    model = MODELS.lookup(config.model.name)
    if model.capabilities.scores is ScoreKind.PROBABILITY:
        return classifier_reference(config, data, run_config)
    if model.counterpart is not None:
        return counterpart_reference(config, data, run_config)
    return pearson_reference(config, data, run_config)


def score_reference(
    reference: Reference, config: ExperimentConfig, testers: Sequence[UserPlan]
) -> dict[str, float]:
    """The reference's MAE and RMSE (or, for a classifier, CA, precision, recall and F1 of
    its classes, like when P > 1/2) on the withheld cells of the run's `testers` (the test
    users' plans): ``baseline_{name}_{metric}``."""
    answers = reference.predict(testers, [p.withheld for p in testers], True)
    scores = np.concatenate([s for s, _ in answers])
    actual = np.concatenate([p.withheld_ratings() for p in testers])
    prefix = f"baseline_{reference.name}"
    if reference.kind is ScoreKind.PROBABILITY:
        labels = (scores > 0.5).astype(float)
        liked = (actual > like_threshold(config)).astype(float)
        return {f"{prefix}_{k}": v for k, v in classification_scores(labels, liked).items()}
    return {f"{prefix}_mae": mae(scores, actual), f"{prefix}_rmse": rmse(scores, actual)}


__all__ = [
    "Reference",
    "all_public_reference",
    "classifier_reference",
    "counterpart_reference",
    "like_threshold",
    "pearson_reference",
    "reference_of",
    "score_reference",
]
