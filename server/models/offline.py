"""Offline structures built once per neighbour pool: the shared step of Bilge's preprocessed
schemes (item similarities and τ lists, Ch. 4; DWT orderings and the reduced matrix, Ch. 5;
densified matrix and extraction lists, Ch. 8).

Bilge computes these structures off-line from the *training* users only (Ch. 4: 30 % of the users
are test users; Ch. 8: 243 test users apart). In privrec's one-run cross-validation a test user of
fold f is served by the rows outside fold f (`Recommender.predict(..., exclude_group=f)`); if the
offline structures were built from every row, her own release — which holds the ratings she is
asked to predict, disguised — would shape the item similarities that serve her. So an
`OfflineRecommender` builds its offline state once per pool: one per group given to `fit` (the
rows outside that group), and, when a query excludes nothing, one from every row (built on first
use). The pool a query may use is identified by its `allowed` mask, exactly what `_predict`
receives. Building happens in `fit`, so that online time is online time; `offline_seconds_` is
what it took.
"""

from __future__ import annotations

import abc
import time
from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from privrec.server.models.base import QueryBlock, Recommender, UInt32Array
from privrec.server.models.knn import _column_positions
from privrec.shared.types import BoolArray, FloatArray, IntArray


class OfflineRecommender(Recommender):
    """A recommender with an offline phase computed from the rows a query may use.

    Subclasses implement `_fit` (state from the whole matrix), `_build_offline(allowed)` (the
    offline state of one pool) and `_answer(offline, query_indices, query_values, items,
    allowed)`.

    Attributes (after `fit`):
        offline_seconds_: wall time spent building the offline state of every group.
        online_seconds_: wall time spent answering queries so far (`_predict_block`).
    """

    offline_seconds_: float
    online_seconds_: float

    def fit(
        self, train: sp.spmatrix | sp.sparray, *, exclude_groups: IntArray | None = None
    ) -> Self:
        """Fit the base model, then build (and time) the offline state of every pool of rows."""
        super().fit(train, exclude_groups=exclude_groups)
        self._offline: dict[bytes, Any] = {}
        self.online_seconds_ = 0.0
        t0 = time.perf_counter()
        if self.groups_ is not None:
            for g in np.unique(self.groups_):
                self._offline_for(self._allowed(int(g)))
        else:
            self._offline_for(np.ones(self.n_users_, dtype=bool))
        self.offline_seconds_ = time.perf_counter() - t0
        return self

    def _offline_for(self, allowed: BoolArray) -> Any:
        key = np.packbits(allowed).tobytes()
        if key not in self._offline:
            self._offline[key] = self._build_offline(allowed)
        return self._offline[key]

    def _predict_block(
        self, block: QueryBlock, items: list[IntArray]
    ) -> list[tuple[FloatArray, UInt32Array]]:
        t0 = time.perf_counter()
        out = super()._predict_block(block, items)
        self.online_seconds_ += time.perf_counter() - t0
        return out

    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        if items.size == 0:
            return np.zeros(0), np.zeros(0, dtype=np.uint32)
        offline = self._offline_for(allowed)
        return self._answer(offline, query_indices, query_values, items, allowed)

    @abc.abstractmethod
    def _build_offline(self, allowed: BoolArray) -> Any:
        """The offline state computed from the rows `allowed` marks (and nothing else)."""

    @abc.abstractmethod
    def _answer(
        self,
        offline: Any,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        allowed: BoolArray,
    ) -> tuple[FloatArray, UInt32Array]:
        """Score `items` (non-empty) for one query with the pool's offline state."""


def column_entries(csc: sp.csc_matrix, cols: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The entries of columns `cols` of `csc`: (positions in `csc.data`, their rows, and for
    each the index of its column in `cols`). Cost O(their nnz) (`knn._column_positions`)."""
    pos, slot = _column_positions(csc.indptr.astype(np.int64), cols)
    return pos, csc.indices[pos].astype(np.int64), slot


def restricted_dot(csc: sp.csc_matrix, cols: IntArray, vec: FloatArray) -> FloatArray:
    """`csc[:, cols] @ vec` touching only the entries of columns `cols` (cost O(their nnz)).

    The online step of Bilge's τ elimination (Procedure 4, lines 1–4): similarities computed on
    the remaining items only, so fewer remaining items is less work.

    Args:
        csc: CSC matrix (n, m) with sorted indices.
        cols: int array of shape (c,), distinct column indices.
        vec: float array of shape (c,), the weight of each column.

    Returns:
        float64 array of shape (n,).
    """
    pos, rows, slot = column_entries(csc, cols)
    weights = csc.data[pos] * vec[slot]
    return np.bincount(rows, weights=weights, minlength=csc.shape[0]).astype(np.float64)


__all__ = ["OfflineRecommender", "column_entries", "restricted_dot"]
