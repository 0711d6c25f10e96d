"""The interface every server-side recommender implements.

The aggregator core trains a `Recommender` on the matrix of releases it has received and answers
queries with it. The model never sees a user's true data or her private statistics (mean, std):
it sees a sparse matrix whose *stored* entries are the filled cells (a disguised value may be any
real number, including an explicit 0.0) and, per query, the sparse vector the querying user sent.

Cross-validation in one protocol run: every user submits her profile once, and `fit` receives a
group label per training row (e.g. the fold of a 5-fold split over users). When a test user of
fold f queries, `exclude_group=f` removes the rows of fold f from the neighbour pool, so she is
served only by users that are not in her fold (and never by her own training row).

Usage (sklearn style: parameters in the constructor, data through the methods)::

    model = PPCF(k=100).fit(train, exclude_groups=folds)
    scores, n_neighbours = model.predict(q_idx, q_val, items, exclude_group=folds[u])
    items, scores = model.recommend(q_idx, q_val, 10, exclude_group=folds[u])
"""

from __future__ import annotations

import abc
from typing import ClassVar, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from privrec.shared.errors import NotFittedError
from privrec.shared.types import BoolArray, FloatArray, IntArray

UInt32Array = npt.NDArray[np.uint32]


class Recommender(abc.ABC):
    """A model trained on a sparse user × item matrix and queried with one sparse profile.

    Subclasses set `name` (the config value), take their hyper-parameters in `__init__`
    (validated there) and implement `_fit` and `_predict`. The public `fit`, `predict` and
    `recommend` validate their inputs once, here, so that the subclasses can trust them.

    Attributes (after `fit`):
        n_users_: number of training rows.
        n_items_: m, the number of items (columns).
        groups_: int64 array of shape (n_users_,) with each row's group, or None.
    """

    name: ClassVar[str]
    # what the aggregator feeds `fit`: the releases' own sparse values ("sparse"), or the
    # mechanism's de-biased dense estimates ("estimate", see `Mechanism.estimate`)
    input: ClassVar[str] = "sparse"
    answers_queries: ClassVar[bool] = True

    n_users_: int
    n_items_: int
    groups_: IntArray | None

    # ---------------------------------------------------------------- public API (validating)
    def fit(
        self, train: sp.spmatrix | sp.sparray, *, exclude_groups: IntArray | None = None
    ) -> Self:
        """Train on `train`.

        Args:
            train: scipy sparse matrix of shape (n_users, n_items); a stored entry (explicit zeros
                included) is a filled cell, an absent entry an empty cell. Converted to a
                canonical float64 CSR copy; the caller's matrix is not modified.
            exclude_groups: int array of shape (n_users,): each row's group label (e.g. its
                fold), used by `predict(..., exclude_group=g)`; None when no row is ever
                excluded.

        Returns:
            self.

        Raises:
            ValueError: `train` is not a 2-D sparse matrix with finite values and no duplicate
                entries, or `exclude_groups` has the wrong shape.
        """
        csr = _check_train(train)
        groups = None
        if exclude_groups is not None:
            groups = np.asarray(exclude_groups)
            if groups.shape != (csr.shape[0],) or not np.issubdtype(groups.dtype, np.integer):
                raise ValueError(
                    f"`exclude_groups` must be an int array of shape ({csr.shape[0]},), got "
                    f"dtype {groups.dtype} shape {groups.shape}"
                )
            groups = groups.astype(np.int64)
        self._fit(csr)
        self.n_users_, self.n_items_ = int(csr.shape[0]), int(csr.shape[1])
        self.groups_ = groups
        return self

    def predict(
        self,
        query_indices: IntArray,
        query_values: FloatArray,
        items: IntArray,
        *,
        exclude_group: int | None = None,
    ) -> tuple[FloatArray, UInt32Array]:
        """Score `items` for the user whose (possibly disguised) profile is the query.

        Args:
            query_indices: int array of shape (g,), g >= 1 distinct item indices she filled.
            query_values: float array of shape (g,), her values at `query_indices`.
            items: int array of shape (t,), the items to score (repeats allowed).
            exclude_group: a group label given to `fit`; rows of that group are removed from
                the neighbour pool. None keeps every row.

        Returns:
            (scores, n_neighbours): float64 array of shape (t,) — what the score means is model
            specific (see the subclass) — and uint32 array of shape (t,), the number of training
            rows that contributed to each score (0 means the model fell back to its default).

        Raises:
            NotFittedError: before `fit`.
            ValueError: malformed query or items, or `exclude_group` without groups at `fit`.
        """
        idx, val = self._check_query(query_indices, query_values)
        it = _check_index_array("items", items, self.n_items_)
        return self._predict(idx, val, it, self._allowed(exclude_group))

    def recommend(
        self,
        query_indices: IntArray,
        query_values: FloatArray,
        n: int,
        *,
        exclude_group: int | None = None,
    ) -> tuple[IntArray, FloatArray]:
        """The `n` best-scored items she did not send, best first.

        Candidates are the items absent from the query with at least one contributing neighbour
        (an item nobody in the pool filled has no evidence behind its score). Ties are broken by
        the smaller item index. Fewer than `n` items come back when fewer candidates exist.
        The query's cells include any fake cells of a disguised profile, which the server cannot
        tell apart; a client drops whatever else she wants locally.

        Args:
            query_indices: as in `predict`.
            query_values: as in `predict`.
            n: number of items wanted, >= 1.
            exclude_group: as in `predict`.

        Returns:
            (items, scores): int64 array of shape (≤ n,) and their float64 scores.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"`n` must be an int >= 1, got {n!r}")
        idx, val = self._check_query(query_indices, query_values)
        candidates = np.ones(self.n_items_, dtype=bool)
        candidates[idx] = False
        items = np.flatnonzero(candidates)
        scores, counts = self._predict(idx, val, items, self._allowed(exclude_group))
        keep = counts > 0
        items, scores = items[keep], scores[keep]
        # lexsort: last key is primary -> score descending, then item index ascending.
        order = np.lexsort((items, -scores))[: int(n)]
        return items[order], scores[order]

    # ---------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _fit(self, train: sp.csr_matrix) -> None:
        """Train on a validated canonical float64 CSR matrix."""

    @abc.abstractmethod
    def _predict(
        self, query_indices: IntArray, query_values: FloatArray, items: IntArray, allowed: BoolArray
    ) -> tuple[FloatArray, UInt32Array]:
        """Score `items`; `allowed` (n_users_,) marks the rows that may serve as neighbours."""

    # ---------------------------------------------------------------- validation helpers
    def _check_fitted(self) -> None:
        if not hasattr(self, "n_items_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() first")

    def _check_query(
        self, query_indices: IntArray, query_values: FloatArray
    ) -> tuple[IntArray, FloatArray]:
        self._check_fitted()
        idx = _check_index_array("query_indices", query_indices, self.n_items_)
        val = np.asarray(query_values, dtype=np.float64)
        if val.shape != idx.shape:
            raise ValueError(
                f"`query_values` must have the shape of `query_indices` "
                f"{idx.shape}, got {val.shape}"
            )
        if idx.size == 0:
            raise ValueError("`query_indices` must name at least one filled cell")
        if np.unique(idx).size != idx.size:
            raise ValueError("`query_indices` must not repeat an item")
        if not np.all(np.isfinite(val)):
            raise ValueError("`query_values` must be finite")
        return idx, val

    def _allowed(self, exclude_group: int | None) -> BoolArray:
        if exclude_group is None:
            return np.ones(self.n_users_, dtype=bool)
        if self.groups_ is None:
            raise ValueError(
                f"`exclude_group`={exclude_group!r} given but the model was fitted "
                "without `exclude_groups`"
            )
        return np.asarray(self.groups_ != int(exclude_group))


def _check_index_array(name: str, values: IntArray, bound: int) -> IntArray:
    """`values` as a 1-D int64 array of indices in [0, bound); an empty list is fine."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"`{name}` must hold integers, got dtype {arr.dtype}")
    if arr.min() < 0 or arr.max() >= bound:
        raise ValueError(f"`{name}` must lie in [0, {bound}), got range [{arr.min()}, {arr.max()}]")
    return arr.astype(np.int64)


def _check_train(train: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """A canonical float64 CSR copy of `train` that keeps explicit zeros as filled cells."""
    if not sp.issparse(train) or train.ndim != 2:
        raise ValueError(f"`train` must be a 2-D scipy sparse matrix, got {type(train).__name__}")
    n_rows, n_cols = (int(d) for d in train.shape)
    if n_rows == 0 or n_cols == 0:
        raise ValueError(f"`train` must have at least one row and column, got {train.shape}")
    # Go through COO: it keeps duplicates (which CSR construction would sum silently) and
    # explicit zeros (a disguised value of exactly 0.0 is still a filled cell).
    coo = train.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    if np.unique(rows * n_cols + cols).size != rows.size:
        raise ValueError("`train` has duplicate entries for the same (user, item) cell")
    data = np.asarray(coo.data, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise ValueError("`train` must hold finite values")
    csr = sp.csr_matrix((data, (rows, cols)), shape=(n_rows, n_cols))
    csr.sort_indices()
    return csr


__all__ = ["Recommender", "UInt32Array"]
