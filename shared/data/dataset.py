"""The in-memory rating dataset every node works on."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from privrec.shared.types import BoolArray, IntArray


@dataclasses.dataclass(frozen=True)
class RatingData:
    """A user × item rating matrix with its metadata.

    Attributes:
        name: short dataset name (``"ml-100k"``, ``"synthetic"``, a file stem).
        ratings: CSR matrix of shape (n_users, n_items), float64; a stored entry is a rating,
            an absent entry is "unrated". Rows are users in `user_ids` order, columns items in
            `item_ids` order. Indices are sorted within each row and no explicit zero is stored.
        user_ids: int64 array of shape (n_users,): the original user ids of the source file.
        item_ids: int64 array of shape (n_items,): the original item ids of the source file.
        rating_scale: (lowest, highest) rating value of the scale, e.g. (1.0, 5.0).
        genres: bool array of shape (n_items, n_genres) or None when the source has none.
        genre_names: names of the genre columns (empty when `genres` is None).
        timestamps: CSR matrix of the same shape and stored cells as `ratings` (same
            `indptr` and `indices`) holding each rating's time (seconds since the epoch, as the
            source gives it), or None when the source has no times. The temporal splits
            (`shared.data.splits`) read it.
    """

    name: str
    ratings: sp.csr_matrix
    user_ids: np.ndarray
    item_ids: np.ndarray
    rating_scale: tuple[float, float]
    genres: BoolArray | None = None
    genre_names: tuple[str, ...] = ()
    timestamps: sp.csr_matrix | None = None

    @property
    def n_users(self) -> int:
        """Number of users (rows)."""
        return int(self.ratings.shape[0])

    @property
    def n_items(self) -> int:
        """Number of items (columns)."""
        return int(self.ratings.shape[1])

    @property
    def n_ratings(self) -> int:
        """Number of stored ratings."""
        return int(self.ratings.nnz)

    @property
    def density(self) -> float:
        """Fraction of user × item cells that hold a rating."""
        cells = self.n_users * self.n_items
        return self.n_ratings / cells if cells else 0.0

    def user_counts(self) -> IntArray:
        """Number of ratings of each user, int64 array of shape (n_users,)."""
        indptr = np.asarray(self.ratings.indptr, dtype=np.int64)
        counts: IntArray = indptr[1:] - indptr[:-1]
        return counts

    def item_counts(self) -> IntArray:
        """Number of ratings of each item, int64 array of shape (n_items,)."""
        counts = np.bincount(np.asarray(self.ratings.indices), minlength=self.n_items)
        return counts.astype(np.int64)

    def rows(self, rows: IntArray | range) -> RatingData:
        """The data of `rows` only (ratings, user ids and timestamps cut alike)."""
        idx = np.asarray(rows, dtype=np.int64)
        return dataclasses.replace(
            self,
            ratings=self.ratings[idx].tocsr(),
            user_ids=np.asarray(self.user_ids)[idx],
            timestamps=None if self.timestamps is None else self.timestamps[idx].tocsr(),
        )

    def user_row(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """(item indices, ratings) of row `u`, both 1-D arrays."""
        start, end = self.ratings.indptr[u], self.ratings.indptr[u + 1]
        return self.ratings.indices[start:end], self.ratings.data[start:end]


__all__ = ["RatingData"]
