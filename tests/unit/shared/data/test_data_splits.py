"""Seeded splits: balanced folds, train/test users, withholding k ratings per test user."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from privrec.shared.data import make_synthetic, train_test_users, user_folds, withhold


def test_user_folds_balanced_and_reproducible() -> None:
    """Fold sizes differ by at most one, every user is in one fold, the seed fixes the draw."""
    folds = user_folds(103, 5, seed=1)
    assert folds.shape == (103,) and folds.dtype == np.int64
    sizes = np.bincount(folds, minlength=5)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 103
    np.testing.assert_array_equal(folds, user_folds(103, 5, seed=1))
    assert np.any(folds != user_folds(103, 5, seed=2))
    members = [set(np.flatnonzero(folds == f)) for f in range(5)]
    assert set().union(*members) == set(range(103))
    assert sum(len(m) for m in members) == 103  # disjoint


@pytest.mark.parametrize(("n_users", "n_folds"), [(10, 1), (3, 5), (10, 2.5)])
def test_user_folds_rejects_bad_arguments(n_users: int, n_folds: int) -> None:
    """Fewer than 2 folds, more folds than users, or non-int folds are errors."""
    with pytest.raises(ValueError, match="must be an int >="):
        user_folds(n_users, n_folds, seed=0)


def test_train_test_users_disjoint_cover() -> None:
    """Train and test users are sorted, disjoint, cover all users, and round the fraction."""
    train, test = train_test_users(1000, 0.2, seed=5)
    assert test.size == 200 and train.size == 800
    assert np.all(np.diff(train) > 0) and np.all(np.diff(test) > 0)
    np.testing.assert_array_equal(np.union1d(train, test), np.arange(1000))
    again = train_test_users(1000, 0.2, seed=5)
    np.testing.assert_array_equal(test, again[1])
    assert not np.array_equal(test, train_test_users(1000, 0.2, seed=6)[1])
    assert train_test_users(3, 0.01, seed=0)[1].size == 1  # at least one test user
    with pytest.raises(ValueError, match="`test_fraction` must be in"):
        train_test_users(10, 1.0, seed=0)


@pytest.fixture(scope="module")
def matrix() -> sp.csr_matrix:
    return make_synthetic(400, 300, density=0.05, min_ratings=3, seed=9).ratings


def test_withhold_exactly_k_per_eligible_test_user(matrix: sp.csr_matrix) -> None:
    """Users with more than k ratings lose exactly k; others, and non-test users, keep all."""
    k = 10
    counts = np.diff(matrix.indptr)
    test = np.arange(0, 400, 2)
    train, withheld = withhold(matrix, test, k, seed=3)
    per_user = np.bincount(withheld.user_idx, minlength=400)
    eligible = np.zeros(400, dtype=bool)
    eligible[test[counts[test] > k]] = True
    assert (~eligible).any() and eligible.any()  # both cases occur in this fixture
    np.testing.assert_array_equal(per_user[eligible], k)
    np.testing.assert_array_equal(per_user[~eligible], 0)
    np.testing.assert_array_equal(np.diff(train.indptr), counts - per_user)
    # Train plus withheld is the original matrix, entry for entry.
    restored = train + sp.csr_matrix(
        (withheld.rating, (withheld.user_idx, withheld.item_idx)), shape=matrix.shape
    )
    assert (restored != matrix).nnz == 0
    assert train.has_canonical_format
    assert np.all(np.diff(withheld.user_idx) >= 0)


def test_withhold_reproducible_and_independent_of_other_test_users(matrix: sp.csr_matrix) -> None:
    """Same seed, same result; a user's withheld items do not depend on the other test users."""
    _, a = withhold(matrix, [5, 7, 9], 3, seed=1)
    _, b = withhold(matrix, [5, 7, 9], 3, seed=1)
    _, alone = withhold(matrix, [7], 3, seed=1)
    _, other = withhold(matrix, [5, 7, 9], 3, seed=2)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.item_idx[a.user_idx == 7], alone.item_idx)
    assert not np.array_equal(a.item_idx, other.item_idx)


def test_withhold_accepts_rating_data_and_csr_array(matrix: sp.csr_matrix) -> None:
    """RatingData and sparse csr_array inputs give the same split as a csr_matrix."""
    data = make_synthetic(400, 300, density=0.05, min_ratings=3, seed=9)
    _, from_data = withhold(data, [1, 2], 2, seed=4)
    _, from_array = withhold(sp.csr_array(matrix), [1, 2], 2, seed=4)
    np.testing.assert_array_equal(from_data.item_idx, from_array.item_idx)


def test_withhold_is_uniform_within_a_row() -> None:
    """Each of a user's n ratings is withheld with probability k/n.

    10,000 users with the same 10 items and k = 3: each item is withheld Binomial(10000, 0.3)
    times (sd 45.8); the tolerance of 5 sd gives a false-failure rate below 1e-5 per item.
    """
    n_users, n, k = 10_000, 10, 3
    matrix = sp.csr_matrix(np.ones((n_users, n)))
    _, withheld = withhold(matrix, np.arange(n_users), k, seed=8)
    per_item = np.bincount(withheld.item_idx, minlength=n)
    assert np.all(np.abs(per_item - n_users * k / n) < 5 * np.sqrt(n_users * 0.3 * 0.7))


@pytest.mark.parametrize(
    ("users", "k", "message"),
    [
        ([1], 0, "`k` must be an int >= 1"),
        ([400], 2, "outside 0..399"),
        ([-1], 2, "outside 0..399"),
        ([3, 3], 2, "repeated user index"),
        ([0.5], 2, "1-D array of user indices"),
    ],
)
def test_withhold_rejects_bad_arguments(
    matrix: sp.csr_matrix, users: list, k: int, message: str
) -> None:
    """Bad k and bad test-user indices are ValueErrors naming them."""
    with pytest.raises(ValueError, match=message):
        withhold(matrix, users, k, seed=0)
