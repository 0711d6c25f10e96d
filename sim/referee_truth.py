"""The referee's truth of a one-tier run: each user's released profile, looked up by id.

Attacks are scored against "the exact ratings each user z-scored and released" (Bilge
Procedure 1): in a one-tier run her row of the rating matrix. `RowTruth` is that matrix seen as
a mapping from wire user id to (items, ratings), so a million users' truth is the matrix
itself and no Python object per user (`docs/decisions/scale.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from privrec.shared.csr import row_positions
from privrec.shared.data.dataset import RatingData
from privrec.shared.types import FloatArray, IntArray


class RowTruth(Mapping[str, tuple[IntArray, FloatArray]]):
    """The truth of a one-tier run: wire user id (`shared.population.user_id_of`, the dataset's
    own id) → (items, ratings) of her row of `data`, found by id on access, so a million
    users' truth is the rating matrix itself and no Python object per user. The users in
    `exclude` (the auxiliary users) are left out."""

    def __init__(self, data: RatingData, exclude: Iterable[str] = ()) -> None:
        self._data = data
        ids = np.asarray(data.user_ids, dtype=np.int64)
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]
        self._exclude: frozenset[str] = frozenset()
        self._exclude = frozenset(u for u in exclude if self._row(u) is not None)

    def _row(self, user_id: object) -> int | None:
        if not isinstance(user_id, str) or user_id in self._exclude:
            return None
        try:
            key = int(user_id)
        except ValueError:
            return None
        pos = int(self._sorted.searchsorted(key))
        if str(key) != user_id or pos == self._sorted.size or self._sorted[pos] != key:
            return None
        return int(self._order[pos])

    def _rows(self, user_ids: Sequence[str]) -> IntArray:
        """The rows of `user_ids`, found in one vectorised search (KeyError naming the first
        user not in the truth)."""
        try:
            keys = np.array([int(u) for u in user_ids], dtype=np.int64)
        except ValueError:
            keys = None
        if keys is not None and self._sorted.size:
            pos = np.minimum(self._sorted.searchsorted(keys), self._sorted.size - 1)
            if (
                np.array_equal(self._sorted[pos], keys)
                and all(str(k) == u for k, u in zip(keys.tolist(), user_ids, strict=True))
                and not any(u in self._exclude for u in user_ids)
            ):
                return np.asarray(self._order[pos], dtype=np.int64)
        for u in user_ids:
            if self._row(u) is None:
                raise KeyError(u)
        return np.zeros(0, dtype=np.int64)  # only an empty request gets here

    def take(self, user_ids: Sequence[str]) -> tuple[IntArray, IntArray, FloatArray]:
        """(profile sizes, items as int64, ratings as float64) of `user_ids`, concatenated in
        that order, in one pass (KeyError for a user not in the truth)."""
        rows = self._rows(user_ids)
        matrix = self._data.ratings
        lens, positions = row_positions(matrix.indptr, rows)
        return (
            lens,
            matrix.indices[positions].astype(np.int64, copy=False),
            matrix.data[positions].astype(np.float64, copy=False),
        )

    def __getitem__(self, user_id: str) -> tuple[IntArray, FloatArray]:
        row = self._row(user_id)
        if row is None:
            raise KeyError(user_id)
        items, ratings = self._data.user_row(row)
        return items, ratings

    def __contains__(self, user_id: object) -> bool:
        return self._row(user_id) is not None

    def __iter__(self) -> Iterator[str]:
        for u in self._data.user_ids.tolist():
            if str(u) not in self._exclude:
                yield str(u)

    def __len__(self) -> int:
        return self._data.n_users - len(self._exclude)


def truth_from_rating_data(data: RatingData) -> RowTruth:
    """Truth keyed by wire user id (`shared.population.user_id_of`: the dataset's own id)."""
    return RowTruth(data)


__all__ = ["RowTruth", "truth_from_rating_data"]
