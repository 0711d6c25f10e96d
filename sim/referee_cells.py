"""The cells an attack's estimates share with the truth, gathered for many users at once.

The reconstruction and detection scores of `sim.referee_attacks` compare, user by user, the
cells of her estimate with the items of her true profile: which estimates fall on a true item
(`np.isin(idx, items)`) and the estimate at each true item (`np.searchsorted`). Done per user
in Python, with a z-score per user, that was most of the report's attacks step (51 s of it
at 100,000 users; 26 s now, the rest being the decoding of the releases and the pooled AUC's
ranks). Here a chunk of users is one pass: each cell gets the key (user's position, item),
keys of consecutive users never interleave, so the two look-ups become two `searchsorted`
over the whole chunk. The arrays are the ones the per-user loop concatenated, in the same
order, so every figure built on them is unchanged to the last bit
(tests/unit/sim/test_referee_cells.py holds the per-user loop as the oracle).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from privrec.adversary.attacks.base import AttackOutput, PackedEstimates, UserEstimate
from privrec.shared.types import BoolArray, FloatArray, IntArray

TruthProfiles = Mapping[str, tuple[npt.ArrayLike, npt.ArrayLike]]
"""user id → (item indices, true ratings) of exactly the profile the user released."""
CHUNK = 20_000
"""Users gathered per pass (≈ 100 MB of working arrays at 350 estimates per user)."""


@dataclasses.dataclass(frozen=True)
class SharedCells:
    """A chunk of users' estimates beside their true profiles, each concatenated in user order.

    Attributes:
        users: the users, in the output's order.
        true_lens: int (n,), each user's profile size.
        true_items: int (Σ true_lens,), her items, increasing within each user.
        true_ratings: float (Σ true_lens,), their ratings, in that order.
        est_lens: int (n,), how many cells each user's estimate holds.
        est_values: float (Σ est_lens,), the estimates, in the output's order.
        est_true: bool (Σ est_lens,), the estimate's item is one of the user's true items.
        true_hit: bool (Σ true_lens,), the user's estimate holds this true item.
        hit_est: int (true_hit.sum(),), for each true cell with a hit, the position in
            `est_values` of the estimate of that item.
    """

    users: list[str]
    true_lens: IntArray
    true_items: IntArray
    true_ratings: FloatArray
    est_lens: IntArray
    est_values: FloatArray
    est_true: BoolArray
    true_hit: BoolArray
    hit_est: IntArray

    @property
    def true_user(self) -> IntArray:
        """The position in `users` of each true cell's user."""
        return np.repeat(np.arange(len(self.users)), self.true_lens)


def shared_users(output: AttackOutput, truth: TruthProfiles) -> Iterator[list[str]]:
    """The users of `output` that the truth holds, in the output's order, `CHUNK` at a time."""
    users: list[str] = []
    for uid in output.per_user:
        if uid in truth:
            users.append(uid)
            if len(users) == CHUNK:
                yield users
                users = []
    if users:
        yield users


def shared_cells(output: AttackOutput, truth: TruthProfiles, users: list[str]) -> SharedCells:
    """Gather `users`' estimates and true profiles (every user must be in both)."""
    est_lens, est_idx, est_values = estimates_of(output.per_user, users)
    true_lens, items, ratings = true_profiles(truth, users)
    rows = np.arange(len(users), dtype=np.int64)
    true_rows, est_rows = np.repeat(rows, true_lens), np.repeat(rows, est_lens)
    if not ((items[1:] > items[:-1]) | (true_rows[1:] > true_rows[:-1])).all():
        order = np.lexsort((items, true_rows))  # each profile by item, as `np.argsort(items)`
        items, ratings = items[order], ratings[order]
    true_hit, hit_est = find_cells(est_rows, est_idx, true_rows, items)
    return SharedCells(
        users,
        true_lens,
        items,
        ratings,
        est_lens,
        est_values,
        find_cells(true_rows, items, est_rows, est_idx)[0],
        true_hit,
        hit_est,
    )


def find_cells(
    table_rows: IntArray, table_items: IntArray, rows: IntArray, items: IntArray
) -> tuple[BoolArray, IntArray]:
    """For each cell (rows[i], items[i]): whether the table of cells (table_rows[j],
    table_items[j]) holds it, and for those it holds, where (the first of equal cells). The
    table may come in any order; in (row, item) order, as users' cells one user after another
    with `UserEstimate`'s increasing items are, it needs no sort."""
    low = min(_min(table_items), _min(items))
    span = max(_max(table_items), _max(items)) - low + 1
    table = table_rows * span + (table_items - low)
    keys = rows * span + (items - low)
    order = None
    if table.size > 1 and not (table[1:] >= table[:-1]).all():
        order = np.argsort(table, kind="stable")
        table = table[order]
    pos = np.searchsorted(table, keys)
    hit = pos < table.size
    hit[hit] = table[pos[hit]] == keys[hit]
    found = pos[hit]
    return hit, found if order is None else order[found]


def _min(a: IntArray) -> int:
    return int(a.min()) if a.size else 0


def _max(a: IntArray) -> int:
    return int(a.max()) if a.size else 0


def estimates_of(
    per_user: Mapping[str, UserEstimate], users: list[str]
) -> tuple[IntArray, IntArray, FloatArray]:
    """(sizes, items, values) of `users`' estimates concatenated (packed ones in one pass)."""
    if isinstance(per_user, PackedEstimates):
        return per_user.take(users)
    idx = [np.asarray(per_user[u].indices, dtype=np.int64) for u in users]
    val = [np.asarray(per_user[u].values, dtype=np.float64) for u in users]
    return (
        np.array([a.size for a in idx], dtype=np.int64),
        np.concatenate(idx) if idx else np.zeros(0, np.int64),
        np.concatenate(val) if val else np.zeros(0),
    )


def true_profiles(truth: TruthProfiles, users: list[str]) -> tuple[IntArray, IntArray, FloatArray]:
    """(profile sizes, items, ratings) of `users` concatenated (a `RowTruth` in one pass)."""
    take = getattr(truth, "take", None)
    if take is not None:
        lens, items, ratings = take(users)
        return lens, items, ratings
    items = [np.asarray(truth[u][0], dtype=np.int64) for u in users]
    ratings = [np.asarray(truth[u][1], dtype=np.float64) for u in users]
    return (
        np.array([a.size for a in items], dtype=np.int64),
        np.concatenate(items) if items else np.zeros(0, np.int64),
        np.concatenate(ratings) if ratings else np.zeros(0),
    )


def user_pairs(
    output: AttackOutput, truth: TruthProfiles
) -> Iterator[tuple[str, IntArray, FloatArray, IntArray, FloatArray]]:
    """Yield (user id, estimate indices, values, true items, true ratings) for shared users."""
    for uid, est in output.per_user.items():
        if uid not in truth:
            continue
        items, ratings = truth[uid]
        items = np.asarray(items, dtype=np.int64)
        ratings = np.asarray(ratings, dtype=np.float64)
        order = np.argsort(items)
        yield uid, est.indices, est.values, items[order], ratings[order]


__all__ = [
    "CHUNK",
    "SharedCells",
    "TruthProfiles",
    "estimates_of",
    "find_cells",
    "shared_cells",
    "shared_users",
    "true_profiles",
    "user_pairs",
]
