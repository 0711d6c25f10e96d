"""The population a run simulates and the public plan every node follows for it.

Client shards load the population to host their users' true ratings; the referee in `sim`
loads it to score. The plan (`population_plan`) says, from public rules and seeds alone, which
users are public, in which collect round each private user releases, and which ratings each
test user withholds and predicts; shards and referee derive it the same way, so the referee
rebuilds exactly what each user released without asking the clients. The server and the
adversary never call this module's loaders (they see no ratings).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from privrec.shared.config import DataSection, ExperimentConfig, PopulationSection
from privrec.shared.data import load_dataset, make_synthetic
from privrec.shared.data.dataset import RatingData
from privrec.shared.data.filters import binarise, k_core
from privrec.shared.data.synthetic import rating_floor
from privrec.shared.mechanisms.base import Profile
from privrec.shared.memory import release_free_memory
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb
from privrec.shared.seeding import rng_for, rngs_for
from privrec.shared.types import BoolArray, IntArray


def load_population(section: DataSection, seed: int) -> RatingData:
    """The dataset of `section`, binarised and cut to its k-core when asked
    (`shared.data.filters`), then to its first `max_users` users when that is set."""
    if section.dataset == "synthetic":
        data = _synthetic(section, seed, users=True)
    else:
        data = load_dataset(section.dataset)
    if section.binarise:
        data = binarise(data, section.binarise)
    if section.min_user_ratings or section.min_item_ratings:
        data = k_core(data, section.min_user_ratings, section.min_item_ratings)
    if section.max_users and section.max_users < data.n_users:
        data = data.rows(range(section.max_users))
    release_free_memory()  # the generator's and the reader's temporaries (shared.memory)
    return data


def generated_by_rows(section: DataSection) -> bool:
    """Whether any range of the population's users can be made alone: synthetic data that no
    filter changes (binarising and the k-core drop users by everyone's ratings)."""
    return section.dataset == "synthetic" and not (
        section.binarise or section.min_user_ratings or section.min_item_ratings
    )


def population_size(section: DataSection) -> int:
    """How many users the population of a `generated_by_rows` section has (no rating made)."""
    n = section.synthetic_users
    return min(n, section.max_users) if section.max_users else n


THESIS_PROTOCOL_USERS = 6040
"""Up to this many users (ML-1M's), every user is tested and attacked by default (the theses'
protocol, so every published figure keeps its test set); above, the defaults sample."""
SAMPLED_TEST_USERS = 10_000
"""Above `THESIS_PROTOCOL_USERS`, the default number of test users (`[evaluation] test_users
= 0`): the standard error of a mean per-user metric is then ≈ 1 % of its spread, and serving and
the referee's references stay linear in users."""


def tested_user_count(config: ExperimentConfig, n_users: int) -> int:
    """How many test users `[evaluation] test_users` draws in a population of `n_users`, its
    default (0) resolved: 0 (every user who can be tested) up to `THESIS_PROTOCOL_USERS` users,
    `SAMPLED_TEST_USERS` above."""
    wanted = config.evaluation.test_users
    if wanted == 0 and n_users > THESIS_PROTOCOL_USERS:
        return SAMPLED_TEST_USERS
    return wanted


def population_rows(section: DataSection, seed: int, rows: range) -> RatingData:
    """The users `rows` (a contiguous range of rows) of a `generated_by_rows` population: the
    same users with the same ratings as the rows of `load_population`, but only the
    generator's blocks that hold them are made (`SyntheticRatings.rows`): what a client shard
    hosting them needs. The result's row r is population row ``rows.start + r``; its user ids
    are the population's."""
    if not generated_by_rows(section) or rows.step != 1:
        raise ValueError("population_rows: a contiguous range of a synthetic population")
    stop = min(rows.stop, population_size(section))
    return _synthetic(section, seed, users=True, rows=range(rows.start, max(rows.start, stop)))


def load_catalogue(section: DataSection, seed: int) -> RatingData:
    """What a node that holds no user's data (the server) reads from the dataset of `section`:
    its items, rating scale, name and item features. For synthetic data no user is generated
    (`make_synthetic(users=False)`: a million users' ratings took the server 13 s and their
    memory); a dataset file is read whole, as for `load_population`."""
    if section.dataset != "synthetic":
        return load_population(section, seed)
    return _synthetic(section, seed, users=False)


def _synthetic(
    section: DataSection, seed: int, *, users: bool, rows: range | None = None
) -> RatingData:
    """`make_synthetic` with the settings of `section` (one call for the population, its
    catalogue and a shard's users, so that all always draw the same items)."""
    return make_synthetic(
        section.synthetic_users,
        section.synthetic_items,
        seed=seed,
        n_genres=section.synthetic_genres,
        users=users,
        rows=rows,
    )


def user_id_of(data: RatingData, row: int) -> str:
    """The wire id of row `row`: the dataset's own user id as a string."""
    return str(int(data.user_ids[row]))


def profile_of(data: RatingData, row: int) -> Profile:
    """The profile of the user in `row` (views of the rating matrix, not copies)."""
    items, ratings = data.user_row(row)
    # views of the rating matrix where the dtype already fits (a Profile is never modified)
    return Profile(
        np.asarray(items, dtype=np.int64), np.asarray(ratings, dtype=np.float64), data.n_items
    )


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
    counts = np.diff(data.ratings.tocsr().indptr)
    order = np.argsort(-counts, kind="stable")
    private = order[~np.isin(order, np.fromiter(public, dtype=np.int64, count=len(public)))]
    rounds = np.full(data.n_users, -1, dtype=np.int64)
    rounds[private] = np.arange(private.size) // round_size if round_size else 0
    out: list[int] = rounds.tolist()
    return out


def collect_rounds(data: RatingData, section: PopulationSection, seed: int) -> list[int]:
    """Every row's collect round under `[population]` (-1: a public-tier user): `public_rows`
    then `private_rounds`, the one plan shards, orchestrator and referee all follow."""
    public = public_rows(data, section.public_users, section.public_selection, seed)
    return private_rounds(data, public, section.private_round_size)


def choose_withheld(
    items: IntArray, k: int, seed: int, user_id: str, rng: np.random.Generator | None = None
) -> IntArray:
    """The k items whose ratings a test user hides from her query (Bilge §2.4: 5 withheld).

    Drawn uniformly without replacement from her rated items with the user's own stream
    ("user", id, "withheld"), so the referee can score exactly what she predicted. A user with
    fewer than k + 2 ratings is not tested (she would have under two ratings left to z-score);
    every MovieLens user has at least 20. `rng`, if given, is that stream already seeded
    (`withheld_rngs`).
    """
    if items.size < k + 2:
        return items[:0]
    if rng is None:
        rng = rng_for(seed, "user", user_id, "withheld")
    # positions drawn from the size (the same draws as choosing from `items`, less overhead)
    return np.sort(items[rng.choice(items.size, size=k, replace=False)])


def without(profile: Profile, items: IntArray) -> Profile:
    """`profile` with the ratings of `items` removed."""
    keep = ~np.isin(profile.items, items)
    return Profile(profile.items[keep], profile.ratings[keep], profile.n_items)


@dataclasses.dataclass(frozen=True, slots=True)
class UserPlan:
    """What the public plan says about one user.

    Attributes:
        row: her row in the population.
        user_id: her id on the wire.
        profile: her true ratings (never sent as such by a private user).
        withheld: the items she withholds and predicts (empty: not a test user).
        tier: `pb.TIER_PUBLIC` or `pb.TIER_PRIVATE`.
        round: her collect round (0 for public users and one-round runs).
    """

    row: int
    user_id: str
    profile: Profile
    withheld: IntArray
    tier: pb.Tier.ValueType
    round: int

    def training_profile(self) -> Profile:
        """Her ratings without the withheld ones: what she knows when she asks, and what a
        two-tier user releases."""
        return without(self.profile, self.withheld)

    def withheld_ratings(self) -> np.ndarray:
        """Her true ratings of the withheld items (the referee's truth)."""
        return self.profile.ratings[np.searchsorted(self.profile.items, self.withheld)]


def _draw_tested(eligible: BoolArray, n_test: int, seed: int) -> BoolArray:
    """`n_test` of the `eligible` rows, uniformly without replacement (stream ``("evaluation",
    "test-users")``); every eligible row when there are no more than `n_test`."""
    rows = np.flatnonzero(eligible)
    tested = np.zeros(eligible.size, dtype=bool)
    if rows.size <= n_test:
        tested[rows] = True
    else:
        rng = rng_for(seed, "evaluation", "test-users")
        tested[rng.choice(rows, size=n_test, replace=False)] = True
    return tested


def tested_rows(data: RatingData, n_test: int, k: int, seed: int) -> BoolArray | None:
    """Which rows are test users of the thesis protocol under `[evaluation] test_users =
    n_test` (None: every user who can withhold, the default 0): `n_test` drawn among the rows
    with at least k + 2 ratings (the users `choose_withheld` can test)."""
    if n_test == 0:
        return None
    return _draw_tested(data.user_counts() >= k + 2, n_test, seed)


def population_plan(
    data: RatingData, config: ExperimentConfig, rows: Iterable[int] | None = None
) -> list[UserPlan]:
    """The plan of `rows` (default: every user): tier and round (`collect_rounds`) and the
    withheld items, as every node derives them: under the thesis protocol `choose_withheld`'s,
    for the test users `tested_rows` draws; under another `[evaluation] split`, the test cells
    of `shared.data.splits.cell_roles` (`_split_plans`)."""
    if config.evaluation.split != "thesis":
        return _split_plans(data, config, rows)
    seed, k = config.run.seed, config.data.withheld
    rounds = collect_rounds(data, config.population, seed)
    tested = tested_rows(data, tested_user_count(config, data.n_users), k, seed)
    todo = list(range(data.n_users) if rows is None else rows)
    return _thesis_plans(data, todo, 0, rounds, tested, seed, k)


def rows_of_testers(data: RatingData, config: ExperimentConfig) -> IntArray:
    """The rows of the test users (those with items to predict), increasing: under the thesis
    protocol from the row counts and `tested_rows` alone (a user is tested when drawn and
    `choose_withheld` can test her), without planning anyone; else from `population_plan`."""
    if config.evaluation.split != "thesis":
        return np.array(
            [p.row for p in population_plan(data, config) if p.withheld.size], dtype=np.int64
        )
    k = config.data.withheld
    testable = data.user_counts() >= k + 2
    tested = tested_rows(data, tested_user_count(config, data.n_users), k, config.run.seed)
    rows: IntArray = np.flatnonzero(testable if tested is None else testable & tested)
    return rows.astype(np.int64)


def private_release_sizes(data: RatingData, config: ExperimentConfig, holdout: bool) -> IntArray:
    """How many ratings each private user's profile release perturbs (Bilge's genuine count
    g), in row order: her whole profile, or with `holdout` her training ratings. Under the
    thesis protocol from the row counts alone (a test user withholds k ratings: `rows_of_testers`),
    without planning anyone; else from `population_plan`."""
    if config.evaluation.split != "thesis":
        return np.array(
            [
                (p.training_profile() if holdout else p.profile).items.size
                for p in population_plan(data, config)
                if p.tier == pb.TIER_PRIVATE
            ],
            dtype=np.int64,
        )
    counts = data.user_counts()
    if holdout:
        counts[rows_of_testers(data, config)] -= config.data.withheld
    private = np.asarray(collect_rounds(data, config.population, config.run.seed)) >= 0
    sizes: IntArray = counts[private]
    return sizes


def plan_is_local(config: ExperimentConfig) -> bool:
    """Whether a user's plan follows from her own ratings and public rules alone, so that a
    shard plans its users without anyone else's ratings (`local_plans`): the thesis protocol,
    one tier, one collect round, and either every user tested or a population in which every
    user can be (`everyone_testable`: which users `tested_rows` draws among then needs no
    rating)."""
    pop, evaluation, section = config.population, config.evaluation, config.data
    draws = evaluation.test_users
    if generated_by_rows(section):
        draws = tested_user_count(config, population_size(section))
    return (
        evaluation.split == "thesis"
        and pop.public_users == 0
        and pop.private_round_size == 0
        and (draws == 0 or everyone_testable(section))
    )


def everyone_testable(section: DataSection) -> bool:
    """Whether every user of the population has the k + 2 ratings `choose_withheld` needs, by
    construction: a `generated_by_rows` population whose generator gives every user at least
    `rating_floor` ratings."""
    return (
        generated_by_rows(section) and rating_floor(section.synthetic_items) >= section.withheld + 2
    )


def local_test_users(config: ExperimentConfig, n_users: int) -> BoolArray | None:
    """`tested_rows` of a population for which `plan_is_local` holds, from its size alone
    (None: every user is tested): the same draw, since every user is eligible."""
    n_test = tested_user_count(config, n_users)
    if n_test == 0:
        return None
    return _draw_tested(np.ones(n_users, dtype=bool), n_test, config.run.seed)


def local_plans(
    chunk: RatingData, first_row: int, config: ExperimentConfig, tested: BoolArray | None
) -> list[UserPlan]:
    """The plans of every user of `chunk`, population rows ``first_row`` onwards, when
    `plan_is_local(config)`: the plans `population_plan` gives those rows (private tier,
    round 0), made from the chunk alone. `tested`: `local_test_users`."""
    if not plan_is_local(config):
        raise ValueError("local_plans: the plan of this configuration needs every user")
    return _thesis_plans(
        chunk, range(chunk.n_users), first_row, None, tested, config.run.seed, config.data.withheld
    )


def _thesis_plans(
    data: RatingData,
    rows: Sequence[int],
    first_row: int,
    rounds: Sequence[int] | None,
    tested: BoolArray | None,
    seed: int,
    k: int,
) -> list[UserPlan]:
    """Plans under the thesis protocol of `rows` of `data`, which are population rows
    ``first_row + row``; `rounds` and `tested` are indexed by population row (`rounds` None:
    everyone private, round 0; `tested` None: everyone tested who can be)."""
    plans = []
    for start in range(0, len(rows), _PLAN_BLOCK):  # the users' streams seeded a block at once
        block = rows[start : start + _PLAN_BLOCK]
        uids = [user_id_of(data, row) for row in block]
        rngs = rngs_for(seed, [("user", uid, "withheld") for uid in uids])
        for row, uid, rng in zip(block, uids, rngs, strict=True):
            profile = profile_of(data, row)
            at = first_row + row
            round_ = 0 if rounds is None else rounds[at]
            plans.append(
                UserPlan(
                    row=at,
                    user_id=uid,
                    profile=profile,
                    withheld=(
                        choose_withheld(profile.items, k, seed, uid, rng)
                        if tested is None or tested[at]
                        else profile.items[:0]
                    ),
                    tier=pb.TIER_PUBLIC if round_ < 0 else pb.TIER_PRIVATE,
                    round=max(round_, 0),
                )
            )
    return plans


def _split_plans(
    data: RatingData, config: ExperimentConfig, rows: Iterable[int] | None
) -> list[UserPlan]:
    """The plan under a named split (`shared.data.splits.cell_roles`). A user is tested when
    she has a test cell and at least two training ratings (the query of a z-score model
    needs two) and `[evaluation] test_users` draws her; her profile in the run is then her
    ratings without the validation cells, and she withholds her test cells. Anyone else's
    test and validation cells are dropped (never released, never scored), so the training
    data do not depend on who is tested."""
    from privrec.shared.data.splits import TEST, TRAIN, cell_roles

    seed = config.run.seed
    roles = cell_roles(data, config.evaluation, seed)
    rounds = collect_rounds(data, config.population, seed)
    indptr = np.asarray(data.ratings.indptr, dtype=np.int64)
    row_of = np.repeat(np.arange(data.n_users), np.diff(indptr))
    n_train = np.bincount(row_of[roles == TRAIN], minlength=data.n_users)
    n_test = np.bincount(row_of[roles == TEST], minlength=data.n_users)
    eligible = (n_train >= 2) & (n_test >= 1)
    n_draw = tested_user_count(config, data.n_users)
    tested = _draw_tested(eligible, n_draw, seed) if n_draw else eligible
    plans = []
    for row in range(data.n_users) if rows is None else rows:
        full = profile_of(data, row)
        role = roles[indptr[row] : indptr[row + 1]]
        keep = role == TRAIN
        if tested[row]:
            keep |= role == TEST
        profile = Profile(full.items[keep], full.ratings[keep], full.n_items)
        plans.append(
            UserPlan(
                row=row,
                user_id=user_id_of(data, row),
                profile=profile,
                withheld=full.items[role == TEST] if tested[row] else full.items[:0],
                tier=pb.TIER_PUBLIC if rounds[row] < 0 else pb.TIER_PRIVATE,
                round=max(rounds[row], 0),
            )
        )
    return plans


_PLAN_BLOCK = 4096
"""Users whose generators `population_plan` seeds in one `rngs_for` call."""


def shard_rows(n_users: int, shard: int, n_shards: int) -> range:
    """Rows hosted by shard `shard` of `n_shards`: a contiguous range, the shards' sizes
    differing by at most one (shard s holds rows ``s·N // S`` to ``(s + 1)·N // S``), so that
    a shard of a synthetic population generates only its own users (`population_rows`)."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard must be in [0, {n_shards}), got {shard}")
    return range(shard * n_users // n_shards, (shard + 1) * n_users // n_shards)


__all__ = [
    "UserPlan",
    "choose_withheld",
    "collect_rounds",
    "everyone_testable",
    "generated_by_rows",
    "load_catalogue",
    "load_population",
    "local_plans",
    "local_test_users",
    "plan_is_local",
    "population_plan",
    "population_rows",
    "population_size",
    "private_release_sizes",
    "private_rounds",
    "profile_of",
    "public_rows",
    "rows_of_testers",
    "shard_rows",
    "tested_rows",
    "tested_user_count",
    "user_id_of",
    "without",
]
