"""Seeded splits of users and ratings for evaluation.

* `user_folds` assigns users to balanced cross-validation folds;
* `train_test_users` splits users into training and test users;
* `withhold` hides k ratings of each test user: the server sees the rest of her profile as her
  query, the referee keeps the hidden ratings as test truth ("all-but-k" / given-n protocol);
* `cell_roles` gives every stored rating its role (training, validation, test) under the named
  splits of `[evaluation] split` other than the thesis protocol: "ratio" (per user, at
  random), "leave-one-out" (per user, her latest rating), "temporal" (the latest share of all
  ratings, one cut-off for everyone) and "file" (the test cells listed in a file);
* `split_fingerprint` names a test set: a SHA-256 of its cells and the seed.

Every random draw comes from `shared.seeding.rng_for(seed, "splits", …)`, so a split depends only
on its arguments.

References:
    Meng, McCreadie, Macdonald, Ounis. "Exploring data splitting strategies for the evaluation
    of recommendation models", RecSys 2020 (leave-one-out and temporal splits; leakage).
    Zhao et al. "RecBole", CIKM 2021 (per-user ratio splits "RO"/"TO" and leave-one-out).
"""

from __future__ import annotations

import hashlib
import re
import typing
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from privrec.shared.data.dataset import RatingData
from privrec.shared.errors import DataError
from privrec.shared.seeding import rng_for
from privrec.shared.types import FloatArray, IntArray

if TYPE_CHECKING:
    from privrec.shared.config import EvaluationSection

Int8Array = npt.NDArray[np.int8]


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


TRAIN, VALIDATION, TEST = 0, 1, 2
"""The roles `cell_roles` gives a stored rating."""


def _row_of(csr: sp.csr_matrix) -> IntArray:
    return np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))


def _rank_in_row(rows: IntArray, keys: npt.NDArray[np.float64] | IntArray) -> IntArray:
    """Each cell's rank (0 = smallest key) among its row's cells; `rows` ascending."""
    order = np.lexsort((keys, rows))
    first = np.searchsorted(rows[order], rows[order], side="left")
    rank = np.empty(rows.size, dtype=np.int64)
    rank[order] = np.arange(rows.size) - first
    return rank


def ratio_roles(csr: sp.csr_matrix, train: float, validation: float, seed: int) -> Int8Array:
    """Per user, a uniformly random `train` share of her ratings for training, the next
    `validation` share set aside and the rest for test: with n ratings, the cells ranked by one
    random key each (stream ``("splits", "ratio")``) are training below round(train·n),
    validation below round((train + validation)·n), test from there (RecBole's "RO")."""
    rows = _row_of(csr)
    keys = rng_for(seed, "splits", "ratio").random(csr.nnz)
    rank = _rank_in_row(rows, keys)
    n = np.diff(csr.indptr)[rows]
    b1 = np.rint(train * n).astype(np.int64)
    b2 = np.rint((train + validation) * n).astype(np.int64)
    return np.where(rank < b1, TRAIN, np.where(rank < b2, VALIDATION, TEST)).astype(np.int8)


def _times(data: RatingData, split: str) -> npt.NDArray[np.float64]:
    if data.timestamps is None:
        raise DataError(
            f"split {split!r} needs each rating's time, and data set {data.name!r} has none "
            "(MovieLens files carry them; a CSV does not)"
        )
    return np.asarray(data.timestamps.data, dtype=np.float64)


def leave_one_out_roles(data: RatingData) -> Int8Array:
    """Per user, her latest rating is the test cell (ties: the larger item index), the others
    training (leave-one-out by time)."""
    csr = data.ratings
    rows, times = _row_of(csr), _times(data, "leave-one-out")
    order = np.lexsort((csr.indices, times, rows))  # last of each row = her latest rating
    last = order[np.diff(np.append(rows[order], -1)) != 0]
    roles = np.full(csr.nnz, TRAIN, dtype=np.int8)
    roles[last] = TEST
    return roles


def temporal_roles(data: RatingData, test_share: float) -> Int8Array:
    """The latest round(test_share · N) of all N ratings are test cells, every earlier one
    training: one cut-off time for every user (global temporal split); ties at the cut-off go
    by (user row, item index), later rows and items to test."""
    csr = data.ratings
    rows, times = _row_of(csr), _times(data, "temporal")
    order = np.lexsort((csr.indices, rows, times))
    roles = np.full(csr.nnz, TRAIN, dtype=np.int8)
    roles[order[csr.nnz - round(test_share * csr.nnz) :]] = TEST
    return roles


def file_roles(data: RatingData, path: str) -> Int8Array:
    """The test cells listed in `path`, one ``user_id,item_id`` pair per line (the data set's
    own ids; comma, tab or space separated; a first line that is not two integers is a
    header; blank lines and ``#`` comments skipped); every other rating training.

    Raises:
        DataError: an unreadable file, a malformed line, or a pair that is no rating of the
            data set (naming the line).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DataError(f"{file}: cannot read the split file: {exc.strerror or exc}") from exc
    user_row = {int(u): r for r, u in enumerate(np.asarray(data.user_ids).tolist())}
    item_col = {int(i): c for c, i in enumerate(np.asarray(data.item_ids).tolist())}
    csr = data.ratings
    roles = np.full(csr.nnz, TRAIN, dtype=np.int8)
    seen_data = False
    for number, line in enumerate(text.splitlines(), start=1):
        fields = re.split(r"[,\t ]+", line.split("#", 1)[0].strip())
        if fields == [""]:
            continue
        try:
            user, item = int(fields[0]), int(fields[1])
        except (ValueError, IndexError):
            if not seen_data:  # a header
                seen_data = True
                continue
            raise DataError(
                f"{file}, line {number}: expected user_id,item_id, got {line!r}"
            ) from None
        seen_data = True
        if user not in user_row or item not in item_col:
            raise DataError(
                f"{file}, line {number}: user {user} or item {item} is not in the data set"
            )
        row, col = user_row[user], item_col[item]
        start, end = csr.indptr[row], csr.indptr[row + 1]
        at = start + np.searchsorted(csr.indices[start:end], col)
        if at >= end or csr.indices[at] != col:
            raise DataError(f"{file}, line {number}: user {user} did not rate item {item}")
        roles[at] = TEST
    return roles


def cell_roles(data: RatingData, section: EvaluationSection, seed: int) -> Int8Array:
    """The role (`TRAIN`, `VALIDATION`, `TEST`) of every stored rating under the split of
    `section` (not "thesis", whose test cells `shared.population.choose_withheld` draws per
    user), aligned with ``data.ratings.data``.

    Raises:
        DataError: the split needs times the data set lacks, or a bad split file.
        ValueError: `section.split` is "thesis".
    """
    if section.split == "ratio":
        return ratio_roles(data.ratings, section.ratio_train, section.ratio_validation, seed)
    if section.split == "leave-one-out":
        return leave_one_out_roles(data)
    if section.split == "temporal":
        return temporal_roles(data, section.temporal_test)
    if section.split == "file":
        return file_roles(data, section.split_file)
    raise ValueError(
        f"split {section.split!r} has no cell roles (the thesis protocol draws per user)"
    )


def split_fingerprint(
    name: str, seed: int, user_ids: npt.ArrayLike, item_ids: npt.ArrayLike
) -> str:
    """SHA-256 of a test set: the split's name, the seed and its (user id, item id) cells in
    sorted order (the data set's own ids), so two runs share a test set exactly when their
    fingerprints agree."""
    cells = np.stack(
        [np.asarray(user_ids, dtype=np.int64), np.asarray(item_ids, dtype=np.int64)], axis=1
    )
    cells = cells[np.lexsort((cells[:, 1], cells[:, 0]))]
    h = hashlib.sha256(f"{name}\x00{seed}\x00".encode())
    h.update(np.ascontiguousarray(cells, dtype="<i8").tobytes())
    return h.hexdigest()


__all__ = [
    "TEST",
    "TRAIN",
    "VALIDATION",
    "Withheld",
    "cell_roles",
    "file_roles",
    "leave_one_out_roles",
    "ratio_roles",
    "split_fingerprint",
    "temporal_roles",
    "train_test_users",
    "user_folds",
    "withhold",
]
