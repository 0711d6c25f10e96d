"""User kNN over a candidate pool found from feature-based profiles (Bilge Ch. 6 and 7).

The clustered schemes (`server.models.cluster_knn`: KMC, FCM, SOM) and the bisecting k-means
schemes (`server.models.bisecting_knn`: BKM, BKM+) share one online flow (Bilge §6.3.3, §7.3.1):

1. the server builds the active user's FBP from her (disguised) query vector (O(m));
2. it routes the FBP to a small pool of training users — her cluster, or her leaf and its
   sibling in the tree — comparing FBPs by PCC;
3. it computes exact similarities on the rating profiles with those users only (Eq 2.1 on
   true ratings, Eq 2.4 on U′), picks the neighbours (`server.models.neighbourhood`) and
   averages their deviations (Eq 2.2, Eq 2.6); a z-score answer is de-normalised by the client
   (Eq 2.5).

Step 3 is the existing kNN model's: a concrete scheme is this class mixed with `PPCF` (z-score
covariance on U′, score P′) or `PearsonKNN` (Pearson on true ratings, a rating), whose weights,
deviations and final step it inherits unchanged. The pool is a set of *blocks* (a cluster, a
leaf); each block keeps a small model of the same kNN class fitted on its rows, so a query
computes similarities with its candidates only — what makes clustering save online time.

Cross-validation in one run (docs/decisions/protocol.md, "5-fold CV in one protocol run"): the
pool of a query that excludes fold g is built from the training rows outside g only — the
clusters, the tree and the clones never see the test fold — once per fold at `fit` (the pool of
"no fold excluded" is built on first use).

References:
    Bilge, A. PhD thesis, Anadolu University, 2013, §6.2, §6.3.3, §7.3.1.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import Arrays, QueryBlock, Recommender, UInt32Array
from privrec.server.models.features import (
    PROFILES,
    ItemFeatureModel,
    check_features,
    feature_profiles,
    query_profile,
)
from privrec.server.models.inputs import check_train
from privrec.server.models.knn import _UserKNN
from privrec.server.models.neighbourhood import check_rule, neighbour_scores
from privrec.shared.types import BoolArray, FloatArray, IntArray


@dataclasses.dataclass
class Pool:
    """The candidate structure of one set of training rows (one excluded fold).

    Attributes:
        rows: int64 array, the training rows it was built from (global row indices).
        blocks: per block, the global rows a query routed there may take as neighbours.
        router: what routes a query FBP to blocks (a `Clusters` or a tree), model-specific.
        models: per block, the fitted kNN model of its rows (built on first use).
    """

    rows: IntArray
    blocks: list[IntArray]
    router: Any
    models: dict[int, _UserKNN] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Route:
    """Where one query goes: its blocks and the FBP comparisons it took to find them."""

    blocks: tuple[int, ...]
    comparisons: int


class CandidateKNN(ItemFeatureModel, _UserKNN):
    """The shared online flow (module docstring). Concrete schemes set `_knn_base` (the kNN class
    whose similarity they use), implement `_build_pool` and `_route`, and store the common
    hyper-parameters with `_set_common`.

    Attributes (after `fit`):
        profiles_: float array of shape (n_users_, d), every training row's FBP.
    """

    _knn_base: ClassVar[type[_UserKNN]]
    profile: str
    neighbours: str
    random_state: int
    profiles_: FloatArray

    def _set_common(self, profile: str, neighbours: str, random_state: int) -> None:
        if profile not in PROFILES:
            raise ValueError(f"`profile` must be one of {PROFILES}, got {profile!r}")
        self.profile = profile
        self.neighbours = check_rule(neighbours)
        if (
            isinstance(random_state, bool)
            or not isinstance(random_state, int | np.integer)
            or random_state < 0
        ):
            raise ValueError(f"`random_state` must be an int >= 0, got {random_state!r}")
        self.random_state = int(random_state)

    # ---------------------------------------------------------------- fitting
    def fit(
        self, train: sp.spmatrix | sp.sparray, *, exclude_groups: IntArray | None = None
    ) -> Self:
        """Fit the kNN state, every row's FBP, and the pool of each fold (see the module
        docstring); the item features must be set (`set_item_features`).

        Raises:
            ValueError: as `Recommender.fit`, or the item features are missing or do not have
                one row per item.
        """
        # refuse bad input or missing or mismatched features before any state changes
        csr = check_train(train)
        features = check_features(self.item_features_, int(csr.shape[1]))
        super().fit(csr, exclude_groups=exclude_groups)
        self.profiles_ = feature_profiles(self._train, features, self.profile)
        self._fit_cache: dict[str, Any] = {}  # what the pools of this fit share
        self._pools: dict[int | None, Pool] = {}
        if self.groups_ is not None:
            for g in np.unique(self.groups_).tolist():
                self._pools[int(g)] = self._build_pool(np.flatnonzero(self.groups_ != g), int(g))
        return self

    @abc.abstractmethod
    def _build_pool(self, rows: IntArray, group: int | None) -> Pool:
        """The candidate structure of training rows `rows` (fold `group` excluded, or None)."""

    @abc.abstractmethod
    def _route(self, pool: Pool, profiles: FloatArray) -> list[Route]:
        """The blocks of each query FBP (q, d) in `pool`."""

    def _pool(self, allowed: BoolArray) -> Pool:
        """The pool of the rows `allowed` (the fold excluded from this query)."""
        key = self._pool_key(allowed)
        if key not in self._pools:
            self._pools[key] = self._build_pool(np.flatnonzero(allowed), key)
        return self._pools[key]

    def _pool_key(self, allowed: BoolArray) -> int | None:
        """The fold a query's `allowed` mask excludes (None: no row excluded)."""
        if allowed.all() or self.groups_ is None:
            return None
        return int(self.groups_[int(np.argmin(allowed))])

    def _block_model(self, pool: Pool, b: int) -> _UserKNN:
        """The kNN model of block `b`'s rows, used for its similarities only. The rows come
        from the training matrix `fit` already validated, so its state is set directly."""
        model = pool.models.get(b)
        if model is None:
            model = self._knn_base(k=self.k)
            model._fit(self._train[pool.blocks[b]])
            pool.models[b] = model
        return model

    # ---------------------------------------------------------------- serving
    def candidate_pool(
        self, query_indices: IntArray, query_values: FloatArray, *, exclude_group: int | None = None
    ) -> tuple[IntArray, int]:
        """The training rows a query may take as neighbours, and the similarity computations
        it costs online (FBP comparisons while routing plus one per candidate; Bilge §7.3.1's
        2(h − 1 + N) for the tree, n/c for a partition).

        Returns:
            (rows, computations): sorted int64 array of global training rows, and an int.
        """
        block = self._check_block([(query_indices, query_values)], [exclude_group])
        pool = self._pool(block.allowed[0])
        assert self.item_features_ is not None
        fbp = query_profile(block.indices[0], block.values[0], self.item_features_, self.profile)
        (route,) = self._route(pool, fbp[None, :])
        rows = np.unique(np.concatenate([pool.blocks[b] for b in route.blocks]))
        return rows.astype(np.int64), route.comparisons + int(
            sum(pool.blocks[b].size for b in route.blocks)
        )

    def candidate_costs(
        self,
        queries: list[tuple[IntArray, FloatArray]],
        exclude_groups: list[int | None],
    ) -> IntArray:
        """`candidate_pool`'s similarity computations for a block of queries (vectorised)."""
        block = self._check_block(queries, exclude_groups)
        routes = self._routes(block)
        out = np.zeros(len(routes), dtype=np.int64)
        for i, route in enumerate(routes):
            pool = self._pool(block.allowed[i])
            out[i] = route.comparisons + sum(pool.blocks[b].size for b in route.blocks)
        return out

    def _routes(self, block: QueryBlock) -> list[Route]:
        """Every query's route; queries of the same excluded fold are routed together."""
        assert self.item_features_ is not None
        fbps = np.stack(
            [
                query_profile(idx, val, self.item_features_, self.profile)
                for idx, val in zip(block.indices, block.values, strict=True)
            ]
        )
        keys = [self._pool_key(a) for a in block.allowed]
        routes: list[Route | None] = [None] * len(keys)
        for key in dict.fromkeys(keys):
            at = [i for i, k in enumerate(keys) if k == key]
            pool = self._pool(block.allowed[at[0]])
            for i, route in zip(at, self._route(pool, fbps[at]), strict=True):
                routes[i] = route
        return [r for r in routes if r is not None]

    def _predict_block(
        self, block: QueryBlock, items: list[IntArray]
    ) -> list[tuple[FloatArray, UInt32Array]]:
        out = []
        for route, idx, val, it, allowed in zip(
            self._routes(block), block.indices, block.values, items, block.allowed, strict=True
        ):
            pool = self._pool(allowed)
            w = np.zeros(self.n_users_)
            candidates = np.zeros(self.n_users_, dtype=bool)
            for b in route.blocks:
                rows = pool.blocks[b]
                w[rows] = self._block_model(pool, b)._weights(idx, val)
                candidates[rows] = True
            avg, counts = neighbour_scores(
                self._dev_csc, w, it, self.k, candidates, self.neighbours
            )
            out.append((self._finish(avg, val), counts))
        return out

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        block = QueryBlock([query_indices], [query_values], [allowed])
        return self._predict_block(block, [items])[0]

    # ---------------------------------------------------------------- persistence
    def _feature_model_state(self) -> Arrays:
        return Recommender.state_arrays(self)

    def _restore_feature_model(self, state: Mapping[str, np.ndarray]) -> Self:
        return Recommender.restore(self, state)


__all__ = ["CandidateKNN", "Pool", "Route"]
