"""What `[data]` may do to a data set before a run: binarise ratings, keep a k-core.

* `binarise(data, threshold)`: explicit ratings → implicit interactions, the usual conversion of
  ranking studies (e.g. RecBole's ``threshold``): a rating ≥ `threshold` becomes an interaction
  of value 1, the others are dropped (a sparse matrix stores no 0). The scale becomes (0, 1).
* `k_core(data, min_user, min_item)`: repeatedly drop users with fewer than `min_user` ratings
  and items with fewer than `min_item`, until both hold for everyone left (the fixed point is
  the largest such sub-matrix, whatever the order of the drops). Users and items left without
  ratings are removed, so ids stay those of the source.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError


def binarise(data: RatingData, threshold: float) -> RatingData:
    """Ratings ≥ `threshold` become 1, the others are dropped (module docstring).

    Raises:
        DataError: `threshold` outside the data set's scale, or no rating reaches it.
    """
    low, high = data.rating_scale
    if not low < threshold <= high:
        raise DataError(
            f"data.binarise = {threshold:g} is outside {data.name}'s scale ({low:g}, {high:g}]"
        )
    cells = data.ratings.data >= threshold
    if not cells.any():
        raise DataError(f"data.binarise = {threshold:g} leaves no rating of {data.name}")
    kept = _cells(data, cells)
    kept.ratings.data[:] = 1.0
    return _subset(dataclasses.replace(kept, rating_scale=(0.0, 1.0)))


def k_core(data: RatingData, min_user: int, min_item: int) -> RatingData:
    """The largest sub-matrix where every user has ≥ `min_user` and every item ≥ `min_item`
    ratings (module docstring).

    Raises:
        DataError: nothing is left.
    """
    ratings = data.ratings.tocsr()
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    alive = np.ones(ratings.nnz, dtype=bool)  # the cells still in the core
    while True:
        users = np.bincount(rows[alive], minlength=ratings.shape[0]) >= min_user
        items = np.bincount(ratings.indices[alive], minlength=ratings.shape[1]) >= min_item
        cells = alive & users[rows] & items[ratings.indices]
        if np.array_equal(cells, alive):
            break
        alive = cells
    if not alive.any():
        raise DataError(
            f"the ({min_user}, {min_item})-core of {data.name} is empty "
            "(data.min_user_ratings, data.min_item_ratings)"
        )
    return _subset(_cells(data, alive))


def _cells(data: RatingData, keep: np.ndarray) -> RatingData:
    """`data` with only the stored cells where `keep` (aligned with ``ratings.data``) is True,
    its timestamps cut alike (`RatingData.timestamps` shares the ratings' structure)."""
    ratings = data.ratings.tocsr()
    rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
    indptr = np.zeros(ratings.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=ratings.shape[0]), out=indptr[1:])
    indices = ratings.indices[keep]

    def cut(values: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((values[keep], indices, indptr), shape=ratings.shape)

    times = None if data.timestamps is None else cut(np.asarray(data.timestamps.data))
    return dataclasses.replace(data, ratings=cut(ratings.data), timestamps=times)


def _subset(data: RatingData) -> RatingData:
    """`data` without the users and items that have no rating left."""
    ratings: sp.csr_matrix = data.ratings
    rows = np.flatnonzero(np.diff(ratings.indptr) > 0)
    cols = np.flatnonzero(np.bincount(ratings.indices, minlength=ratings.shape[1]) > 0)
    sub = ratings[rows][:, cols].tocsr()
    sub.sort_indices()
    times = None
    if data.timestamps is not None:  # the same cells, in the same order
        times = data.timestamps[rows][:, cols].tocsr()
        times.sort_indices()
    genres = None if data.genres is None else data.genres[cols]
    return dataclasses.replace(
        data,
        ratings=sub,
        user_ids=data.user_ids[rows],
        item_ids=data.item_ids[cols],
        genres=genres,
        timestamps=times,
    )


__all__ = ["binarise", "k_core"]
