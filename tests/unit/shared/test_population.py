"""The public plan of a population (`shared.population`), which shards and referee share."""

from __future__ import annotations

import numpy as np

from privrec.shared.config import ExperimentConfig
from privrec.shared.data import make_synthetic
from privrec.shared.population import population_plan
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
