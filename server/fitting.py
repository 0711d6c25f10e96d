"""The one path from stored releases to a fitted model, and from a block of queries to answers.

Every place that fits a run's model or answers its queries goes through here, so that "offline
equals a real run" holds by construction, not by three copies kept in step:

* the aggregator (`server.trainer`, `server.queries`) fits on the stored profile releases
  and answers Predict/Recommend;
* the reproduce runner (`sim.reproduce.protocol_run.ProtocolRun`) fits many models on one
  run's releases and answers every test query as `Predict` does;
* the sybils' offline answers (`sim.sybil_offline`) fit on the releases plus the crowd and
  answer every probe as the aggregator would.

The recipe (`FitRecipe`), all of it public protocol facts:

1. **canonical order**: the releases in user-id order (`canonical_order`), not arrival order,
   so a fit does not depend on how the shards happened to be scheduled;
2. **fold groups**: each row's fold by the public rule `shared.protocol.fold_of`; a query is
   answered with its user's fold left out of the neighbour pool (`exclude_groups`), so a test
   user's own profile never answers her (under a named split, `n_folds` = 0, there is no
   fold: her test ratings were never released);
3. **the model**: built from the registry with the run's parameters, and given the catalogue's
   public item features if it needs them (`supply_item_features`, Bilge §6.3.1);
4. **the training input**: the releases turned into what the model consumes
   (`server.training.TRAINING_INPUTS`, by `ModelCapabilities.consumes`).

A two-tier model is fitted by its own protocol piece (`server.two_tier.TwoTierRounds`), round by
round; everything else is fitted here.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from privrec.server.models import MODELS, Model, Recommender, supply_item_features
from privrec.server.models.base import UInt32Array
from privrec.server.spec import RunSpec
from privrec.server.training import TRAINING_INPUTS
from privrec.shared.mechanisms.base import Mechanism, Payload
from privrec.shared.protocol import excluded_fold, fold_groups
from privrec.shared.run_config import PublicRunConfig
from privrec.shared.types import FloatArray, IntArray

T = TypeVar("T")
Query = tuple[IntArray, FloatArray]
"""One query vector: (indices, values) of the cells the querying user sends."""


def canonical_order(pairs: Iterable[tuple[str, T]]) -> tuple[list[str], list[T]]:
    """`pairs` of (user id, anything) as two lists in user-id order (the fit's row order)."""
    ordered = sorted(pairs, key=lambda pair: pair[0])
    return [u for u, _ in ordered], [x for _, x in ordered]


@dataclasses.dataclass(frozen=True)
class FitRecipe:
    """How a run's model is built, fed and asked (module docstring); all of it public.

    Attributes:
        model: the model's registry name.
        model_params: its constructor parameters (`server.spec.model_params`).
        mechanism: the private tier's release mechanism (what the releases are).
        n_items: m, the catalogue size.
        n_folds, fold_seed: the public fold rule (`shared.protocol.fold_of`).
        item_features: the catalogue's public item features (shape (n_items, n_features)) for
            a model that needs them, or None.
    """

    model: str
    model_params: Mapping[str, Any]
    mechanism: Mechanism
    n_items: int
    n_folds: int
    fold_seed: int
    item_features: np.ndarray | None = None

    @classmethod
    def of_spec(cls, spec: RunSpec) -> FitRecipe:
        """The recipe of an aggregator's `RunSpec` (its fields of the same names)."""
        return cls(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(cls)})

    @classmethod
    def of_public(
        cls, run_config: PublicRunConfig, item_features: np.ndarray | None = None
    ) -> FitRecipe:
        """The recipe anyone can rebuild from the public run configuration (the mechanism from
        its public parameters) and the catalogue's public item features."""
        return cls(
            model=run_config.model_name,
            model_params=run_config.model_params,
            mechanism=run_config.mechanism(),
            n_items=run_config.n_items,
            n_folds=run_config.n_folds,
            fold_seed=run_config.fold_seed,
            item_features=item_features,
        )

    def with_model(self, name: str, params: Mapping[str, Any]) -> FitRecipe:
        """The same run's recipe for another model (a reproduction comparing models)."""
        return dataclasses.replace(self, model=name, model_params=dict(params))

    # ---------------------------------------------------------------- the pieces
    def fold(self, user_id: str) -> int | None:
        """The fold of `user_id` (`shared.protocol.excluded_fold`): her group at fit and at
        query; None without a fold rule (a named split, ``n_folds`` = 0)."""
        return excluded_fold(user_id, self.n_folds, self.fold_seed)

    def groups(self, user_ids: Sequence[str]) -> IntArray | None:
        """The fold of each user, int64 array of shape (len(user_ids),); None without a fold
        rule (`shared.protocol.fold_groups`)."""
        return fold_groups(user_ids, self.n_folds, self.fold_seed)

    def build(self) -> Model:
        """The model, unfitted, with the catalogue's item features if it needs them.

        Raises:
            ConfigError: an unknown model or a bad parameter.
            ValueError: the model needs item features and the recipe has none.
        """
        model = MODELS.build(self.model, dict(self.model_params))
        supply_item_features(model, self.item_features)  # public catalogue (genres)
        return model

    def training_input(self, rows: Sequence[Payload]) -> object:
        """What the model's `fit` receives from `rows` (releases in canonical order)."""
        consumes = MODELS.lookup(self.model).capabilities.consumes
        return TRAINING_INPUTS[consumes](rows, self.mechanism, self.n_items)

    # ---------------------------------------------------------------- the whole fit
    def fit(self, user_ids: Sequence[str], rows: Sequence[Payload]) -> Model:
        """Build the model and fit it on `rows`, user `user_ids[i]`'s release in row i, with
        each row's fold as its group.

        Raises:
            ValueError: `user_ids` not in canonical (strictly increasing) order, or not one
                per row.
        """
        if len(user_ids) != len(rows):
            raise ValueError(f"{len(user_ids)} user ids for {len(rows)} releases")
        return self.fit_input(user_ids, self.training_input(rows))

    def fit_input(self, user_ids: Sequence[str], train: object) -> Model:
        """`fit` on the training input already made from the releases (`training_input`), so
        that a caller can let the releases go before the fit (the server's stored bytes).

        Raises:
            ValueError: `user_ids` not in canonical (strictly increasing) order.
        """
        if any(a >= b for a, b in itertools.pairwise(user_ids)):
            raise ValueError("releases must come in canonical order (strictly increasing ids)")
        return fit(self.build(), train, self.groups(user_ids))

    def fit_releases(self, releases: Mapping[str, Payload]) -> Model:
        """`fit` on user id → release, taken in canonical order."""
        return self.fit(*canonical_order(releases.items()))


def fit(model: Model, train: object, groups: IntArray | None) -> Model:
    """Fit `model` on `train` with `groups` as each row's group (`exclude_groups`)."""
    model.fit(train, exclude_groups=groups)  # type: ignore[attr-defined]
    return model


def recommender(model: Model | None, name: str) -> Recommender:
    """`model` as a model that answers queries.

    Raises:
        TypeError: it answers none (it publishes parameters or a result instead).
    """
    if not isinstance(model, Recommender):
        raise TypeError(f"{name} answers no queries")
    return model


def answer_predicts(
    model: Recommender,
    queries: Sequence[Query],
    items: Sequence[IntArray],
    groups: Sequence[int | None],
) -> list[tuple[FloatArray, UInt32Array]]:
    """Answer a block of Predict queries: query i scores `items[i]` with group `groups[i]`
    (her fold) left out of the pool. Returns per query (scores, neighbours per score)."""
    return model.predict_block(list(queries), list(items), exclude_groups=list(groups))


def answer_recommends(
    model: Recommender, queries: Sequence[Query], n: int, groups: Sequence[int | None]
) -> list[tuple[IntArray, FloatArray]]:
    """Answer a block of Recommend queries (top `n` each), each with its group left out.
    Returns per query (items, scores), best first."""
    return model.recommend_block(list(queries), n, exclude_groups=list(groups))


__all__ = [
    "FitRecipe",
    "Query",
    "answer_predicts",
    "answer_recommends",
    "canonical_order",
    "fit",
    "recommender",
]
