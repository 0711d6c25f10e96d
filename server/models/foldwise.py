"""Recommenders that train a model of their own per cross-validation fold.

A user-based kNN model can serve a test user of fold f from the same fitted matrix as everyone
else: leaving her fold's rows out of the neighbour pool is enough (`Recommender`'s
`exclude_group`). A model that *learns* from the whole matrix — an item–item similarity matrix
(Zhu's item-based PNCF, Wang & Tang's learned S) or item factors — cannot: every user releases
her whole profile, held-out ratings included, so a model fitted on all rows has seen the very
ratings it is asked to predict. `FoldwiseRecommender` therefore fits one state per group on the
rows outside that group, and answers a query with `exclude_group = f` from the state fitted
without fold f: 5-fold cross-validation over users, as Wang & Tang's protocol requires and as
the one-run protocol of privrec (docs/decisions/protocol.md, "5-fold CV in one protocol run")
intends.

The fold states are fitted eagerly by `fit` (one per group present), the all-rows state (a
query with no excluded group) on first use. A state's randomness is keyed by its fold (see
`fold_seed_key`), so refitting — and `restore`, which refits from the stored training matrix —
gives bit-identical states.

Privacy accounting: a user's data enters every fold state but her own, so a model with a
per-fit privacy cost states `OutputPrivacy.fit_per_fold = True` and the report charges its fit
event once per fold state she is in (`sim.report_privacy.model_privacy_block`).
"""

from __future__ import annotations

import abc
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import Recommender, UInt32Array
from privrec.shared.types import BoolArray, FloatArray, IntArray

FoldKey = tuple[int, ...]
"""The groups a state was fitted without (() = fitted on every row)."""


def fold_seed_key(key: FoldKey) -> tuple[object, ...]:
    """The part of a random-stream key (`shared.seeding.rng_for`) that names a fold state."""
    return ("fold", *key) if key else ("fold", "all")


class FoldwiseRecommender(Recommender):
    """A recommender with one fitted state per excluded group (see the module docstring).

    Subclasses implement `_fit_fold` (the state from the rows of one fold's training set) and
    `_predict_fold` (scores from a state); `_fit_shared` may prepare what every fold shares.
    """

    def fit(
        self, train: sp.spmatrix | sp.sparray, *, exclude_groups: IntArray | None = None
    ) -> Self:
        """`Recommender.fit`, then one state per group present (on the other groups' rows)."""
        super().fit(train, exclude_groups=exclude_groups)
        if self.groups_ is not None:
            for g in np.unique(self.groups_):
                self.fold_state((int(g),))
        return self

    def _fit(self, train: sp.csr_matrix) -> None:
        self._fold_states: dict[FoldKey, Any] = {}
        self._fit_shared(train)

    def _fit_shared(self, train: sp.csr_matrix) -> None:
        """Prepare what every fold state shares (default: nothing)."""

    def fold_state(self, key: FoldKey) -> Any:
        """The state fitted without the rows of the groups in `key` (cached)."""
        self._check_fitted()
        state = self._fold_states.get(key)
        if state is None:
            rows = self.fold_rows(key)
            state = self._fit_fold(self._train[rows], key)
            self._fold_states[key] = state
        return state

    def fit_signature(self) -> tuple[object, ...]:
        """What the fold states depend on (default: every parameter); two models with the same
        signature can share their states (`adopt_fit`)."""
        return (type(self).__name__, tuple(sorted(self.get_params().items())))

    def adopt_fit(self, other: FoldwiseRecommender) -> Self:
        """Take `other`'s fitted training matrix and fold states, as if fitted on the same data
        (for sweeps over parameters that act only when answering, e.g. PNCF's k and ε).

        Raises:
            ValueError: the two models' states would differ (`fit_signature`).
        """
        if self.fit_signature() != other.fit_signature():
            raise ValueError(
                f"cannot adopt the fit of a model with other fitted state: "
                f"{other.fit_signature()!r} vs {self.fit_signature()!r}"
            )
        other._check_fitted()
        self.n_users_, self.n_items_, self.groups_ = other.n_users_, other.n_items_, other.groups_
        self._train = other._train
        self._fold_states = other._fold_states  # shared: states are never mutated
        return self

    def fold_rows(self, key: FoldKey) -> IntArray:
        """Indices of the training rows a state of `key` is fitted on."""
        if not key or self.groups_ is None:
            return np.arange(self.n_users_)
        return np.flatnonzero(~np.isin(self.groups_, np.array(key, dtype=np.int64)))

    def _key_of(self, allowed: BoolArray) -> FoldKey:
        if self.groups_ is None or bool(allowed.all()):
            return ()
        return tuple(int(g) for g in np.unique(self.groups_[~allowed]))

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        key = self._key_of(allowed)
        return self._predict_fold(self.fold_state(key), key, query_indices, query_values, items)

    @abc.abstractmethod
    def _fit_fold(self, train: sp.csr_matrix, key: FoldKey) -> Any:
        """The state of one fold from its training rows (CSR, canonical, possibly 0 rows)."""

    @abc.abstractmethod
    def _predict_fold(
        self, state: Any, key: FoldKey, indices: IntArray, values: FloatArray, items: IntArray
    ) -> tuple[FloatArray, UInt32Array]:
        """Score `items` for the query from `state` (fitted without the groups in `key`)."""


__all__ = ["FoldKey", "FoldwiseRecommender", "fold_seed_key"]
