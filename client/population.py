"""The population a run simulates: every node that needs the ratings loads them the same way.

Client shards load it to host their users' true ratings; the referee in `sim` loads it to score.
The server and the adversary never call this.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from privrec.shared.config import DataSection, PopulationSection
from privrec.shared.data import load_dataset, make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.mechanisms.base import Profile
from privrec.shared.seeding import rng_for


def load_population(section: DataSection, seed: int) -> RatingData:
    """The dataset of `section`, cut to its first `max_users` users when that is set."""
    if section.dataset == "synthetic":
        data = make_synthetic(section.synthetic_users, section.synthetic_items, seed=seed)
    else:
        data = load_dataset(section.dataset)
    if section.max_users and section.max_users < data.n_users:
        n = section.max_users
        data = dataclasses.replace(
            data, ratings=data.ratings[:n].tocsr(), user_ids=data.user_ids[:n]
        )
    return data


def user_id_of(data: RatingData, row: int) -> str:
    """The wire id of row `row`: the dataset's own user id as a string."""
    return str(int(data.user_ids[row]))


def profile_of(data: RatingData, row: int) -> Profile:
    items, ratings = data.user_row(row)
    return Profile(items.astype(np.int64), ratings.astype(np.float64), data.n_items)


def public_rows(data: RatingData, n_public: int, selection: str, seed: int) -> frozenset[int]:
    """Rows of the public tier: the `n_public` users with the most ratings (Xin & Jaakkola
    Sec. 5, "the top 100 users by number of ratings"; ties to the smaller row), or a uniform
    sample seeded by ("population", "public-tier")."""
    n_public = min(n_public, data.n_users)
    if selection == "random":
        rng = rng_for(seed, "population", "public-tier")
        return frozenset(rng.choice(data.n_users, size=n_public, replace=False).tolist())
    counts = np.diff(data.ratings.tocsr().indptr)
    return frozenset(np.argsort(-counts, kind="stable")[:n_public].tolist())


def private_rounds(data: RatingData, public: frozenset[int], round_size: int) -> list[int]:
    """The collect round of every row (public rows: -1). Private users with the most ratings
    come first (Xin & Jaakkola Sec. 5; ties to the smaller row), `round_size` per round;
    0 puts them all in round 0."""
    rounds = [-1] * data.n_users
    counts = np.diff(data.ratings.tocsr().indptr)
    private = [int(r) for r in np.argsort(-counts, kind="stable") if int(r) not in public]
    for position, row in enumerate(private):
        rounds[row] = position // round_size if round_size else 0
    return rounds


def collect_rounds(data: RatingData, section: PopulationSection, seed: int) -> list[int]:
    """Every row's collect round under `[population]` (-1: a public-tier user): `public_rows`
    then `private_rounds`, the one plan shards, orchestrator and referee all follow."""
    public = public_rows(data, section.public_users, section.public_selection, seed)
    return private_rounds(data, public, section.private_round_size)


def shard_rows(n_users: int, shard: int, n_shards: int) -> range:
    """Rows hosted by shard `shard` of `n_shards` (round robin)."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in [0, {n_shards}), got {shard}")
    return range(shard, n_users, n_shards)


__all__ = [
    "collect_rounds",
    "load_population",
    "private_rounds",
    "profile_of",
    "public_rows",
    "shard_rows",
    "user_id_of",
]
