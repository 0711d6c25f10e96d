"""Seeded splits of users and ratings for evaluation.

* `user_folds` assigns users to balanced cross-validation folds;
* `train_test_users` splits users into training and test users;
* `withhold` hides k ratings of each test user: the server sees the rest of her profile as her
  query, the referee keeps the hidden ratings as test truth ("all-but-k" / given-n protocol).

Every random draw comes from `shared.seeding.rng_for(seed, "splits", …)`, so a split depends only
on its arguments.
"""

from __future__ import annotations

import typing

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"`{name}` must be an int >= {minimum}, got {value!r}")
    return int(value)


def user_folds(n_users: int, n_folds: int, seed: int) -> IntArray:
    """Fold id (0..n_folds-1) of each user: balanced, and a uniformly random such assignment.

    Fold sizes differ by at most one (the first ``n_users % n_folds`` folds get the extra user).

    Args:
        n_users: number of users, >= n_folds.
        n_folds: number of folds, >= 2.
        seed: run seed (stream ``("splits", "user_folds")``).

    Returns:
        int64 array of shape (n_users,).

    Raises:
        ValueError: `n_folds` < 2 or larger than `n_users`.
    """
    n_folds = _check_int("n_folds", n_folds, 2)
    n_users = _check_int("n_users", n_users, n_folds)
    folds = np.arange(n_users, dtype=np.int64) % n_folds
    return rng_for(seed, "splits", "user_folds").permutation(folds)


def train_test_users(n_users: int, test_fraction: float, seed: int) -> tuple[IntArray, IntArray]:
    """Split user indices into training and test users, uniformly at random.

    Args:
        n_users: number of users, >= 2.
        test_fraction: fraction of test users in (0, 1); the test set has
            ``round(test_fraction · n_users)`` users, at least 1 and at most ``n_users − 1``.
        seed: run seed (stream ``("splits", "train_test_users")``).

    Returns:
        (train_users, test_users): disjoint sorted int64 arrays covering ``0..n_users-1``.

    Raises:
        ValueError: `n_users` < 2 or `test_fraction` outside (0, 1).
    """
    n_users = _check_int("n_users", n_users, 2)
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must be in (0, 1), got {test_fraction!r}")
    n_test = min(n_users - 1, max(1, round(test_fraction * n_users)))
    order = rng_for(seed, "splits", "train_test_users").permutation(n_users)
    return np.sort(order[n_test:]).astype(np.int64), np.sort(order[:n_test]).astype(np.int64)


class Withheld(typing.NamedTuple):
    """Withheld ratings, sorted by (user, item); ``user_idx, item_idx, rating = withheld``."""

    user_idx: IntArray
    """Row (user index) of each withheld rating."""
    item_idx: IntArray
    """Column (item index) of each withheld rating."""
    rating: FloatArray
    """The withheld rating values."""


def withhold(
    data_or_csr: RatingData | sp.csr_matrix | sp.csr_array,
    test_users: npt.ArrayLike,
    k: int,
    seed: int,
) -> tuple[sp.csr_matrix, Withheld]:
    """Withhold k ratings of each test user, chosen uniformly at random among hers.

    A test user with more than `k` ratings gets exactly `k` of them withheld. A test user with
    ``≤ k`` ratings keeps all of them and has none withheld (withholding all would leave no query
    profile, and fewer than k would make users' test sets unequal); other users are untouched.

    The choice is made by random keys drawn once for every stored rating from the stream
    ``("splits", "withhold")``: each test user's k ratings with the smallest keys are withheld.
    So for a given matrix and seed a user's withheld ratings do not depend on which other users
    are test users.

    Args:
        data_or_csr: `RatingData`, or a CSR matrix of shape (n_users, n_items).
        test_users: user (row) indices; duplicates are an error.
        k: number of ratings to withhold per eligible user, >= 1.
        seed: run seed.

    Returns:
        (train, withheld): `train` is a new float64 CSR matrix equal to the input without the
        withheld entries (sorted indices); `withheld` holds the removed ratings as arrays.

    Raises:
        ValueError: `k` < 1, or a test user index out of range or repeated.
    """
    k = _check_int("k", k, 1)
    matrix = data_or_csr.ratings if isinstance(data_or_csr, RatingData) else data_or_csr
    csr = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    csr.sort_indices()
    n_users = csr.shape[0]
    users = np.asarray(test_users)
    if users.ndim != 1 or (users.size and not np.issubdtype(users.dtype, np.integer)):
        raise ValueError(f"`test_users` must be a 1-D array of user indices, got {users!r}")
    users = users.astype(np.int64)
    if users.size and (users.min() < 0 or users.max() >= n_users):
        bad = users[(users < 0) | (users >= n_users)][0]
        raise ValueError(f"`test_users` contains {bad}, outside 0..{n_users - 1}")
    if np.unique(users).size != users.size:
        raise ValueError("`test_users` contains a repeated user index")

    keys = rng_for(seed, "splits", "withhold").random(csr.nnz)
    counts = np.diff(csr.indptr)
    eligible = np.zeros(n_users, dtype=bool)
    eligible[users[counts[users] > k]] = True
    row_of = np.repeat(np.arange(n_users), counts)
    candidates = np.flatnonzero(eligible[row_of])
    # Rank candidates by key within each row; the k smallest keys are withheld.
    order = candidates[np.lexsort((keys[candidates], row_of[candidates]))]
    rows_sorted = row_of[order]
    first = np.searchsorted(rows_sorted, rows_sorted, side="left")
    rank_in_row = np.arange(order.size) - first
    chosen = np.sort(order[rank_in_row < k])  # entry positions, i.e. sorted by (row, column)

    withheld = Withheld(
        user_idx=row_of[chosen].astype(np.int64),
        item_idx=csr.indices[chosen].astype(np.int64),
        rating=csr.data[chosen].copy(),
    )
    keep = np.ones(csr.nnz, dtype=bool)
    keep[chosen] = False
    new_counts = np.bincount(row_of[keep], minlength=n_users)
    indptr = np.zeros(n_users + 1, dtype=csr.indptr.dtype)
    np.cumsum(new_counts, out=indptr[1:])
    train = sp.csr_matrix((csr.data[keep], csr.indices[keep], indptr), shape=csr.shape)
    train.has_sorted_indices = True
    return train, withheld


__all__ = ["Withheld", "train_test_users", "user_folds", "withhold"]
