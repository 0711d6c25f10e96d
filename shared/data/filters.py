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
    keep = data.ratings.copy()
    keep.data = np.where(keep.data >= threshold, 1.0, 0.0)
    keep.eliminate_zeros()
    if keep.nnz == 0:
        raise DataError(f"data.binarise = {threshold:g} leaves no rating of {data.name}")
    return _subset(dataclasses.replace(data, ratings=keep, rating_scale=(0.0, 1.0)))


def k_core(data: RatingData, min_user: int, min_item: int) -> RatingData:
    """The largest sub-matrix where every user has ≥ `min_user` and every item ≥ `min_item`
    ratings (module docstring).

    Raises:
        DataError: nothing is left.
    """
    ratings = data.ratings.tocsr(copy=True)
    while True:
        users = np.diff(ratings.indptr) >= min_user
        items = np.bincount(ratings.indices, minlength=ratings.shape[1]) >= min_item
        cells = np.repeat(users, np.diff(ratings.indptr)) & items[ratings.indices]
        if cells.all():
            break
        ratings.data[~cells] = 0.0
        ratings.eliminate_zeros()
    if ratings.nnz == 0:
        raise DataError(
            f"the ({min_user}, {min_item})-core of {data.name} is empty "
            "(data.min_user_ratings, data.min_item_ratings)"
        )
    return _subset(dataclasses.replace(data, ratings=ratings))


def _subset(data: RatingData) -> RatingData:
    """`data` without the users and items that have no rating left."""
    ratings: sp.csr_matrix = data.ratings
    rows = np.flatnonzero(np.diff(ratings.indptr) > 0)
    cols = np.flatnonzero(np.bincount(ratings.indices, minlength=ratings.shape[1]) > 0)
    sub = ratings[rows][:, cols].tocsr()
    sub.sort_indices()
    genres = None if data.genres is None else data.genres[cols]
    return dataclasses.replace(
        data, ratings=sub, user_ids=data.user_ids[rows], item_ids=data.item_ids[cols], genres=genres
    )


__all__ = ["binarise", "k_core"]
