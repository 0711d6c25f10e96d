"""Contract suite every model passes (STYLE item 18; scikit-learn's estimator checks).

One suite per sub-family of `privrec.server.models.base`:

* `ModelContract` (every model): a declared, registered name and capabilities readable without
  building the model; `get_params` rebuilds an equal model; NotFittedError before fitting; the
  same data gives bit-identical results; the caller's data is not modified; a wrong-shaped
  input is refused with ValueError; the fitted state survives `save_model` → `load_model`.
* `RecommenderContract`: predict/recommend shapes, dtypes and order; a block of queries answers
  each query as it would alone; malformed queries are refused naming the field.
* `TwoTierContract`: public fit, then private rounds, publishing (µ, V).

A new model joins by adding a case (a subclass with `__test__ = True` and `make_models()`); the
cases are discovered (`tests.family_cases`), and `test_every_registered_model_has_a_contract_case`
fails until the new model has one.
"""

from __future__ import annotations

import io
from typing import Any, ClassVar

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.server.models import (
    DPPSMF,
    DPPSPNBM,
    DPSGDMF,
    DPSGDPNBM,
    MODELS,
    PNCF,
    PPCF,
    PPDWT,
    PPNBC,
    BiasedMF,
    BisectingCF,
    BisectingPPCF,
    ClippedCountSketchMF,
    ClusterCF,
    ClusterPPCF,
    CoRatedKNN,
    CountSketchMF,
    FeatureHashingMF,
    ItemFeatureModel,
    ItemFrequency,
    MatrixModel,
    Model,
    PearsonKNN,
    Recommender,
    RegularMF,
    SketchKNN,
    TargetItemCF,
    TargetItemPPCF,
    TwoTierFullEM,
    TwoTierLowRank,
    TwoTierModel,
)
from privrec.server.models.persistence import load_model, save_model
from privrec.server.training import EstimateSum
from privrec.shared.capabilities import ModelCapabilities, ModelInput, Serving
from privrec.shared.errors import NotFittedError
from tests.family_cases import contract_cases, family_members


def _train(seed: int = 0, n_users: int = 30, n_items: int = 18) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    filled = rng.random((n_users, n_items)) < 0.45
    filled[:, 0] = True
    r, c = np.nonzero(filled)
    return sp.csr_matrix(
        (rng.integers(1, 6, r.size).astype(float), (r, c)), shape=(n_users, n_items)
    )


def _params(model: Model) -> dict[str, object]:
    return {k: v for k, v in vars(model).items() if not k.startswith("_") and not k.endswith("_")}


def _same(a: Any, b: Any) -> None:
    """Bit-identical nested results (arrays, tuples, lists, dicts)."""
    if isinstance(a, dict):
        assert set(a) == set(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        np.testing.assert_array_equal(a, b)


class ModelContract:
    """Behaviour shared by every model; subclasses provide the models and how to fit them."""

    __test__ = False
    family: ClassVar[type[Model]] = Model

    def make_models(self) -> list[Model]:
        raise NotImplementedError

    def fit(self, model: Model, seed: int = 0) -> Model:
        """Fit `model` on the case's data of seed `seed`; returns it."""
        raise NotImplementedError

    def results(self, model: Model) -> Any:
        """What a fitted model gives its users (answers or published arrays)."""
        return model.public_arrays()

    def bad_input(self, model: Model) -> None:
        """Fit `model` on wrong-shaped input (must raise ValueError)."""
        raise NotImplementedError

    def test_declares_itself_without_being_built(self) -> None:
        """name and capabilities are class attributes; the registry holds the class."""
        for model in self.make_models():
            cls = type(model)
            assert isinstance(cls.name, str) and cls.name
            assert isinstance(cls.capabilities, ModelCapabilities)
            assert MODELS[cls.name] is cls
            assert isinstance(model, self.family)
            assert cls.answers_queries == (cls.capabilities.serving is Serving.QUERIES)

    def test_get_params_rebuilds_an_equal_model(self) -> None:
        """type(m)(**m.get_params()) has the same parameters (scikit-learn's clone)."""
        for model in self.make_models():
            twin = type(model)(**model.get_params())
            assert twin.get_params() == model.get_params()
            assert _params(twin) == _params(model)

    def test_unfitted_raises(self) -> None:
        """The fitted state and anything derived from it raise NotFittedError before fitting."""
        for model in self.make_models():
            with pytest.raises(NotFittedError):
                model.state_arrays()

    def test_same_data_same_results(self) -> None:
        """Two fits on the same data give bit-identical results."""
        for model in self.make_models():
            twin = type(model)(**model.get_params())
            _same(self.results(self.fit(model, 1)), self.results(self.fit(twin, 1)))

    def test_save_and_load_keep_the_results(self) -> None:
        """A saved and reloaded model answers exactly as the original (restart safety)."""
        for model in self.make_models():
            self.fit(model, 2)
            buf = io.BytesIO()
            save_model(model, buf)
            loaded = load_model(buf.getvalue(), MODELS)
            assert type(loaded) is type(model)
            assert loaded.get_params() == model.get_params()
            _same(self.results(loaded), self.results(model))

    def test_refuses_wrong_shaped_input(self) -> None:
        """Input of the wrong shape or type is a ValueError, not a crash later."""
        for model in self.make_models():
            with pytest.raises(ValueError):
                self.bad_input(model)


# ------------------------------------------------------------------ recommenders
_QUERIES = [
    (np.array([0, 3]), np.array([4.0, 2.0])),
    (np.array([0, 1, 5]), np.array([5.0, 1.0, 3.0])),
    (np.array([2]), np.array([1.5])),
]


class RecommenderContract(ModelContract):
    """Recommenders: fitted on a sparse matrix, queried in blocks."""

    family = Recommender

    def train_matrix(self, seed: int = 0) -> sp.csr_matrix:
        """The case's training matrix (default: ratings 1..5; a binary model binarises)."""
        return _train(seed)

    def values(self, values: list[float]) -> np.ndarray:
        """Query values as the case's model reads them (default: as given)."""
        return np.asarray(values, dtype=np.float64)

    def queries(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(idx, self.values(list(val))) for idx, val in _QUERIES]

    def fit(self, model: Model, seed: int = 0) -> Model:
        assert isinstance(model, Recommender)
        train = self.train_matrix(seed)
        return model.fit(train, exclude_groups=np.arange(train.shape[0]) % 3)

    def results(self, model: Model) -> Any:
        assert isinstance(model, Recommender)
        items = [np.arange(18)] * len(self.queries())
        return (
            model.predict_block(self.queries(), items, exclude_groups=[0, 1, None]),
            model.recommend_block(self.queries(), 5, exclude_groups=[2, None, 0]),
        )

    def bad_input(self, model: Model) -> None:
        assert isinstance(model, Recommender)
        model.fit(np.ones((4, 3)))  # type: ignore[arg-type]  # dense, not sparse

    def test_fit_returns_self_and_sets_shape(self) -> None:
        """fit returns the model and records n_users_, n_items_, groups_."""
        train = self.train_matrix()
        groups = np.arange(train.shape[0]) % 4
        for model in self.make_models():
            assert isinstance(model, Recommender)
            assert model.fit(train, exclude_groups=groups) is model
            assert (model.n_users_, model.n_items_) == train.shape
            np.testing.assert_array_equal(model.groups_, groups)

    def test_predict_shapes_and_dtypes(self) -> None:
        """predict gives float64 scores and uint32 counts, one per requested item."""
        train = self.train_matrix()
        for model in self.make_models():
            assert isinstance(model, Recommender)
            model.fit(train)
            scores, counts = model.predict([0, 3], self.values([4.0, 2.0]), np.array([1, 2, 2, 17]))
            assert scores.shape == counts.shape == (4,)
            assert scores.dtype == np.float64 and counts.dtype == np.uint32
            assert np.all(np.isfinite(scores))
            empty = model.predict([0], self.values([4.0]), np.array([], dtype=np.int64))
            assert empty[0].shape == empty[1].shape == (0,)

    def test_block_answers_each_query_as_alone(self) -> None:
        """Query i of a block gets exactly what it gets as a block of one."""
        for model in self.make_models():
            assert isinstance(model, Recommender)
            self.fit(model)
            groups = [0, None, 2]
            items = [np.array([1, 2, 17]), np.arange(18), np.array([4])]
            block = model.predict_block(self.queries(), items, exclude_groups=groups)
            for (idx, val), it, g, got in zip(self.queries(), items, groups, block, strict=True):
                _same(got, model.predict(idx, val, it, exclude_group=g))
            recs = model.recommend_block(self.queries(), 4, exclude_groups=groups)
            for (idx, val), g, got in zip(self.queries(), groups, recs, strict=True):
                _same(got, model.recommend(idx, val, 4, exclude_group=g))

    def test_same_input_same_output(self) -> None:
        """Two fits on the same data answer identically, bit for bit."""
        train = self.train_matrix(1)
        for model in self.make_models():
            assert isinstance(model, Recommender)
            twin = type(model)(**_params(model))
            assert isinstance(twin, Recommender)
            a = model.fit(train).recommend([0, 1], self.values([5.0, 1.0]), 5)
            b = twin.fit(train).recommend([0, 1], self.values([5.0, 1.0]), 5)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])

    def test_fit_does_not_modify_input(self) -> None:
        """The caller's matrix is left untouched."""
        train = self.train_matrix(2)
        before = train.copy()
        for model in self.make_models():
            assert isinstance(model, Recommender)
            model.fit(train)
            assert (train != before).nnz == 0

    def test_unfitted_queries_raise(self) -> None:
        """Using a model before fit raises NotFittedError."""
        for model in self.make_models():
            assert isinstance(model, Recommender)
            with pytest.raises(NotFittedError):
                model.recommend([0], [1.0], 3)

    def test_recommend_sorted_and_unseen(self) -> None:
        """recommend returns ≤ n distinct unseen items with non-increasing scores."""
        train = self.train_matrix(3)
        for model in self.make_models():
            assert isinstance(model, Recommender)
            items, scores = model.fit(train).recommend([0, 4, 5], self.values([3.0, 4.0, 1.0]), 7)
            assert items.size <= 7 and np.unique(items).size == items.size
            assert not set(items.tolist()) & {0, 4, 5}
            assert np.all(np.diff(scores) <= 0)

    @pytest.mark.parametrize(
        ("queries", "items", "needle"),
        [
            ([], [], "at least one query"),
            ([(np.array([0]), np.array([1.0]))], [], "1 queries but 0 item lists"),
            ([(np.array([0, 0]), np.array([1.0, 2.0]))], [np.array([1])], "repeat"),
            ([(np.array([0]), np.array([np.nan]))], [np.array([1])], "finite"),
            ([(np.array([99]), np.array([1.0]))], [np.array([1])], "query_indices"),
            (_QUERIES[:2], [np.array([1]), np.array([18])], "items[1]"),
            ([(np.array([0]),)], [np.array([1])], "(indices, values) pair"),
        ],
    )
    def test_block_refuses_malformed_queries(
        self, queries: list[Any], items: list[Any], needle: str
    ) -> None:
        """A malformed block is a ValueError naming what is wrong (and where in the block)."""
        for model in self.make_models():
            assert isinstance(model, Recommender)
            self.fit(model)
            with pytest.raises(ValueError) as info:
                model.predict_block(queries, items)
            assert needle in str(info.value)


class TestPPCFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [PPCF(k=1), PPCF(k=5), PPCF()]


class TestPearsonKNNContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [PearsonKNN(k=3), PearsonKNN(k=100, clip=(1.0, 5.0))]


# ------------------------------------------------------------------ feature-based recommenders
_GENRES = (np.arange(18)[:, None] % 4 == np.arange(4)) | (np.arange(18)[:, None] % 5 == 0)
"""Genre flags of the 18 items of `_train` (the catalogue's public item features)."""


class FeatureRecommenderContract(RecommenderContract):
    """Recommenders on feature-based profiles (Bilge Ch. 6, 7): the aggregator hands them the
    catalogue's item features before `fit` (`supply_item_features`); a twin rebuilt from
    `get_params` gets them the same way."""

    def make_feature_models(self) -> list[Model]:
        raise NotImplementedError

    def make_models(self) -> list[Model]:
        models = self.make_feature_models()
        for model in models:
            assert isinstance(model, ItemFeatureModel)
            model.set_item_features(_GENRES)
        return models

    def fit(self, model: Model, seed: int = 0) -> Model:
        if isinstance(model, ItemFeatureModel) and model.item_features_ is None:
            model.set_item_features(_GENRES)  # a twin built from get_params
        return super().fit(model, seed)

    def test_same_input_same_output(self) -> None:
        """Two fits on the same data answer identically, bit for bit."""
        train = _train(1)
        for model in self.make_models():
            assert isinstance(model, Recommender | ItemFeatureModel)
            twin = type(model)(**_params(model))
            assert isinstance(twin, ItemFeatureModel) and isinstance(twin, Recommender)
            twin.set_item_features(_GENRES)
            assert isinstance(model, Recommender)
            a = model.fit(train).recommend([0, 1], [5.0, 1.0], 5)
            b = twin.fit(train).recommend([0, 1], [5.0, 1.0], 5)
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])

    def test_features_survive_save_and_load(self) -> None:
        """The item features are part of the saved state (a restart needs no catalogue)."""
        for model in self.make_models():
            self.fit(model, 2)
            buf = io.BytesIO()
            save_model(model, buf)
            loaded = load_model(buf.getvalue(), MODELS)
            assert isinstance(loaded, ItemFeatureModel)
            np.testing.assert_array_equal(loaded.item_features_, _GENRES.astype(float))


class TestClusterPPCFContract(FeatureRecommenderContract):
    __test__ = True

    def make_feature_models(self) -> list[Model]:
        return [
            ClusterPPCF(k=3, clusters=2, method="kmeans"),
            ClusterPPCF(k=5, clusters=3, method="fcm", neighbours="raters"),
            ClusterPPCF(k=4, clusters=2, method="som", profile="rbp", som_epochs=10),
        ]


class TestClusterCFContract(FeatureRecommenderContract):
    __test__ = True

    def make_feature_models(self) -> list[Model]:
        return [
            ClusterCF(k=3, clusters=2, method="fcm", clip=(1.0, 5.0)),
            ClusterCF(k=6, clusters=1, neighbours="absolute"),
        ]


class TestBisectingPPCFContract(FeatureRecommenderContract):
    __test__ = True

    def make_feature_models(self) -> list[Model]:
        return [BisectingPPCF(k=4, clones=0), BisectingPPCF(k=5, clones=2, profile="rbp")]


class TestBisectingCFContract(FeatureRecommenderContract):
    __test__ = True

    def make_feature_models(self) -> list[Model]:
        return [
            BisectingCF(k=4, clones=1, density=0.5, clip=(1.0, 5.0)),
            BisectingCF(k=6, clones=0, neighbours="raters"),
        ]


class TestCoRatedKNNContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            CoRatedKNN(k=3),
            CoRatedKNN(k=5, mode="user", similarity="cos"),
            CoRatedKNN(k=4, similarity="cos", candidates="all", prediction="item-mean"),
        ]


class TestPNCFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            PNCF(k=3, epsilon=1.0),
            PNCF(k=4, variant="rs_nm", mode="user", similarity="cos", random_state=3),
            PNCF(k=2, variant="gs_nm", candidates="all", perturbation="eq-3.4.1"),
            PNCF(k=5, selection_sensitivity="max", smooth_beta=0.5, rho=0.5),
        ]


class TestDPSGDPNBMContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            DPSGDPNBM(1.0, n_iter=3, n_neighbours=5, min_ratings=1),
            DPSGDPNBM(5.0, n_iter=2, batch_fraction=0.5, mean_fraction=0.0, min_ratings=3),
        ]


class TestDPPSPNBMContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            DPPSPNBM(200.0, n_iter=4, tau=6, n_neighbours=6),
            DPPSPNBM(20.0, n_iter=3, batch_fraction=0.4, temperature=1.0, hold=0),
        ]


class TestDPSGDMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [DPSGDMF(1.0, n_factors=3, n_iter=4), DPSGDMF(20.0, n_factors=2, n_iter=2)]


class TestBiasedMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [BiasedMF(3, n_epochs=4), BiasedMF(2, n_epochs=2, reg=0.0, learning_rate=0.05)]


class TestDPPSMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [DPPSMF(200.0, n_factors=3, n_iter=4, tau=5), DPPSMF(50.0, n_iter=2, hold=0)]


# ------------------------------------------------------------------ published results
class TestSketchKNNContract(ModelContract):
    __test__ = True
    family = MatrixModel

    def make_models(self) -> list[Model]:
        return [SketchKNN(k=1), SketchKNN(k=4)]

    def fit(self, model: Model, seed: int = 0) -> Model:
        assert isinstance(model, SketchKNN)
        return model.fit(np.random.default_rng(seed).normal(size=(25, 9)))

    def bad_input(self, model: Model) -> None:
        assert isinstance(model, SketchKNN)
        model.fit(np.ones(5))

    def test_fit_does_not_modify_input(self) -> None:
        """The caller's estimates are left untouched."""
        x = np.random.default_rng(3).normal(size=(12, 5))
        before = x.copy()
        for model in self.make_models():
            assert isinstance(model, SketchKNN)
            model.fit(x)
            np.testing.assert_array_equal(x, before)


class TestItemFrequencyContract(ModelContract):
    __test__ = True
    family = MatrixModel

    def make_models(self) -> list[Model]:
        return [ItemFrequency(k=1), ItemFrequency(k=4)]

    def fit(self, model: Model, seed: int = 0) -> Model:
        assert isinstance(model, ItemFrequency)
        x = np.random.default_rng(seed).normal(size=(25, 9))
        return model.fit(EstimateSum(x.sum(axis=0), 25))

    def bad_input(self, model: Model) -> None:
        assert isinstance(model, ItemFrequency)
        model.fit(EstimateSum(np.ones((5, 2)), 5))

    def test_frequencies_are_the_mean_estimate_and_top_k_ties_go_low(self) -> None:
        """f̂ = Σ x̂ / N by hand; the top-k list breaks ties by the smaller item."""
        model = ItemFrequency(k=2).fit(EstimateSum(np.array([2.0, 6.0, 6.0, -1.0]), 4))
        state = model.public_arrays()
        np.testing.assert_allclose(state["frequencies"], [0.5, 1.5, 1.5, -0.25])
        np.testing.assert_array_equal(state["top_items"], [1, 2])
        with pytest.raises(ValueError, match=r"train\.n"):
            ItemFrequency().fit(EstimateSum(np.ones(3), 0))


# ------------------------------------------------------------------ two tiers
class TwoTierContract(ModelContract):
    """Two-tier models: public fit, then private rounds."""

    family = TwoTierModel

    def fit(self, model: Model, seed: int = 0) -> Model:
        assert isinstance(model, TwoTierModel)
        rng = np.random.default_rng(seed)
        full = 3.0 + rng.normal(size=(40, 2)) @ rng.normal(size=(2, 12)) * 0.5
        public = sp.csr_matrix(np.where(rng.random(full[:15].shape) < 0.6, full[:15], 0.0))
        model.fit_public(public)
        assert model.mu_ is not None
        return model.add_private(full[15:] - model.mu_)

    def bad_input(self, model: Model) -> None:
        assert isinstance(model, TwoTierModel)
        model.fit_public(sp.csr_matrix(np.ones((3, 12))))
        model.add_private(np.ones((2, 5)))  # wrong number of items

    def test_public_model_is_published_before_private_rounds(self) -> None:
        """After the public fit alone, (µ, V) are published; private rounds change V."""
        for model in self.make_models():
            assert isinstance(model, TwoTierModel)
            assert model.capabilities.consumes is ModelInput.TWO_TIER
            rng = np.random.default_rng(5)
            full = 3.0 + rng.normal(size=(30, 2)) @ rng.normal(size=(2, 10))
            model.fit_public(sp.csr_matrix(full[:10]))
            first = model.public_arrays()
            assert model.min_public_users <= 10
            assert model.mu_ is not None
            model.add_private(full[10:] - model.mu_)
            assert not np.allclose(first["V"], model.public_arrays()["V"])


class TestTwoTierLowRankContract(TwoTierContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [TwoTierLowRank(k=2, em_iters=1), TwoTierLowRank(k=3, spectrum="trace-norm")]


class TestRegularMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [RegularMF(k=3, epochs=4), RegularMF(k=2, eta=0.05, reg=0.0, epochs=2)]


class TestCountSketchMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [CountSketchMF(k=3, epochs=4), CountSketchMF(k=2, depth=2, gamma=4.0, epochs=2)]


class TestFeatureHashingMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [FeatureHashingMF(k=3, epochs=3, random_state=5)]


class TestClippedCountSketchMFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            ClippedCountSketchMF(k=3, epsilon=0.5, epochs=4),
            ClippedCountSketchMF(k=2, epsilon=float("inf"), depth=1, epochs=2),
        ]


# ------------------------------------------------------------------ published results
class TestTwoTierFullEMContract(TwoTierContract):
    """Full EM: the private tier sends ratings (sparse), not second-order vectors."""

    __test__ = True

    def make_models(self) -> list[Model]:
        return [TwoTierFullEM(k=2, em_iters=1), TwoTierFullEM(k=3, spectrum="trace-norm")]

    def fit(self, model: Model, seed: int = 0) -> Model:
        assert isinstance(model, TwoTierFullEM)
        rng = np.random.default_rng(seed)
        full = 3.0 + rng.normal(size=(40, 2)) @ rng.normal(size=(2, 12)) * 0.5
        observed = np.where(rng.random(full.shape) < 0.6, full, 0.0)
        model.fit_public(sp.csr_matrix(observed[:15]))
        return model.add_private(sp.csr_matrix(observed[15:]))

    def bad_input(self, model: Model) -> None:
        assert isinstance(model, TwoTierFullEM)
        model.fit_public(sp.csr_matrix(np.ones((3, 12))))
        model.add_private(sp.csr_matrix(np.ones((2, 5))))  # wrong number of items

    def test_public_model_is_published_before_private_rounds(self) -> None:
        """After the public fit alone, (µ, V) are published; a private round changes both."""
        for model in self.make_models():
            assert isinstance(model, TwoTierFullEM)
            rng = np.random.default_rng(5)
            full = 3.0 + rng.normal(size=(30, 2)) @ rng.normal(size=(2, 10))
            model.fit_public(sp.csr_matrix(full[:10]))
            first = model.public_arrays()
            model.add_private(sp.csr_matrix(full[10:]))
            assert not np.allclose(first["V"], model.public_arrays()["V"])
            assert not np.allclose(first["mu"], model.public_arrays()["mu"])
            with pytest.raises(ValueError, match="sparse"):
                model.add_private(full[10:])


class TestTargetItemPPCFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        # sigma_max = 0.5 keeps most items' Eq 4.7 magnitudes positive on this small data
        return [
            TargetItemPPCF(k=3, sigma_max=0.5),
            TargetItemPPCF(k=10, tau=0.2, sigma_max=0.5, scale="shift"),
            TargetItemPPCF(tau=0.0, noise_correction="thesis", sigma_max=0.1),
        ]


class TestTargetItemCFContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            TargetItemCF(k=3),
            TargetItemCF(k=10, tau=0.5, clip=(1.0, 5.0)),
            TargetItemCF(tau=0.1, item_similarity="cosine"),
        ]


class TestPPDWTContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [
            PPDWT(k=4),
            PPDWT(k=25, levels=2, ordering="sa", sigma_max=0.0),
            PPDWT(ordering="ma"),
        ]


class TestPPNBCContract(RecommenderContract):
    __test__ = True

    def make_models(self) -> list[Model]:
        return [PPNBC(), PPNBC(theta=1.0, e=4), PPNBC(e=5, d=20.0, random_state=3)]

    def train_matrix(self, seed: int = 0) -> sp.csr_matrix:
        train = _train(seed)  # binarised like RRT does (like = rating > 3)
        train.data = (train.data > 3.0).astype(np.float64)
        return train

    def values(self, values: list[float]) -> np.ndarray:
        return (np.asarray(values) > 3.0).astype(np.float64)

    def test_refuses_non_binary_values(self) -> None:
        """Ratings that are not 0/1 RRT releases are refused, at fit and in a query."""
        for model in self.make_models():
            assert isinstance(model, Recommender)
            with pytest.raises(ValueError, match="binary"):
                model.fit(_train())
            model.fit(self.train_matrix())
            with pytest.raises(ValueError, match="query_values"):
                model.predict([0], [0.5], np.array([1]))


CONTRACT_CASES = contract_cases(ModelContract)


def test_every_registered_model_has_a_contract_case() -> None:
    """A model registered without a case here fails this test (add one above)."""
    covered = {type(m).name for case in CONTRACT_CASES for m in case().make_models()}
    assert covered == set(MODELS), f"no contract case for {sorted(set(MODELS) - covered)}"


def test_registry_lists_every_model() -> None:
    """Every model class of `privrec.server.models` is registered under its `name`."""
    import privrec.server.models as package

    assert family_members(package, Model) == dict(MODELS.items())
