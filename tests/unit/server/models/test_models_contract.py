"""Contract suite every `Recommender` must pass (fit → predict shapes, reproducibility, errors).

A new model joins by subclassing `RecommenderContract` with `__test__ = True` and
`make_models()`.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import MODELS, PPCF, PearsonKNN, Recommender
from privrec.server.models.sketch_knn import SketchKNN
from privrec.server.models.two_tier import TwoTierLowRank
from privrec.shared.errors import NotFittedError


def _train(seed: int = 0, n_users: int = 30, n_items: int = 18) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < 0.45
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix(
        (rng.integers(1, 6, r.size).astype(float), (r, c)), shape=(n_users, n_items)
    )


class RecommenderContract:
    """Behaviour shared by all recommenders; subclasses provide the models."""

    __test__ = False

    def make_models(self) -> list[Recommender]:
        raise NotImplementedError

    def test_fit_returns_self_and_sets_shape(self) -> None:
        """fit returns the model and records n_users_, n_items_, groups_."""
        train = _train()
        groups = np.arange(train.shape[0]) % 4
        for model in self.make_models():
            assert model.fit(train, exclude_groups=groups) is model
            assert (model.n_users_, model.n_items_) == train.shape
            np.testing.assert_array_equal(model.groups_, groups)

    def test_predict_shapes_and_dtypes(self) -> None:
        """predict gives float64 scores and uint32 counts, one per requested item."""
        train = _train()
        for model in self.make_models():
            model.fit(train)
            scores, counts = model.predict([0, 3], [4.0, 2.0], np.array([1, 2, 2, 17]))
            assert scores.shape == counts.shape == (4,)
            assert scores.dtype == np.float64 and counts.dtype == np.uint32
            assert np.all(np.isfinite(scores))
            empty = model.predict([0], [4.0], np.array([], dtype=np.int64))
            assert empty[0].shape == empty[1].shape == (0,)

    def test_same_input_same_output(self) -> None:
        """Two fits on the same data answer identically, bit for bit."""
        train = _train(1)
        for model in self.make_models():
            twin = type(model)(**_params(model))
            a = model.fit(train).recommend([0, 1], [5.0, 1.0], 5)
            b = twin.fit(train).recommend([0, 1], [5.0, 1.0], 5)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])

    def test_fit_does_not_modify_input(self) -> None:
        """The caller's matrix is left untouched."""
        train = _train(2)
        before = train.copy()
        for model in self.make_models():
            model.fit(train)
            assert (train != before).nnz == 0

    def test_unfitted_raises(self) -> None:
        """Using a model before fit raises NotFittedError."""
        for model in self.make_models():
            with pytest.raises(NotFittedError):
                model.recommend([0], [1.0], 3)

    def test_recommend_sorted_and_unseen(self) -> None:
        """recommend returns ≤ n distinct unseen items with non-increasing scores."""
        train = _train(3)
        for model in self.make_models():
            items, scores = model.fit(train).recommend([0, 4, 5], [3.0, 4.0, 1.0], 7)
            assert items.size <= 7 and np.unique(items).size == items.size
            assert not set(items.tolist()) & {0, 4, 5}
            assert np.all(np.diff(scores) <= 0)


def _params(model: Recommender) -> dict[str, object]:
    return {k: v for k, v in vars(model).items() if not k.startswith("_") and not k.endswith("_")}


class TestPPCFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Recommender]:
        return [PPCF(k=1), PPCF(k=5), PPCF()]


class TestPearsonKNNContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Recommender]:
        return [PearsonKNN(k=3), PearsonKNN(k=100, clip=(1.0, 5.0))]


def test_registry_lists_every_model() -> None:
    """Every model is registered under its `name`."""
    assert {
        "ppcf": PPCF,
        "pearson_knn": PearsonKNN,
        "sketch_knn": SketchKNN,
        "two_tier_lowrank": TwoTierLowRank,
    } == MODELS
