"""The population a run simulates: every node that needs the ratings loads them the same way.

Client shards load it to host their users' true ratings; the referee in `sim` loads it to score.
The server and the adversary never call this.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from shared.config import DataSection
from shared.data import load_dataset, make_synthetic
from shared.data.dataset import RatingData
from shared.mechanisms.base import Profile


def load_population(section: DataSection, seed: int) -> RatingData:
    """The dataset of `section`, cut to its first `max_users` users when that is set."""
    if section.dataset == "synthetic":
        data = make_synthetic(section.synthetic_users, section.synthetic_items,
                              seed=seed)
    else:
        data = load_dataset(section.dataset)
    if section.max_users and section.max_users < data.n_users:
        n = section.max_users
        data = dataclasses.replace(data, ratings=data.ratings[:n].tocsr(),
                                   user_ids=data.user_ids[:n])
    return data


def user_id_of(data: RatingData, row: int) -> str:
    """The wire id of row `row`: the dataset's own user id as a string."""
    return str(int(data.user_ids[row]))


def profile_of(data: RatingData, row: int) -> Profile:
    items, ratings = data.user_row(row)
    return Profile(items.astype(np.int64), ratings.astype(np.float64), data.n_items)


def shard_rows(n_users: int, shard: int, n_shards: int) -> range:
    """Rows hosted by shard `shard` of `n_shards` (round robin)."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in [0, {n_shards}), got {shard}")
    return range(shard, n_users, n_shards)


__all__ = ["load_population", "profile_of", "shard_rows", "user_id_of"]
