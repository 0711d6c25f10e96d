"""The public plan of a population (`shared.population`), which shards and referee share."""

from __future__ import annotations

import numpy as np
import pytest

from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.population import (
    load_population,
    local_plans,
    local_test_users,
    plan_is_local,
    population_plan,
    population_rows,
    population_size,
    private_release_sizes,
    shard_rows,
)
from privrec.shared.proto.privrec.v1 import aggregator_pb2 as pb


def test_plan_is_deterministic_and_consistent() -> None:
    """Same config, same plan; withheld items are among her items and leave her training
    profile; a slice of rows gets the same plan as the whole population."""
    data = make_synthetic(50, 30, density=0.4, seed=3)
    cfg = ExperimentConfig()
    a, b = population_plan(data, cfg), population_plan(data, cfg)
    assert [p.user_id for p in a] == [p.user_id for p in b]
    for p, q in zip(a, b, strict=True):
        np.testing.assert_array_equal(p.withheld, q.withheld)
        assert set(p.withheld) <= set(p.profile.items)
        assert not set(p.training_profile().items) & set(p.withheld)
        assert p.training_profile().items.size == p.profile.items.size - p.withheld.size
        assert p.tier == pb.TIER_PRIVATE and p.round == 0
    part = population_plan(data, cfg, [7, 3])
    assert [p.row for p in part] == [7, 3]
    np.testing.assert_array_equal(part[0].withheld, a[7].withheld)


def test_public_tier_and_rounds() -> None:
    """public_users users with the most ratings are public; private rounds of the set size."""
    data = make_synthetic(50, 30, density=0.4, seed=3)
    cfg = ExperimentConfig().replace("population", public_users=10, private_round_size=15)
    plans = population_plan(data, cfg)
    public = [p for p in plans if p.tier == pb.TIER_PUBLIC]
    assert len(public) == 10
    counts = np.diff(data.ratings.indptr)
    assert min(counts[p.row] for p in public) >= max(
        counts[p.row] for p in plans if p.tier == pb.TIER_PRIVATE
    )
    rounds = np.bincount([p.round for p in plans if p.tier == pb.TIER_PRIVATE])
    assert rounds.tolist() == [15, 15, 10]


def test_private_rounds_by_hand() -> None:
    """Most ratings first (ties to the smaller row), public rows -1, `round_size` per round;
    the vectorised order equals the rule written out."""
    from privrec.shared.population import private_rounds

    data = make_synthetic(40, 30, seed=4)
    counts = np.diff(data.ratings.tocsr().indptr)
    public = frozenset({int(np.argmax(counts)), 5})
    for size in (0, 1, 3, 100):
        rounds = private_rounds(data, public, size)
        ranked = sorted((r for r in range(40) if r not in public), key=lambda r: (-counts[r], r))
        want = [-1] * 40
        for position, row in enumerate(ranked):
            want[row] = position // size if size else 0
        assert rounds == want


def test_the_servers_catalogue_is_the_populations_without_its_users() -> None:
    """`load_catalogue` (what `privrec server` reads) has the population's items, scale, name
    and genres, and generates none of its users; `make_synthetic(users=False)` draws the same
    item factors, so the genres are the same flags."""
    from privrec.shared.population import load_catalogue, load_population

    config = ExperimentConfig.from_dict(
        {
            "data": {
                "dataset": "synthetic",
                "synthetic_users": 400,
                "synthetic_items": 120,
                "synthetic_genres": 4,
            }
        }
    )
    full = load_population(config.data, 7)
    catalogue = load_catalogue(config.data, 7)
    assert catalogue.n_users == 0 and catalogue.ratings.shape == (0, 120)
    assert (catalogue.n_items, catalogue.name, catalogue.rating_scale) == (
        full.n_items,
        full.name,
        full.rating_scale,
    )
    assert full.genres is not None and catalogue.genres is not None
    assert np.array_equal(catalogue.genres, full.genres) and full.genres.any()
    assert catalogue.genre_names == full.genre_names
    assert np.array_equal(catalogue.item_ids, full.item_ids)
    other = load_catalogue(config.data, 8)  # another seed: other factors, other genres
    assert other.genres is not None and not np.array_equal(other.genres, full.genres)


def test_test_users_draws_a_seeded_sample_of_the_full_plan() -> None:
    """`[evaluation] test_users = N`: exactly N eligible users withhold, each the very items
    she withholds in the full plan; the others withhold nothing; the draw is seeded (another
    seed, another sample), and N above the eligible count tests every eligible user."""
    data = make_synthetic(200, 40, density=0.2, seed=5)
    full = population_plan(data, ExperimentConfig())
    eligible = {p.row for p in full if p.withheld.size}
    cfg = ExperimentConfig().replace("evaluation", test_users=30)
    sampled = population_plan(data, cfg)
    tested = [p for p in sampled if p.withheld.size]
    assert len(tested) == 30
    assert {p.row for p in tested} <= eligible
    for p in tested:
        np.testing.assert_array_equal(p.withheld, full[p.row].withheld)
    again = population_plan(data, cfg)
    assert [p.row for p in again if p.withheld.size] == [p.row for p in tested]
    other = population_plan(data, cfg.replace("run", seed=1))
    assert {p.row for p in other if p.withheld.size} != {p.row for p in tested}
    everyone = population_plan(data, cfg.replace("evaluation", test_users=10_000))
    assert {p.row for p in everyone if p.withheld.size} == eligible


def _synthetic_config(users: int, items: int = 60, **evaluation: object) -> ExperimentConfig:
    cfg = ExperimentConfig().replace(
        "data", dataset="synthetic", synthetic_users=users, synthetic_items=items
    )
    return cfg.replace("evaluation", **evaluation) if evaluation else cfg


def test_shard_rows_are_contiguous_and_cover_the_population() -> None:
    """Shards hold contiguous ranges, together every row once, sizes within one of another
    (issue 28: a shard generates only the generator's blocks holding its users)."""
    for n_users, n_shards in [(10, 3), (943, 2), (7, 7), (3, 5), (1_000_000, 8)]:
        parts = [shard_rows(n_users, s, n_shards) for s in range(n_shards)]
        assert all(p.step == 1 for p in parts)
        assert [r for p in parts for r in p] == list(range(n_users))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    with pytest.raises(ValueError, match="shard must be in"):
        shard_rows(10, 3, 3)


def test_population_rows_are_the_populations_rows() -> None:
    """`population_rows` of any range equals those rows of the whole population, bit for bit
    (also cut to `max_users`)."""
    cfg = _synthetic_config(1300, 500)  # 1,048 users per generator block: ranges span two
    whole = load_population(cfg.data, 4)
    for rows in [range(0, 1), range(0, 1300), range(1047, 1049), range(400, 1299), range(5, 5)]:
        part = population_rows(cfg.data, 4, rows)
        expected = whole.ratings[rows.start : rows.stop]
        assert part.ratings.shape == expected.shape
        for a, b in [("indptr",) * 2, ("indices",) * 2, ("data",) * 2]:
            np.testing.assert_array_equal(getattr(part.ratings, a), getattr(expected, b))
        np.testing.assert_array_equal(part.user_ids, whole.user_ids[rows.start : rows.stop])
    cut = cfg.replace("data", max_users=700)
    assert population_size(cut.data) == 700
    tail = population_rows(cut.data, 4, range(600, 900))
    assert tail.n_users == 100
    np.testing.assert_array_equal(tail.ratings.data, whole.ratings[600:700].data)


@pytest.mark.parametrize("test_users", [0, 40])
def test_local_plans_equal_the_population_plan(test_users: int) -> None:
    """A shard planning its users from their own rows (chunk by chunk) gets exactly the plan
    every node derives from the whole population: ids, profiles, withheld items, tier, round."""
    cfg = _synthetic_config(300, test_users=test_users)
    assert plan_is_local(cfg)
    data = load_population(cfg.data, cfg.run.seed)
    full = population_plan(data, cfg)
    tested = local_test_users(cfg, data.n_users)
    local = [
        plan
        for start in range(0, 300, 70)
        for plan in local_plans(
            population_rows(cfg.data, cfg.run.seed, range(start, min(300, start + 70))),
            start,
            cfg,
            tested,
        )
    ]
    assert len(local) == len(full) == 300
    for a, b in zip(local, full, strict=True):
        assert (a.row, a.user_id, a.tier, a.round) == (b.row, b.user_id, b.tier, b.round)
        np.testing.assert_array_equal(a.profile.items, b.profile.items)
        np.testing.assert_array_equal(a.profile.ratings, b.profile.ratings)
        np.testing.assert_array_equal(a.withheld, b.withheld)
    assert sum(p.withheld.size > 0 for p in local) == (test_users or 300)


def test_plan_is_local_only_when_no_one_needs_the_others() -> None:
    """A public tier, collect rounds, a named split, or drawing test users among users who may
    lack ratings (a data set file, a catalogue too small for the floor) need everyone."""
    base = _synthetic_config(100)
    assert plan_is_local(base) and plan_is_local(base.replace("evaluation", test_users=10))
    assert not plan_is_local(base.replace("population", public_users=5))
    assert not plan_is_local(base.replace("population", private_round_size=20))
    assert not plan_is_local(base.replace("evaluation", split="ratio"))
    tiny = _synthetic_config(100, items=10, test_users=10)  # floor min(20, 5) < 5 + 2
    assert not plan_is_local(tiny) and plan_is_local(tiny.replace("evaluation", test_users=0))
    assert not plan_is_local(ExperimentConfig().replace("evaluation", test_users=10))
    with pytest.raises(ValueError, match="needs every user"):
        local_plans(make_synthetic(5, 60, seed=0), 0, tiny, None)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"population": {"public_users": 7, "private_round_size": 9}},
        {"evaluation": {"test_users": 11}},
        {"evaluation": {"split": "ratio"}},
    ],
)
def test_private_release_sizes_match_the_plan(changes: dict[str, dict[str, object]]) -> None:
    """The genuine counts the report reads without planning anyone equal the plan's, with and
    without a holdout (users too short to be tested included: 6 ratings, k = 5)."""
    data = make_synthetic(60, 12, density=0.5, min_ratings=6, seed=8)
    assert data.user_counts().min() < 7
    cfg = ExperimentConfig()
    for section, values in changes.items():
        cfg = cfg.replace(section, **values)
    plans = population_plan(data, cfg)
    for holdout in (False, True):
        expected = [
            (p.training_profile() if holdout else p.profile).items.size
            for p in plans
            if p.tier == pb.TIER_PRIVATE
        ]
        assert private_release_sizes(data, cfg, holdout).tolist() == expected


def test_test_users_are_sampled_by_default_only_above_ml1m_size() -> None:
    """Issue 28 (2): the thesis protocol (every user tested) stays the default up to ML-1M's
    6,040 users, so every published figure keeps its test set; above, `[evaluation]
    test_users = 0` draws a seeded 10,000, the same set from the whole population and from a
    shard's rows alone, and the report's population section says so."""
    from privrec.shared.population import (
        SAMPLED_TEST_USERS,
        THESIS_PROTOCOL_USERS,
        rows_of_testers,
        tested_user_count,
    )
    from privrec.sim.report import sampled_test_facts

    small, large = _synthetic_config(THESIS_PROTOCOL_USERS), _synthetic_config(12_000, items=40)
    assert tested_user_count(small, THESIS_PROTOCOL_USERS) == 0
    assert tested_user_count(large, 12_000) == SAMPLED_TEST_USERS
    explicit = large.replace("evaluation", test_users=50)
    assert tested_user_count(explicit, 12_000) == 50
    assert sampled_test_facts(small, THESIS_PROTOCOL_USERS) == {}
    facts = sampled_test_facts(large, 12_000)
    assert facts["sampled_test_users"] == SAMPLED_TEST_USERS
    assert "its default above 6,040 users" in facts["sampled_test_users_rule"]
    data = load_population(large.data, large.run.seed)
    testers = rows_of_testers(data, large)
    assert testers.size == SAMPLED_TEST_USERS  # every synthetic user can be tested here
    assert plan_is_local(large)
    tested = local_test_users(large, data.n_users)
    assert tested is not None
    np.testing.assert_array_equal(np.flatnonzero(tested), testers)
